"""make plan: cluster recipes fit their GPUs, bad layouts and misfits are refused, the estimates move the right way."""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from model import recipe
from model.plan import plan

ROOT = Path(__file__).resolve().parents[2]
CLUSTER = sorted(p for p in (ROOT / "sft" / "recipes").glob("*_h200x*.yaml"))


def _plan_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "model.plan", *args], cwd=ROOT, capture_output=True, text=True,
                          env={"PYTHONPATH": str(ROOT), "PATH": "/usr/bin:/bin"})


def _cfg(name: str, *overrides: str) -> dict:
    return recipe.load_recipe("sft", name, list(overrides))


def test_there_are_cluster_recipes():
    assert {p.stem for p in CLUSTER} >= {"qwen3_30b_a3b_h200x8", "kimi_k2_class_h200x256"}


@pytest.mark.parametrize("path", CLUSTER, ids=lambda p: p.stem)
def test_cluster_recipe_passes_plan(path):
    r = _plan_cli(str(path.relative_to(ROOT)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert "fits" in r.stdout and "<- recipe" in r.stdout


def test_wrong_world_size_is_one_line_error_with_numbers():
    r = _plan_cli("sft/recipes/kimi_k2_class_h200x256.yaml", "--world-size", "100")
    assert r.returncode == 2
    assert r.stderr.count("\n") == 1 and "world size 100" in r.stderr and "TP*PP*CP=8*4*1=32" in r.stderr


def test_layout_that_does_not_fit_exits_1():
    r = _plan_cli("sft/recipes/kimi_k2_class_h200x256.yaml", "--set", "parallel.recompute=none")
    assert r.returncode == 1 and "DOES NOT FIT" in r.stdout and "recompute=none" in r.stderr


def test_expert_parallel_splits_expert_params():
    a = plan(_cfg("kimi_k2_class_h200x256"))
    b = plan(_cfg("kimi_k2_class_h200x256", "parallel.ep=32"), world_size=128)
    assert b["params"]["per_gpu"] > a["params"]["per_gpu"] * 1.8  # experts dominate: half the EP, ~twice the params


def test_recompute_orders_activation_memory():
    acts = plan(_cfg("qwen3_30b_a3b_h200x8"))["memory_gib"]["activations"]
    assert acts["full"] < acts["selective"] < acts["none"]


def test_param_count_matches_published_sizes():
    p = plan(_cfg("qwen3_30b_a3b_h200x8"))["params"]
    assert 30.0e9 < p["total"] < 31.0e9 and 3.2e9 < p["active"] < 3.5e9  # Qwen3-30B-A3B: 30.5B / 3.3B


RL_CLUSTER = sorted(p for p in (ROOT / "rl" / "recipes").glob("*_h200x*.yaml"))


def _rl(name: str, *overrides: str) -> tuple[dict, dict]:
    from model.plan import rollout_plan

    cfg = recipe.load_recipe("rl", name, list(overrides))
    r = plan(cfg)
    return r, rollout_plan(cfg, r)


def test_there_are_rl_cluster_recipes_for_both_model_classes():
    assert {p.stem for p in RL_CLUSTER} >= {"qwen3_30b_a3b_h200x8", "kimi_k2_class_h200x256"}


@pytest.mark.parametrize("path", RL_CLUSTER, ids=lambda p: p.stem)
def test_rl_cluster_recipe_fits_with_its_engine(path):
    r = _plan_cli(str(path.relative_to(ROOT)))
    assert r.returncode == 0, r.stdout + r.stderr
    assert " x vLLM TP " in r.stdout and r.stdout.count("phase   ") == 2 and "DOES NOT FIT" not in r.stdout.split(
        "engine")[1]


def test_rl_plan_exits_1_naming_the_phase_that_does_not_fit():
    r = _plan_cli("rl/recipes/qwen3_30b_a3b_h200x8.yaml", "--set", "rollout.gpu_memory_utilization=0.6")
    assert r.returncode == 1 and r.stderr.count("\n") == 1 and "(rollout)" in r.stderr, r.stdout + r.stderr


def test_an_engine_that_stays_awake_adds_its_reservation_to_the_update():
    _, asleep = _rl("qwen3_30b_a3b_h200x8")
    for extra in (["rollout.sleep_between=false"], ["rollout.max_staleness=1"]):  # off, or generating beside it
        _, awake = _rl("qwen3_30b_a3b_h200x8", *extra)
        assert not awake["sleeps_during_update"] and awake["sleep_frees_gib"] == 0
        assert awake["phases_gib"]["update"] == pytest.approx(asleep["phases_gib"]["update"] + asleep["reservation_gib"])
    _, later = _rl("qwen3_30b_a3b_h200x8", "rollout.max_staleness=1", "rollout.overlap=false")
    assert later["sleeps_during_update"]  # collected after the update: it can sleep


def test_kv_cache_per_token_splits_kv_heads_over_engine_tp_and_replicates_past_them():
    _, e1 = _rl("qwen3_30b_a3b_h200x8", "rollout.tensor_parallel_size=1")  # 4 KV heads on one GPU
    _, e2 = _rl("qwen3_30b_a3b_h200x8", "rollout.tensor_parallel_size=2")  # 2 per GPU
    _, e8 = _rl("qwen3_30b_a3b_h200x8")  # TP 8 > 4 heads: one (replicated) head per GPU
    assert e1["kv_bytes_per_token"] == 2 * 48 * 4 * 128 * 2 == 2 * e2["kv_bytes_per_token"] == 4 * e8["kv_bytes_per_token"]
    assert e1["weights_gib"] == pytest.approx(8 * e8["weights_gib"])


def test_each_engine_holds_only_its_share_of_the_step():
    _, spread = _rl("qwen3_30b_a3b_h200x8", "rollout.tensor_parallel_size=2")  # 8 ranks / TP 2: 4 engines
    _, one = _rl("qwen3_30b_a3b_h200x8", "rollout.tensor_parallel_size=2", "rollout.engines=one")
    assert (spread["engines"], one["engines"]) == (4, 1)
    assert one["rollouts_per_engine"] == 4 * spread["rollouts_per_engine"]


def test_an_engine_tp_that_does_not_divide_the_world_is_refused():
    r = _plan_cli("rl/recipes/qwen3_30b_a3b_h200x8.yaml", "--set", "rollout.tensor_parallel_size=3")
    assert r.returncode == 2 and "not a multiple of rollout.tensor_parallel_size=3" in r.stderr, r.stdout + r.stderr
