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


FLIPS = ["train.steps=3", "eval.at_start=false", "eval.samples=0", "rollout.record_routing=true",
         "rollout.router_flip_frac=0.25", "algo.pack=true", "rollout.dynamic_sampling=false"]  # every group trains


@pytest.mark.slow
@pytest.mark.parametrize("replay", [False, True], ids=["own_routing", "replayed"])
def test_rl_steps_with_router_flips_log_the_routing_mismatch_and_replay_removes_it(chain, tmp_path, replay):
    from rl.tests.test_rl_train import cmd, metrics

    out = tmp_path / "rl"
    r = run(cmd(chain, out, *FLIPS, f"algo.routing_replay={str(replay).lower()}"), timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    ms = [m for m in metrics(out) if m["action_tokens"]]
    assert ms and "routing differs" in r.stdout
    assert all(m["routing_differ_frac"] > 0.2 for m in ms)  # the flipped engine routed otherwise on those tokens
    if replay:  # the trainer's old logprobs are the engine's again
        assert all(m["mismatch_abs"] < 1e-5 for m in ms)
    else:
        assert all(m["mismatch_abs"] > 1e-4 for m in ms)


@pytest.mark.slow
def test_int8_rollout_engine_trains_off_its_logprobs_and_a_float32_engine_evaluates(chain, tmp_path):
    """rollout.quantization=w8a8_int8: the engine's logprobs differ from the float32 trainer's at every trained step,
    by int8 rounding's amount (a broken in-place reload gave NaN or garbage), and the held-out evaluation at start
    (the parent's weights) is the plain run's, item for item: the protocol's float32 engine evaluates, not the int8
    one."""
    from model.quantize import serve_dtype
    from rl.tests.test_rl_train import cmd, metrics

    runs = {}
    for name, extra in (("plain", []), ("int8", ["rollout.quantization=w8a8_int8",
                                                  f"rollout.dtype={serve_dtype()[0]}"])):
        out = tmp_path / name
        r = run(cmd(chain, out, "train.steps=3", "rollout.dynamic_sampling=false", *extra), timeout=1200)
        assert r.returncode == 0, r.stderr[-4000:]
        runs[name] = out
    trained = [m for m in metrics(runs["int8"]) if m["action_tokens"]]
    assert trained and all(m["mismatch_abs"] > 1e-4 for m in trained)  # float32 engines: < 1e-5
    assert all(m["mismatch_abs"] < 2e-2 for m in trained)  # int8 rounding, not a broken reload (measured: 6.8e-4)

    def at_start(out):
        ev = json.loads((out.parent / (out.name + ".results") / "eval.json").read_text())
        return [(r["item"], r["domain"], r["passed"]) for r in ev["items_at_start"]]
    assert at_start(runs["int8"]) == at_start(runs["plain"])
