"""Routing replay: the engine records the experts it routed to, and the trainer's forward can replay them."""
from __future__ import annotations

import json
import sys

import pytest

from rl.tests.conftest import run


@pytest.fixture(scope="module", params=[0.0, 0.25], ids=["engine_as_is", "flips_25pct"])
def check(chain, tmp_path_factory, request):
    out = tmp_path_factory.mktemp("routing") / "routing.json"
    r = run([sys.executable, "rl/tests/_routing_check.py", str(chain / "policy"), str(out), str(request.param)],
            timeout=900)
    assert r.returncode == 0, r.stderr[-4000:]
    return json.loads(out.read_text())


@pytest.mark.slow
def test_replay_brings_trainer_logprobs_to_the_engines(check):
    assert check["tokens"] > 50
    assert check["replay_err"] < 1e-5  # with the engine's experts the trainer computes the engine's logprobs


@pytest.mark.slow
def test_routing_mismatch_is_measured(check):
    if check["flip_frac"] == 0:
        assert check["routing_differ_frac"] < 0.01  # same weights, same kernels' routing: (almost) no token differs
        assert check["own_err"] < 1e-4
    else:
        assert 0.25 < check["routing_differ_frac"] < 0.9  # a token differs when any of its layers flipped
        assert check["own_err"] > 1e-2  # without replay the flips show in the logprobs
