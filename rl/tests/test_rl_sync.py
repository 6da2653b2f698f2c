"""Weight sync Megatron -> vLLM (MoE policy): the engine follows the trainer exactly, and restoring restores."""
from __future__ import annotations

import json
import sys

import pytest

from rl.tests.conftest import run


@pytest.fixture(scope="module", params=["files", "memory"])
def sync_result(chain, tmp_path_factory, request):
    """each check through both paths: safetensors + reload, and shared-memory tensors + the same reload"""
    out = tmp_path_factory.mktemp("sync") / "sync.json"
    r = run([sys.executable, "rl/tests/_sync_check.py", str(chain / "policy"), str(out), request.param], timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    res = json.loads(out.read_text())
    assert res["sync"]["sync_path"] == request.param
    return res


@pytest.mark.slow
def test_engine_matches_trainer_before_and_after_an_update(sync_result):
    assert sync_result["before_err"] < 1e-4
    assert sync_result["engine_change"] > 1e-2  # the update moved the engine's logprobs of the fixed tokens
    assert sync_result["after_err"] < 1e-4  # ...to the trainer's recomputed ones


@pytest.mark.slow
def test_restoring_old_weights_restores_greedy_output(sync_result):
    assert sync_result["greedy_after"] != sync_result["greedy_before"]  # the update changed what the engine says
    assert sync_result["restored_trainer_err"] < 1e-6  # the trainer holds its old weights again
    assert sync_result["greedy_restored"] == sync_result["greedy_before"]  # ...and syncing them restores the engine
    assert sync_result["restored_err"] < 1e-6
