"""Packing the RL update (rl/packing.py): rows hold whole trajectories, attend within them, and lose no trained token;
the sequence-level importance weight stays one per trajectory."""
from __future__ import annotations

import pytest
import torch

from model.config import ConfigError
from rl import objective, packing
from rl.config import RLConfig


def _sample(n_prompt: int, n_action: int, adv: float, seq: int = 64, seed: int = 0) -> dict:
    g = torch.Generator().manual_seed(seed)
    n = n_prompt + n_action
    mask = torch.zeros(seq)
    mask[n_prompt:n] = 1
    return {"tokens": torch.randint(5, 100, (seq,), generator=g), "labels": torch.randint(5, 100, (seq,), generator=g),
            "loss_mask": mask, "advantages": torch.full((seq,), adv),
            "rollout_logprobs": -torch.rand(seq, generator=g) * mask, "position_ids": torch.arange(seq)}


def test_rows_hold_every_trajectory_once_within_capacity_and_evenly():
    lengths = [30, 0, 12, 50, 7, 33, 20, 0, 64]
    rows = packing.balanced_rows(lengths, 64)
    assert sorted(i for r in rows for i in r) == [i for i, n in enumerate(lengths) if n]
    fills = [sum(lengths[i] for i in r) for r in rows]
    assert max(fills) <= 64 and rows == packing.balanced_rows(lengths, 64)  # within capacity; deterministic
    assert len(rows) == 4 and max(fills) - min(fills) <= 64 // 2  # 216 tokens: 4 rows, none nearly empty
    assert [len(r) for r in packing.balanced_rows([10] * 12, 64)] == [6, 6]  # 120 tokens: 2 rows of 60
    assert len(packing.balanced_rows([40, 40, 40], 64)) == 3  # 120 tokens, but 2 rows would overflow


def test_packed_rows_keep_every_trained_token_and_drop_untrained_samples():
    samples = [_sample(10, 5, 1.0, seed=1), _sample(20, 0, 0.0, seed=2), _sample(8, 12, -1.0, seed=3),
               _sample(30, 20, 0.5, seed=4)]
    mbs = packing.pack(samples, 64, micro_batch_size=2)
    assert sum(int(b["loss_mask"].sum()) for b in mbs) == 5 + 12 + 20
    assert sum(b["tokens"].shape[0] for b in mbs) == 2  # 15 + 20 + 50 positions fit in two rows of 64
    for b in mbs:
        for row in range(b["tokens"].shape[0]):
            for d in b["doc_ids"][row].unique().tolist():
                if d == 0:
                    continue
                at = (b["doc_ids"][row] == d).nonzero().flatten()
                src = next(s for s in samples if torch.equal(s["tokens"][:len(at)], b["tokens"][row, at]))
                assert torch.equal(src["loss_mask"][:len(at)], b["loss_mask"][row, at])
                assert torch.equal(src["rollout_logprobs"][:len(at)], b["rollout_logprobs"][row, at])


def test_a_trajectory_attends_only_to_itself_and_causally():
    b = packing.pack([_sample(4, 4, 1.0, seed=1), _sample(2, 6, 1.0, seed=2)], 16, micro_batch_size=1)[0]
    blocked = b["attention_mask"][0, 0]  # True = masked
    doc = b["doc_ids"][0]
    for q in range(doc.numel()):
        for k in range(doc.numel()):
            assert bool(blocked[q, k]) == (not (doc[q] == doc[k] and k <= q)), (q, k)


