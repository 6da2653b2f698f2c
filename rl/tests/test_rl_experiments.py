"""rl/02_experiments.py: arm names and where each arm's files go (weights never under results/)."""
from __future__ import annotations

import argparse
import importlib
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
exp = importlib.import_module("rl.02_experiments")


def _args(experiment, ks="1,4,all", seeds="0,1"):
    return argparse.Namespace(experiment=experiment, ks=ks, seeds=seeds)


def test_arm_names_are_the_ones_the_notebooks_read():
    scaling = [n for n, _ in exp.arms(_args("domain_scaling"))]
    sched = [n for n, _ in exp.arms(_args("scheduler"))]
    assert scaling == ["k1_s0", "k4_s0", "kall_s0", "k1_s1", "k4_s1", "kall_s1"]
    assert all(re.fullmatch(r"k(\d+|all)_s(\d+)", n) for n in scaling)  # notebooks/05_rl_domain_scaling.py
    assert sched == ["uniform_s0", "pass_rate_s0", "uniform_s1", "pass_rate_s1"]
    assert all(re.fullmatch(r"(.+)_s(\d+)", n) for n in sched)  # notebooks/06_rl_curves.py


def test_arm_weights_go_to_work_and_metrics_next_to_the_summary(tmp_path):
    out = tmp_path / "results" / "rl" / "experiments" / "domain_scaling.json"
    ckpt, run = exp.arm_paths(out, tmp_path / "ck" / "rl_experiments" / "domain_scaling", "k4_s0")
    assert run == tmp_path / "results" / "rl" / "experiments" / "domain_scaling" / "k4_s0"
    assert ckpt == tmp_path / "ck" / "rl_experiments" / "domain_scaling" / "k4_s0"
    assert (tmp_path / "results") not in ckpt.parents


def test_seed_arms_change_only_the_seed_and_seed_0_is_the_recipes_own_run():
    arms = exp.arms(_args("seeds", seeds="0,1,2"))
    assert [n for n, _ in arms] == ["s0", "s1", "s2"]
    assert [sets for _, sets in arms] == [["train.seed=1234"], ["train.seed=1235"], ["train.seed=1236"]]
    from model import recipe

    for path in sorted((ROOT / "rl" / "recipes").glob("*_cpu.yaml")):  # make rl's own run is arm s0
        assert recipe.load_recipe("rl", str(path), [])["train"]["seed"] == 1234, path


def test_mismatch_lab_arms_inject_one_source_and_one_correction_each():
    a = argparse.Namespace(experiment="mismatch", ks="", seeds="0", sources="stale0,stale2,bf16",
                           corrections="none,mis")
    arms = dict(exp.arms(a))
    assert list(arms) == ["stale0_none_s0", "stale0_mis_s0", "stale2_none_s0", "stale2_mis_s0", "bf16_none_s0",
                          "bf16_mis_s0"]
    assert arms["stale2_mis_s0"] == ["train.seed=1234", "rollout.max_staleness=2", "algo.tis_cap=0", "algo.mis_low=0.5",
                                     "algo.mis_high=2"]
    assert arms["bf16_none_s0"] == ["train.seed=1234", "rollout.dtype=bfloat16", "algo.tis_cap=0"]
    import pytest

    from model.config import ConfigError

    for bad in ({"sources": "int4"}, {"sources": "flip100"}, {"corrections": "clip"}):
        with pytest.raises(ConfigError, match="--sources entry '(int4|flip100)'|--corrections entry 'clip'"):
            exp.arms(argparse.Namespace(**{**vars(a), **bad}))


def test_router_flip_arms_record_routing_and_replay_uses_it():
    a = argparse.Namespace(experiment="mismatch", ks="", seeds="1", sources="flip10", corrections="none,replay")
    arms = dict(exp.arms(a))
    assert arms["flip10_none_s1"] == ["train.seed=1235", "rollout.record_routing=true", "rollout.router_flip_frac=0.1",
                                      "algo.tis_cap=0"]
    assert arms["flip10_replay_s1"][-2:] == ["rollout.record_routing=true", "algo.routing_replay=true"]


def test_int8_arm_runs_the_engine_quantized_in_the_dtype_of_this_machines_int8_kernels():
    from model.quantize import serve_dtype

    a = argparse.Namespace(experiment="mismatch", ks="", seeds="0", sources="int8", corrections="tis")
    assert dict(exp.arms(a))["int8_tis_s0"] == ["train.seed=1234", "rollout.quantization=w8a8_int8",
                                                f"rollout.dtype={serve_dtype()[0]}", "algo.tis_cap=2"]
