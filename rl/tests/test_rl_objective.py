"""GRPO objective: group advantages with infra exclusions, asymmetric clipping, token-level sums, TIS."""
from __future__ import annotations

import pytest
import torch

from rl.objective import group_advantages, token_loss


def test_infra_errors_are_left_out_of_the_group():
    adv, info = group_advantages([1.0, 0.0, None, 1.0], 4, normalize_std=False)
    assert adv[2] is None and info == [True]
    assert adv[0] == pytest.approx(1 / 3) and adv[1] == pytest.approx(-2 / 3)


def test_all_equal_groups_carry_no_signal():
    adv, info = group_advantages([1.0, 1.0, 1.0, 1.0, None, None], 3, normalize_std=True)
    assert info == [False, False]  # group 2: one valid reward only
    assert adv[:3] == [0.0, 0.0, 0.0]


def test_std_normalization():
    adv, _ = group_advantages([1.0, 0.0], 2, normalize_std=True)
    assert adv[0] == pytest.approx(1 / 2 ** 0.5, rel=1e-4) and adv[1] == pytest.approx(-1 / 2 ** 0.5, rel=1e-4)


def _loss(new, old, adv, **kw):
    t = lambda x: torch.tensor(x, dtype=torch.float64)  # noqa: E731
    new = t(new).requires_grad_()
    kw = {"clip_low": 0.2, "clip_high": 0.28, "tis_cap": 0.0} | kw
    loss, st = token_loss(new, t(old), t(kw.pop("rollout", old)), t(adv), torch.ones(len(adv)), **kw)
    loss.backward()
    return loss, new.grad, st


def test_clipping_is_asymmetric():
    lo, hi = torch.log(torch.tensor(0.7)).item(), torch.log(torch.tensor(1.25)).item()
    # ratio 1.25 with positive advantage: inside [0.8, 1.28], still has gradient
    _, g, st = _loss([hi], [0.0], [1.0])
    assert g.abs().item() > 0 and st["clip_frac_sum"].item() == 0
    # ratio 0.7 with negative advantage: below 1 - 0.2, clipped, no gradient
    _, g, st = _loss([lo], [0.0], [-1.0])
    assert g.item() == 0 and st["clip_frac_sum"].item() == 1


def test_loss_is_a_token_sum():
    loss, _, st = _loss([0.0, 0.0, 0.0], [0.0, 0.0, 0.0], [1.0, 1.0, -2.0])
    assert loss.item() == pytest.approx(0.0) and st["tokens"].item() == 3
    loss, _, _ = _loss([0.0] * 3, [0.0] * 3, [1.0] * 3)
    assert loss.item() == pytest.approx(-3.0)


def test_truncated_importance_weight_and_mismatch():
    # the engine gave the token logprob -1, the trainer 0: weight e^1 capped at 2, mismatch 1
    loss, _, st = _loss([0.0], [0.0], [1.0], rollout=[-1.0], tis_cap=2.0)
    assert loss.item() == pytest.approx(-2.0)
    assert st["mismatch_abs_sum"].item() == pytest.approx(1.0) and st["tis_capped_sum"].item() == 1


def test_kl_to_reference_pulls_back():
    _, g, st = _loss([0.5], [0.5], [0.0], ref_lp=torch.tensor([0.0], dtype=torch.float64), kl_coef=1.0)
    assert st["kl_sum"].item() > 0 and g.item() > 0  # gradient descent lowers logp toward the reference


def test_micro_batch_is_cut_after_its_last_trained_position():
    from rl.objective import trim_microbatch

    mask = torch.zeros(2, 64)
    mask[0, 5:10] = 1
    mask[1, 20] = 1  # the latest trained position of the micro batch
    mb = {"tokens": torch.arange(128).view(2, 64), "loss_mask": mask, "advantages": torch.ones(2, 64)}
    out = trim_microbatch(mb, multiple=16)
    assert out["tokens"].shape == (2, 32) and torch.equal(out["tokens"], mb["tokens"][:, :32])
    assert out["loss_mask"].sum() == mask.sum()  # nothing trained is lost
    assert trim_microbatch({"loss_mask": torch.zeros(4, 64)}, 16)["loss_mask"].shape == (4, 16)  # filler


