"""bf16 training from filled-in weights (SFT/RL from a parent, base from its seeded init) trains like float32.

With train.dtype=bfloat16 Megatron's Float16OptimizerWithFloat16Params keeps fp32 main copies of the bf16
params, cloned when the optimizer is built, and copies them back into the model after every step. The run
skeleton builds the optimizer before Hooks.setup fills the weights, so without a refresh of the main copies
the first step overwrote the parent's weights with the fresh model's (loss -> ~ln(vocab), whatever the lr).
A resumed bf16 run must continue exactly: the step checkpoint restores the fp32 main params. With
optim.bf16_rounding=stochastic (model/rounding.py) updates below half a bf16 step reach the weights as in float32.
"""
from __future__ import annotations

import pytest

from model.tests.conftest import helper_json

TINY_LR_TOL = 0.02  # one step at lr 1e-7: the loss moves by bf16 rounding only
CURVE_TOL = 0.05  # bf16 vs float32 at lr 1e-3, per step (seen: <= 0.008)
RESUME_TOL = 1e-6  # a resumed bf16 run vs the uninterrupted one (seen: equal)


@pytest.fixture(scope="module")
def losses(session_tmp):
    return helper_json(session_tmp / "bf16.json", "_run_bf16.py", "--run-dir", str(session_tmp / "bf16_runs"))


def test_parent_is_better_than_fresh_model(losses):
    # else "the loss did not jump back to the fresh model's" would prove nothing
    assert losses["parent"][-1] < losses["fresh_model_loss"] - 1.5, losses


def test_bf16_tiny_lr_step_keeps_loss(losses):
    before, after = losses["bf16_tiny_lr"]
    assert abs(after - before) <= TINY_LR_TOL, (
        f"one bf16 step at lr 1e-7 moved the loss {before:.4f} -> {after:.4f} (fresh model: "
        f"{losses['fresh_model_loss']:.4f}): the optimizer's fp32 main params are not the model's weights")


def test_bf16_trains_like_fp32(losses):
    bf16, fp32 = losses["bf16"], losses["fp32"]
    assert len(bf16) == len(fp32) >= 3
    assert fp32[-1] < fp32[0] - 0.2, f"the float32 run did not train: {fp32}"
    assert bf16[-1] < bf16[0] - 0.2, f"the bf16 run did not train: {bf16}"
    diffs = [abs(a - b) for a, b in zip(bf16, fp32)]
    assert max(diffs) <= CURVE_TOL, f"bf16 losses {bf16} differ from float32 {fp32} by up to {max(diffs):.3g}"


def test_bf16_resume_continues_the_run(losses):
    assert losses["bf16_resumed_at"] == 2
    got, ref = losses["bf16_resumed"], losses["bf16"][2:]
    assert len(got) == len(ref) >= 2
    assert max(abs(a - b) for a, b in zip(got, ref)) <= RESUME_TOL, f"resumed bf16 losses {got} != uninterrupted {ref}"


SMALL_LR_TOL = 0.002  # stochastic rounding vs float32 at SMALL_LR, per step (seen: <= 4e-4)


def _drop(curve: list[float]) -> float:
    return curve[0] - curve[-1]


def test_nearest_rounding_drops_small_updates(losses):
    # the regime the stochastic-rounding tests are about: here bf16 rounded to nearest learns visibly less
    fp32, bf16 = losses["fp32_small_lr"], losses["bf16_small_lr"]
    assert _drop(fp32) > 0.01, f"float32 did not train at the small lr: {fp32}"
    assert _drop(bf16) < 0.7 * _drop(fp32), f"bf16 (nearest) {bf16} kept up with float32 {fp32}"


def test_stochastic_rounding_keeps_small_updates(losses):
    fp32, sr = losses["fp32_small_lr"], losses["bf16_sr_small_lr"]
    assert 0.8 <= _drop(sr) / _drop(fp32) <= 1.2, f"stochastic rounding {sr} vs float32 {fp32}"
    diffs = [abs(a - b) for a, b in zip(sr, fp32)]
    assert len(sr) == len(fp32) and max(diffs) <= SMALL_LR_TOL, f"stochastic rounding {sr} vs float32 {fp32}"


def test_stochastic_rounding_resume_continues_the_run(losses):
    # the rounding noise is seeded by the step, which the step checkpoint restores
    assert losses["bf16_sr_resumed_at"] == 2
    got, ref = losses["bf16_sr_resumed"], losses["bf16_sr"][2:]
    assert len(got) == len(ref) >= 2
    assert max(abs(a - b) for a, b in zip(got, ref)) <= RESUME_TOL, f"resumed {got} != uninterrupted {ref}"
