"""Logits at the loss rows only (model/logit_rows.py): the same logits and gradients there as the full output."""
from __future__ import annotations

import pytest
import torch

from model import logit_rows
from model.tests.conftest import helper_json

LOGIT_TOL = 1e-5  # fp32: the same per-row logits up to the GEMM's summation order (seen: equal)
GRAD_TOL = 1e-6  # against gradients of up to 0.23 (seen: 1.1e-8)


@pytest.fixture(scope="module")
def res(session_tmp):
    return helper_json(session_tmp / "logit_rows.json", "_run_logit_rows.py")


def test_output_layer_sees_only_the_aligned_loss_rows(res):
    assert res["output_inputs"] == [[32, 4, 64], [64, 1, 64]]  # [s, b, h]: every position; 32 loss rows -> 64
    assert res["shapes"] == [[4, 32, 512], [1, 64, 512]]


def test_logits_at_the_loss_rows_equal_the_full_ones(res):
    assert res["logits_max_diff"] <= LOGIT_TOL, res


def test_gradients_of_a_loss_on_those_rows_equal_the_full_ones(res):
    assert res["grad_numel"][0] == res["grad_numel"][1] and res["grad_max"] > 100 * GRAD_TOL
    assert res["grad_max_diff"] <= GRAD_TOL, res


def test_rows_are_the_loss_positions_then_the_first_others_up_to_the_alignment():
    mask = torch.zeros(2, 100)
    mask[0, 90:] = 1
    mask[1, 95:] = 1
    rows = logit_rows.rows_for(mask, align=64)
    assert int(rows.sum()) == 64
    assert bool(rows[mask > 0].all())
    assert bool(rows[0, :49].all()) and not bool(rows[0, 49:90].any())  # 15 loss rows + the first 49 others


def test_rows_cover_everything_when_the_alignment_exceeds_the_positions():
    mask = torch.zeros(1, 50)
    mask[0, 40:] = 1
    assert bool(logit_rows.rows_for(mask, align=64).all())
