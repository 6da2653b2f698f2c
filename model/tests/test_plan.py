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
