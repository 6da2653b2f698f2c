"""sft recipes through the real entry scripts: a mistyped key (file or --set) is one line naming it, nothing is
written; --help lists the recipe fields with their defaults and help (sft/config.py, model/sections.py)."""
from __future__ import annotations

import sys

import yaml

from sft.tests.conftest import ROOT, run


def train(tmp_path, *extra: str):
    out = tmp_path / "sft"
    r = run([sys.executable, "-m", "sft.02_train", "--in", str(tmp_path / "base"), "--data", str(tmp_path / "data"),
             "--out", str(out), *extra], timeout=300)
    return r, out


def test_train_refuses_a_mistyped_set_by_name_and_writes_nothing(tmp_path):
    r, out = train(tmp_path, "--recipe", "micro_cpu", "--set", "train.stpes=3")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "train.stpes is not a key of train (did you mean steps?)" in lines[0]
    assert list(tmp_path.iterdir()) == []  # no sft/, no sft.run/


def test_train_refuses_a_mistyped_recipe_file_key_by_name(tmp_path):
    cfg = yaml.safe_load((ROOT / "sft/recipes/micro_cpu.yaml").read_text())
    cfg["optim"]["warmup"] = cfg["optim"].pop("warmup_steps")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    r, out = train(tmp_path, "--recipe", str(bad))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "optim.warmup is not a key of optim" in lines[0], r.stderr
    assert not out.exists()


def test_data_refuses_a_mistyped_set_by_name_and_writes_nothing(tmp_path):
    r = run([sys.executable, "-m", "sft.01_data", "--in", str(tmp_path / "domains"), "--base", str(tmp_path / "base"),
             "--out", str(tmp_path / "sft_data"), "--recipe", "micro_cpu", "--set", "data.num_demo=3"], timeout=300)
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "data.num_demo is not a key of data (did you mean num_demos?)" \
        in lines[0], r.stderr
    assert list(tmp_path.iterdir()) == []


def test_train_help_lists_the_recipe_fields_with_their_help():
    r = run([sys.executable, "-m", "sft.02_train", "--help"], timeout=300)
    assert r.returncode == 0
    assert any(ln.split() == ["steps", "=", "300", "optimizer", "steps"] for ln in r.stdout.splitlines()), r.stdout


def test_data_help_lists_the_data_fields_with_their_help():
    r = run([sys.executable, "-m", "sft.01_data", "--help"], timeout=300)
    assert r.returncode == 0
    assert any(ln.split()[:3] == ["num_demos", "=", "2000"] and "demonstrations drawn" in ln
               for ln in r.stdout.splitlines()), r.stdout
