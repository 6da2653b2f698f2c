"""The RL loop end to end on the micro policy with toy domains; kill -9 resumes to the same metrics."""
from __future__ import annotations

import json
import sys

import pytest

from model import manifest
from rl.tests.conftest import kill9_at_checkpoint, run, torchrun

SETS = ["train.steps=3", "train.save_every=1", "sched.families=[toy]", "reward.timeout_s=1", "train.seq_length=256",
        "eval.at_start=true", "eval.samples=2"]
KEYS = ("reward", "pass_rate", "zero_var_frac", "mismatch_abs", "rollout_s", "reward_s", "update_s", "sync_s",
        "per_family", "infra_errors", "groups_used", "loss", "grad_norm", "tool_retries", "tool_infra_failed",
        "rollouts_cut")


def cmd(chain, out, *extra):
    sets = [x for s in SETS + list(extra) for x in ("--set", s)]
    return [sys.executable, "-m", "rl.01_train", "--in", str(chain / "policy"), "--data", str(chain / "domains"),
            "--out", str(out), "--results", str(out) + ".results", "--recipe", "micro_cpu", *sets]


def metrics(out):
    return [json.loads(x) for x in open(str(out) + ".results/metrics.jsonl")]


@pytest.fixture(scope="module")
def full(chain, tmp_path_factory):
    out = tmp_path_factory.mktemp("full") / "rl"
    r = run(cmd(chain, out), timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r.stdout


@pytest.mark.slow
def test_run_logs_every_step_and_publishes(full, chain):
    out, stdout = full
    ms = metrics(out)
    assert [m["step"] for m in ms] == [1, 2, 3]
    assert all(k in m for m in ms for k in KEYS)
    assert sum(1 for ln in stdout.splitlines() if ln.startswith("step ")) == 3
    assert sum(m["groups_used"] for m in ms) > 0  # toy.parity groups have reward variance
    trained = [m for m in ms if m["action_tokens"] > 0]
    assert trained and all(m["mismatch_abs"] < 1e-3 for m in trained)  # engine and trainer agree
    man = manifest.verify(out, stage="rl")
    assert man["parent"]["path"] == str(chain / "policy")
    assert (out / "hf" / "model.safetensors").exists() and (out / "mcore").is_dir()


@pytest.mark.slow
def test_sampled_eval_before_and_after_uses_the_same_items(full):
    out, stdout = full
    ev = json.loads((out.parent / (out.name + ".results") / "eval.json").read_text())
    items, start = ev["items"], ev["items_at_start"]
    assert [(r["item"], r["domain"]) for r in items] == [(r["item"], r["domain"]) for r in start]
    assert all(r["samples"] == 2 for r in items + start)  # eval.samples=2 completions per task
    d = ev["paired_delta"]["all"]["heldout"]
    assert d["tasks"] <= len(items) and d["ci95"][0] <= d["delta"] <= d["ci95"][1]
    assert "eval delta vs step 0 | all/heldout" in stdout


@pytest.mark.slow
def test_broken_verifiers_are_counted_never_passed(full):
    out, _ = full
    ms = metrics(out)
    assert sum(m["infra_errors"] for m in ms) > 0  # toy.raises / toy.hangs were drawn and survived
    toy = [m["per_family"]["toy"] for m in ms]
    assert all(f["infra_errors"] <= f["samples"] for f in toy)
    summary = manifest.verify(out, stage="rl")["scheduler"]
    assert summary["toy.raises"]["passed"] == summary["toy.hangs"]["passed"] == 0
    assert summary["toy.raises"]["tasks"] == summary["toy.hangs"]["tasks"] == 0  # infra is never an outcome


@pytest.fixture(scope="module")
def two_engines(chain, tmp_path_factory):
    """The `full` run on 2 processes with 2 engines (each generates half of every step's groups) and the experts
    split over them (EP=2: each engine's weights need the other rank's experts, gathered in memory), killed twice:
    kill -9 of rank 1 once step 1's checkpoint is published, then of rank 0 once step 2's is; each time the
    launcher stops the other rank and the rerun resumes."""
    d = tmp_path_factory.mktemp("two_engines")
    out = d / "rl"
    args = torchrun(2, "rl.01_train", *cmd(chain, out, "parallel.ep=2")[3:])
    one = {"OMP_NUM_THREADS": "1"}
    kill9_at_checkpoint(args, d / "rl.run", at_step=1, rank=1, extra_env=one)
    kill9_at_checkpoint(args, d / "rl.run", at_step=2, rank=0, extra_env=one)
    assert not out.exists()
    r = run(args, extra_env=one, timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    return out, r.stdout


@pytest.mark.slow
def test_two_engines_killed_on_either_rank_give_the_one_process_metrics(full, two_engines):
    ref, got = metrics(full[0]), metrics(two_engines[0])
    assert [m["step"] for m in got] == [1, 2, 3]
    for a, b in zip(ref, got):
        for k in ("reward", "pass_rate", "zero_var_frac", "groups_used", "infra_errors", "action_tokens",
                  "per_family", "truncated_frac"):
            assert a[k] == b[k], (a["step"], k)
        assert a["loss"] == pytest.approx(b["loss"], abs=1e-6)  # DP=2 / EP=2 sum the gradient in another order
        assert a["grad_norm"] == pytest.approx(b["grad_norm"], rel=1e-5)
        if b["action_tokens"]:  # both engines got all weights in memory: their logprobs are the trainer's
            assert b["mismatch_abs"] < 1e-5 and b["sync_path"] == "memory"
    ev = [json.loads((o.parent / (o.name + ".results") / "eval.json").read_text()) for o in (full[0], two_engines[0])]
    assert [(x["item"], x["passed"]) for x in ev[0]["items"]] == [(x["item"], x["passed"]) for x in ev[1]["items"]]


@pytest.mark.slow
def test_two_processes_run_two_engines_and_resume_twice(two_engines):
    stdout = two_engines[1]
    assert "EP=2 DP=2, 2 rollout engine(s)" in stdout
    assert "resumed from" in stdout and "step_000002" in stdout  # the last of the two kills


@pytest.mark.slow
def test_a_packed_update_trains_the_same_tokens_on_fewer_positions(full, chain, tmp_path):
    out = tmp_path / "rl"
    r = run(cmd(chain, out, "algo.pack=true", "train.steps=2", "eval.at_start=false", "eval.samples=0"), timeout=1200)
    assert r.returncode == 0, r.stderr[-4000:]
    ref, got = metrics(full[0])[:2], metrics(out)
    assert [m["action_tokens"] for m in got] == [m["action_tokens"] for m in ref]  # the same rollouts, all trained
    assert sum(m["positions"] for m in got) < sum(m["positions"] for m in ref)
    for m in got:  # packed rows attend within each trajectory: the trainer's logprobs are still the engine's
        assert not m["action_tokens"] or m["mismatch_abs"] < 1e-5


def test_bad_batch_geometry_is_refused_before_work(chain, tmp_path):
    r = run(cmd(chain, tmp_path / "rl", "parallel.global_batch_size=4"), timeout=600)
    assert r.returncode == 2
    last = r.stderr.strip().splitlines()[-1]
    assert last.startswith("error: parallel.global_batch_size=4 must equal groups_per_step*samples_per_prompt")
    assert not (tmp_path / "rl").exists() and not (tmp_path / "rl.run").exists()


def test_missing_domains_datasets_are_refused(chain, tmp_path):
    r = run([sys.executable, "-m", "rl.01_train", "--in", str(chain / "policy"), "--data", str(tmp_path / "nope"),
             "--out", str(tmp_path / "rl"), "--recipe", "micro_cpu"], timeout=600)
    assert r.returncode == 2 and "make data" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "rl").exists()
