"""Bounded-staleness rollouts (rollout.max_staleness k): the rollouts of step s come from the weights of step
max(0, s - k) whatever the timing, and a killed run resumes to the same metrics."""
from __future__ import annotations

import pytest

from rl.tests.conftest import kill9_at_checkpoint, run
from rl.tests.test_rl_train import cmd, metrics

ASYNC = ["train.steps=4", "eval.at_start=false", "eval.samples=0", "rollout.max_staleness=2"]
SAME = ("reward", "pass_rate", "zero_var_frac", "groups_used", "infra_errors", "action_tokens", "weight_version",
        "staleness", "mismatch_abs")


def _same(ref, got):
    assert [m["step"] for m in got] == [m["step"] for m in ref]
    for a, b in zip(ref, got):
        for k in SAME:
            assert a[k] == b[k], (a["step"], k, a[k], b[k])
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6) and a["grad_norm"] == pytest.approx(b["grad_norm"],
                                                                                                    rel=1e-5)


@pytest.fixture(scope="module")
def k2(chain, tmp_path_factory):
    out = tmp_path_factory.mktemp("k2") / "rl"
    r = run(cmd(chain, out, *ASYNC), timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r.stdout


@pytest.mark.slow
def test_each_step_trains_on_rollouts_of_the_weights_k_steps_before(k2):
    out, stdout = k2
    ms = metrics(out)
    assert [m["weight_version"] for m in ms] == [0, 0, 0, 1]  # max(0, s - 2) for s = 0..3
    assert [m["staleness"] for m in ms] == [0, 1, 2, 2]
    assert "weights v1 (stale 2)" in stdout
    # the engine is behind the trainer: its logprobs of the sampled tokens differ from the trainer's once stale
    assert ms[0]["mismatch_abs"] < 1e-3 and any(m["mismatch_abs"] > 1e-3 for m in ms[1:] if m["action_tokens"])


@pytest.mark.slow
def test_kill9_resume_keeps_the_batches_collected_ahead_and_overlap_changes_nothing(k2, chain, tmp_path):
    """the k=2 run with generation after the update instead of beside it (overlap off), killed with -9 after its
    first step checkpoint and resumed: the same metrics as the uninterrupted run with overlap on. It fails when the
    checkpoint loses the batches collected ahead (the resumed step 1 would train on version 1, not 0) or when the
    timing of the collection changes what it collects."""
    out = tmp_path / "rl"
    args = cmd(chain, out, *ASYNC, "rollout.overlap=false")
    kill9_at_checkpoint(args, tmp_path / "rl.run")
    r = run(args, timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    assert "resumed from" in r.stdout
    _same(metrics(k2[0]), metrics(out))


@pytest.mark.parametrize("extra", [["--staleness-steps", "6"], ["--staleness-steps", "2", "--data", "x"]])
def test_bench_rl_refuses_staleness_runs_it_cannot_time_before_any_work(tmp_path, extra):
    import sys

    r = run([sys.executable, "-m", "rl.bench_rl", "--in", str(tmp_path / "none"), "--out", str(tmp_path / "b.json"),
             *extra], timeout=300)
    assert r.returncode == 2 and r.stderr.strip().count("\n") == 0 and "--staleness-steps" in r.stderr, r.stderr
    assert not (tmp_path / "b.json").exists()