def test_masked_is_drops_the_tokens_outside_its_band_and_keeps_the_others():
    """rho = e^1 (outside [0.5, 2]) is dropped, rho = e^0.5 (inside) is kept at full weight; TIS off."""
    kw = {"mis_low": 0.5, "mis_high": 2.0}
    loss, g, st = _loss([0.0, 0.0], [0.0, 0.0], [1.0, 1.0], rollout=[-1.0, -0.5], **kw)
    assert loss.item() == pytest.approx(-(2.718281828459045 ** 0.5))  # only the second token, weight rho
    assert g[0].item() == 0 and g[1].item() != 0
    assert st["is_masked_sum"].item() == 1 and st["tokens"].item() == 2  # masked tokens stay in the normaliser


def test_masked_is_masks_before_the_cap_counts():
    _, _, st = _loss([0.0, 0.0], [0.0, 0.0], [1.0, 1.0], rollout=[-3.0, -0.6], tis_cap=1.5, mis_low=0.1,
                     mis_high=10.0)
    assert st["is_masked_sum"].item() == 1 and st["tis_capped_sum"].item() == 1  # e^3 masked; e^0.6 > 1.5 capped


def test_sequence_level_weight_is_the_product_over_the_trajectory():
    """two tokens with log-ratio 0.3 and 0.4: every token of the trajectory gets e^0.7 (token level: e^0.3, e^0.4);
    padding (mask 0) does not enter the product."""
    from rl.objective import engine_weights

    old = torch.zeros(1, 3, dtype=torch.float64)
    rollout = torch.tensor([[-0.3, -0.4, -5.0]], dtype=torch.float64)
    mask = torch.tensor([[1.0, 1.0, 0.0]], dtype=torch.float64)
    wide = {"mis_low": 0.01, "mis_high": 100.0}  # MIS on with a band nothing leaves: w = rho
    w, _, _ = engine_weights(old, rollout, mask, tis_cap=0.0, is_level="sequence", **wide)
    assert torch.allclose(w[0, :2], torch.exp(torch.tensor(0.7, dtype=torch.float64)).expand(2))
    w, _, _ = engine_weights(old, rollout, mask, tis_cap=0.0, is_level="token", **wide)
    assert torch.allclose(w[0, :2], torch.exp(torch.tensor([0.3, 0.4], dtype=torch.float64)))
    w, capped, masked = engine_weights(old, rollout, mask, tis_cap=0.0, mis_low=0.5, mis_high=1.5,
                                       is_level="sequence")
    assert w[0, :2].tolist() == [0.0, 0.0] and masked[0, :2].tolist() == [1.0, 1.0]  # e^0.7 > 1.5: whole trajectory
    w, capped, _ = engine_weights(old, rollout, mask, tis_cap=1.5, is_level="sequence")
    assert torch.allclose(w[0, :2], torch.tensor([1.5, 1.5], dtype=torch.float64)) and capped[0, :2].sum() == 2


def test_every_correction_is_the_identity_when_engine_and_trainer_agree():
    """rho = 1 everywhere: TIS, MIS and sequence-level IS give the uncorrected loss and gradient exactly."""
    new, old, adv = [0.1, -0.2, 0.05], [0.0, -0.1, 0.0], [1.0, -1.0, 0.5]
    base_loss, base_g, _ = _loss(new, old, adv)
    for kw in ({"tis_cap": 2.0}, {"mis_low": 0.5, "mis_high": 2.0}, {"tis_cap": 2.0, "is_level": "sequence"},
               {"mis_low": 0.9, "mis_high": 1.1, "is_level": "sequence"}):
        loss, g, st = _loss(new, old, adv, **kw)
        assert loss.item() == base_loss.item() and torch.equal(g, base_g), kw
        assert st["is_masked_sum"].item() == 0 and st["tis_capped_sum"].item() == 0


def test_a_sequence_weight_that_overflows_is_masked_or_capped_never_nan():
    from rl.objective import engine_weights

    old, rollout, mask = torch.zeros(1, 400), torch.full((1, 400), -2.0), torch.ones(1, 400)  # rho = e^800 = inf
    w, _, masked = engine_weights(old, rollout, mask, tis_cap=0.0, mis_low=0.5, mis_high=2.0, is_level="sequence")
    assert torch.equal(w, torch.zeros_like(w)) and masked.sum() == 400
    w, capped, _ = engine_weights(old, rollout, mask, tis_cap=2.0, is_level="sequence")
    assert torch.equal(w, torch.full_like(w, 2.0)) and capped.sum() == 400
