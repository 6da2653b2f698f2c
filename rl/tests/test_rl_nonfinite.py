"""The update refuses to step on a non-finite engine logprob of a trained token or a non-finite loss
(Megatron's float32 optimizer would step on the NaN gradient and publish NaN weights)."""
from __future__ import annotations

import math

import pytest
import torch

from rl.policy import _refuse_non_finite


def _batch(lp: float, at_trained: bool) -> dict:
    mask = torch.tensor([[0.0, 1.0, 1.0, 0.0]])
    lps = torch.full((1, 4), -0.5)
    lps[0, 1 if at_trained else 3] = lp
    return {"rollout_logprobs": lps, "loss_mask": mask}


def test_finite_batches_pass():
    _refuse_non_finite([_batch(-2.0, True)], {"loss_sum": 0.3})


@pytest.mark.parametrize("lp", [math.nan, -math.inf])
def test_a_non_finite_engine_logprob_outside_the_trained_tokens_is_ignored(lp):
    _refuse_non_finite([_batch(lp, False)], {"loss_sum": 0.3})


@pytest.mark.parametrize("lp", [math.nan, -math.inf])
def test_a_non_finite_engine_logprob_of_a_trained_token_is_refused(lp):
    with pytest.raises(RuntimeError, match="rollout engine gave 1 non-finite logprobs"):
        _refuse_non_finite([_batch(-1.0, True), _batch(lp, True)], {"loss_sum": 0.3})


def test_a_non_finite_loss_is_refused():
    with pytest.raises(RuntimeError, match="loss is not finite"):
        _refuse_non_finite([_batch(-1.0, True)], {"loss_sum": math.nan})
