"""`train.loss_rows_only` (model/train.py with model/logit_rows.py): the output layer and the loss computed only at
the positions the loss mask counts must give the losses, gradients and weights of the full output layer (float32,
to GEMM summation order), on fewer rows."""
from __future__ import annotations

import pytest

from model.tests.conftest import helper_json

TOL = 1e-5  # relative; measured: losses 6e-8, gradients 1.3e-7, weights after 3 steps 2.0e-6


@pytest.fixture(scope="module")
def d(session_tmp):
    return helper_json(session_tmp / "loss_rows.json", "_run_loss_rows.py")


def test_the_output_layer_computes_fewer_rows(d):
    assert 0 < d["rows_rows"] < d["rows_full"], d


def test_losses_match_the_full_output_layer(d):
    for a, b in zip(d["losses_rows"], d["losses_full"], strict=True):
        assert abs(a - b) <= TOL * abs(b), d
    assert abs(d["eval_rows"] - d["eval_full"]) <= TOL * abs(d["eval_full"]), d


def test_gradients_and_weights_match_the_full_output_layer(d):
    assert d["grad_max_rel"] <= TOL and d["weight_max_rel"] <= TOL, d
