"""serving recipes through the real entry scripts: a mistyped key (file or --set) is one line naming it, nothing is
written; --help lists the recipe fields with their defaults and help (serving/config.py)."""
from __future__ import annotations

import sys

import yaml

from serving.tests.conftest import ROOT, run


def fast(tmp_path, *extra: str):
    out = tmp_path / "fast"
    r = run([sys.executable, "-m", "serving.02_fast", "--in", str(tmp_path / "target"), "--data", str(tmp_path / "data"),
             "--out", str(out), *extra], timeout=300)
    return r, out


def test_mistyped_set_is_refused_by_name_and_writes_nothing(tmp_path):
    r, out = fast(tmp_path, "--recipe", "micro_cpu", "--set", "distill.num_promts=4")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "distill.num_promts is not a key of distill (did you mean num_prompts?)" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no fast/, no staging directory


def test_mistyped_recipe_file_key_is_refused_by_name(tmp_path):
    cfg = yaml.safe_load((ROOT / "serving/recipes/micro_cpu.yaml").read_text())
    cfg["quant"]["experst"] = cfg["quant"].pop("experts")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    r, out = fast(tmp_path, "--recipe", str(bad))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "quant.experst is not a key of quant" in lines[0], r.stderr
    assert not out.exists()


def test_draft_training_refuses_a_mistyped_set_by_name(tmp_path):
    r = run([sys.executable, "-m", "serving.draft", "train", "--target", str(tmp_path / "t"),
             "--data", str(tmp_path / "d"), "--out", str(tmp_path / "draft"), "--recipe", "micro_cpu",
             "--set", "draft_init.target_embedding=false"], timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "draft_init.target_embedding is not a key" in lines[0], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_help_lists_the_recipe_fields_with_their_help():
    r = run([sys.executable, "-m", "serving.02_fast", "--help"], timeout=300)
    assert r.returncode == 0
    assert any(ln.split()[:3] == ["num_prompts", "=", "256"] and "rl-split prompts the target answers greedily" in ln
               for ln in r.stdout.splitlines()), r.stdout


def test_ngram_lookup_bounds_are_checked_before_any_work():
    import importlib

    import pytest

    from model import recipe
    from model.config import ConfigError

    fast_mod = importlib.import_module("serving.02_fast")
    good = recipe.load_recipe("serving", "smollm2_cpu", [])
    assert fast_mod.validate(good)["lookup"] == [2, 5]
    bad = recipe.load_recipe("serving", "smollm2_cpu", ["speculative.prompt_lookup_min=6"])
    with pytest.raises(ConfigError, match="prompt_lookup_min=6, prompt_lookup_max=5"):
        fast_mod.validate(bad)
