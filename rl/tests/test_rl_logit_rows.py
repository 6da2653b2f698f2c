"""The GRPO update with logits at the action rows only (model/logit_rows.py) equals the update with logits at every
position: loss, gradient norm, weights after the step, and the logprobs of the trained tokens."""
from __future__ import annotations

import json
import sys

import pytest

from rl.tests.conftest import run

LOSS_TOL = 1e-6  # fp32, the same per-row logits up to the GEMM's summation order (seen: 3e-8)
LOGPROB_TOL = 1e-5  # (seen: equal)
PARAM_TOL = 1e-5  # one Adam step at lr 1e-3 moves weights by ~1e-3 (seen: 5e-7)


@pytest.fixture(scope="module", params=["untied", "tied"])  # tied: SmolLM2's output layer owns no weight
def res(tmp_path_factory, request):
    out = tmp_path_factory.mktemp("rows") / "rows.json"
    r = run([sys.executable, "rl/tests/_logit_rows_check.py", str(out), request.param], timeout=300)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(out.read_text())


def test_rows_mode_computes_logits_only_at_the_aligned_action_rows(res):
    assert all(s == [64, 2, 64] for s in res["full"]["output_inputs"])
    assert res["rows"]["output_inputs"] and all(s == [64, 1, 64] for s in res["rows"]["output_inputs"])


def test_update_loss_and_grad_norm_equal_the_full_update(res):
    assert res["full"]["action_tokens"] == res["rows"]["action_tokens"] == 45
    assert abs(res["full"]["loss"] - res["rows"]["loss"]) <= LOSS_TOL, res
    assert abs(res["full"]["grad_norm"] - res["rows"]["grad_norm"]) <= 1e-5 * res["full"]["grad_norm"], res


def test_logprobs_of_trained_tokens_equal_the_full_ones(res):
    full, rows = res["full"]["logprobs"], res["rows"]["logprobs"]
    assert len(full) == len(rows) == 45
    assert max(abs(a - b) for a, b in zip(full, rows)) <= LOGPROB_TOL


def test_weights_after_the_update_equal_the_full_update(res):
    assert res["params_moved"] > 100 * PARAM_TOL
    assert res["params_max_diff"] <= PARAM_TOL, res