def test_sequence_weights_are_one_per_trajectory_in_a_packed_row():
    a, b = _sample(3, 6, 1.0, seed=5), _sample(2, 7, -1.0, seed=6)
    for i, s in enumerate((a, b)):  # the trainer's logprobs: the engine's, perturbed on the sampled tokens
        s["old"] = s["rollout_logprobs"] + 0.05 * torch.randn(64, generator=torch.Generator().manual_seed(i)) \
            * s["loss_mask"]
    kw = dict(tis_cap=2.0, mis_low=0.5, mis_high=1.5, is_level="sequence")
    mb = packing.pack([a, b], 32, micro_batch_size=1, fields=(*packing.FIELDS, "old"))[0]
    w = objective.engine_weights(mb["old"], mb["rollout_logprobs"], mb["loss_mask"], **kw, doc_ids=mb["doc_ids"])[0][0]
    for s in (a, b):
        alone = objective.engine_weights(s["old"][None], s["rollout_logprobs"][None], s["loss_mask"][None], **kw)[0][0]
        d = next(d for d in (1, 2) if torch.equal(mb["tokens"][0, mb["doc_ids"][0] == d], s["tokens"][:9]))
        at = (mb["doc_ids"][0] == d).nonzero().flatten()
        assert torch.allclose(w[at], alone[:len(at)])
    row = objective.engine_weights(mb["old"], mb["rollout_logprobs"], mb["loss_mask"], **kw)[0][0]
    assert not torch.allclose(row, w)  # one product over the whole row would mix the two trajectories


def test_an_empty_micro_batch_trains_nothing():
    b = packing.empty_microbatch()
    assert b["loss_mask"].sum() == 0 and b["tokens"].shape == (1, 16) and b["attention_mask"].shape == (1, 1, 16, 16)


def test_shorter_rows_keep_every_trained_token_and_fit_the_longest_trajectory():
    samples = [_sample(10, 5, 1.0, seed=1), _sample(8, 12, -1.0, seed=3), _sample(30, 20, 0.5, seed=4),
               _sample(4, 6, 1.0, seed=5)]
    full = packing.pack(samples, 64, micro_batch_size=8)
    short = packing.pack(samples, 64, micro_batch_size=8, row_length=24)
    assert sum(b["tokens"].shape[0] for b in full) == 2  # 15 + 20 + 50 + 10 positions in rows of 64
    widths = [int((b["doc_ids"][r] > 0).sum()) for b in short for r in range(b["tokens"].shape[0])]
    assert sorted(widths) == [10, 15, 20, 50]  # 24 holds no pair; the 50-token trajectory gets a row of its own
    assert sum(float(b["loss_mask"].sum()) for b in short) == sum(float(b["loss_mask"].sum()) for b in full)


def test_pack_length_beyond_the_sequence_length_is_refused():
    cfg = RLConfig.from_dict({"rollout": {"groups_per_step": 2, "samples_per_prompt": 4},
                              "algo": {"pack": True, "pack_length": 2048}})
    with pytest.raises(ConfigError, match="algo.pack_length=2048 must be in"):
        cfg.check_batch(8, 1, 1, 1, seq_length=1024)


def test_packing_with_pipeline_stages_is_refused():
    cfg = RLConfig.from_dict({"rollout": {"groups_per_step": 2, "samples_per_prompt": 4}, "algo": {"pack": True}})
    with pytest.raises(ConfigError, match="algo.pack=true needs parallel.pp=1"):
        cfg.check_batch(8, 1, 1, 2, pp=2)


def test_engine_routing_rides_along_packed_rows_and_padding_routes_itself():
    samples = [_sample(10, 5, 1.0, seed=1), _sample(8, 12, -1.0, seed=3)]
    for j, s in enumerate(samples):
        s["routing"] = torch.full((64, 3, 2), j + 1, dtype=torch.int16)
    mbs = packing.pack(samples, 64, micro_batch_size=2)
    rt = mbs[0]["routing"]
    assert rt.shape[:2] == mbs[0]["tokens"].shape and rt.shape[2:] == (3, 2) and rt.dtype == torch.int16
    doc = mbs[0]["doc_ids"]
    assert ((rt[..., 0, 0] == -1) == (doc == 0)).all()  # padding: -1, the trainer's own routing
    assert (rt[doc > 0] > 0).all()
