"""eval recipes through the real entry script: a mistyped key (file or --set) is one line naming it, nothing is
written; --help lists every recipe field with its default and help (eval/config.py)."""
from __future__ import annotations

import sys

import yaml

from eval.tests.conftest import ROOT, run


def eval_cli(tmp_path, *extra: str):
    out = tmp_path / "r.json"
    r = run([sys.executable, "-m", "eval.01_eval", "--in", str(tmp_path / "ckpt"), "--out", str(out), *extra])
    return r, out


def test_mistyped_set_is_refused_by_name_and_writes_nothing(tmp_path):
    r, out = eval_cli(tmp_path, "--recipe", "micro_cpu", "--set", "heldout.temprature=1")
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1, r.stderr
    assert "heldout.temprature is not a key of heldout (did you mean temperature?)" in lines[0]
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_mistyped_recipe_file_key_is_refused_by_name(tmp_path):
    cfg = yaml.safe_load((ROOT / "eval/recipes/micro_cpu.yaml").read_text())
    cfg["longctx"]["lenghts"] = cfg["longctx"].pop("lengths")
    bad = tmp_path / "bad.yaml"
    bad.write_text(yaml.safe_dump(cfg))
    r, out = eval_cli(tmp_path, "--recipe", str(bad))
    lines = r.stderr.strip().splitlines()
    assert r.returncode != 0 and len(lines) == 1 and "longctx.lenghts is not a key of longctx" in lines[0], r.stderr
    assert not out.exists()


def test_help_lists_the_recipe_fields_with_their_help():
    r = run([sys.executable, "-m", "eval.01_eval", "--help"])
    assert r.returncode == 0
    assert any(" ".join(ln.split()) == "temperature = 0.8 sampling temperature" for ln in r.stdout.splitlines()), r.stdout
