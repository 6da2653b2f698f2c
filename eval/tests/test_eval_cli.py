"""The scripts end to end on a micro checkpoint through in-process vLLM (subprocess: vLLM changes its process).

The checkpoint: the micro chain's when EVAL_CHAIN (default /work/chain_micro) has one, else a 2-step micro base
trained by the micro_ckpt fixture, so CI runs these too.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from eval.tests.conftest import run


@pytest.mark.slow
def test_eval_writes_the_documented_schema_for_a_checkpoint(tmp_path, micro_ckpt):
    out = tmp_path / "eval" / "stage.json"
    r = run([sys.executable, "-m", "eval.01_eval", "--in", str(micro_ckpt), "--out", str(out), "--recipe", "micro_cpu",
             "--set", "longctx.lengths=[256,1100]", "--set", "longctx.tasks=[niah_single_2,qa]"], timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    stage = json.loads((micro_ckpt / "manifest.json").read_text())["stage"]
    assert doc["schema"] == {"name": "eval.stage", "version": 1} and doc["stage"] == stage
    assert doc["measured"]["manifest_sha256"] and set(doc["suites"]) == {"longctx", "regression", "heldout"}
    lc = doc["suites"]["longctx"]
    assert {"per_task", "per_length", "grid", "effective_length", "threshold"} <= set(lc["summary"])
    # 1100 tokens do not fit max_model_len 1024: recorded as errors, not as zeros
    assert lc["summary"]["per_length"]["1100"] == {"score": None, "recall": None, "tasks_scored": 0, "errors": 4}
    assert lc["summary"]["per_length"]["256"]["errors"] == 0 and lc["summary"]["per_length"]["256"]["score"] is not None
    reg = doc["suites"]["regression"]["summary"]
    assert set(reg) == {"terminal", "docs", "scene", "agent", "all"} and reg["all"]["errors"] == 0
    assert doc["suites"]["heldout"]["summary"]["all"]["tasks_scored@2"] > 0


@pytest.mark.parametrize("args,msg", [
    (["--in", "{tmp}/no_ckpt"], "no such checkpoint directory"),
    (["--endpoint", "localhost:8000"], "is not an http(s) URL"),
    ([], "exactly one of --in"),
    (["--endpoint", "http://127.0.0.1:9/v1", "--tokenizer", "{tmp}/no_tokenizer"], "no_tokenizer not found"),
])
def test_bad_input_is_one_line_and_writes_nothing(tmp_path, args, msg):
    args = [x.replace("{tmp}", str(tmp_path)) for x in args]
    out = tmp_path / "r.json"
    r = run([sys.executable, "-m", "eval.01_eval", *args, "--out", str(out), "--recipe", "micro_cpu",
             "--suites", "longctx"])
    assert r.returncode == 2 and msg in r.stderr.strip().splitlines()[-1], r.stderr
    assert not out.exists()


@pytest.mark.parametrize("args,msg", [
    (["--suites", "regression", "--rope", "yarn:2"], "use it with --in, not --endpoint"),
    (["--suites", "regression", "--rope-original", "256"], "pass --rope too"),
    (["--suites", "heldout", "--set", "heldout.k=[1,8]"], "must be within 1..heldout.n=2"),
])
def test_what_the_single_suite_scripts_checked_is_refused_before_any_work(tmp_path, args, msg):
    """The checks of the scripts folded into 01_eval (01_longctx's --rope, 03_heldout's k) come before a target."""
    out = tmp_path / "r.json"
    r = run([sys.executable, "-m", "eval.01_eval", "--endpoint", "http://127.0.0.1:9/v1", "--out", str(out),
             "--recipe", "micro_cpu", *args])
    assert r.returncode == 2 and msg in r.stderr.strip().splitlines()[-1], r.stderr
    assert not out.exists()


@pytest.mark.slow
def test_rope_override_is_recorded_and_prompts_past_it_are_errors(tmp_path, micro_ckpt):
    """--rope, what 03_rope_study.py runs per variant: YaRN x2 over 256 trained tokens is defined up to 512
    positions, so a 600-token prompt is an error (never run past vLLM's cos/sin cache), and tail NLL is kept."""
    out = tmp_path / "yarn2.json"
    r = run([sys.executable, "-m", "eval.01_eval", "--in", str(micro_ckpt), "--out", str(out), "--recipe", "micro_cpu",
             "--suites", "longctx", "--rope", "yarn:2", "--rope-original", "256", "--set", "longctx.lengths=[256,600]",
             "--set", "longctx.tasks=[niah_single_2]", "--set", "longctx.nll=true"], timeout=900)
    assert r.returncode == 0, r.stderr[-3000:]
    doc = json.loads(out.read_text())
    assert doc["schema"] == {"name": "eval.stage", "version": 1} and set(doc["suites"]) == {"longctx"}
    assert doc["rope"] == {"type": "yarn", "factor": 2.0, "original_max_position_embeddings": 256,
                           "supported_len": 512, "max_model_len": 512}
    pl = doc["suites"]["longctx"]["summary"]["per_length"]
    assert pl["600"]["score"] is None and pl["600"]["errors"] > 0
    assert pl["256"]["errors"] == 0 and pl["256"]["tail_nll"] is not None


def test_rope_study_runs_01_eval_per_variant_and_reads_its_longctx_block(tmp_path, monkeypatch):
    """03_rope_study.py's side of the contract, without vLLM: one `01_eval --suites longctx --rope V` process per
    variant, whose eval.stage file (layout checked by the test above) it summarises per variant."""
    import importlib
    import subprocess

    from model import manifest

    ckpt = tmp_path / "base"
    (ckpt / "hf").mkdir(parents=True)
    (ckpt / "hf" / "config.json").write_text(json.dumps({"max_position_embeddings": 1024}))
    manifest.write_manifest(ckpt, stage="base", parent=None, config={"train": {"seq_length": 128}}, seed=0, metrics={})
    cmds, real_run = [], subprocess.run

    def fake_01_eval(cmd, **kw):
        if "eval.01_eval" not in cmd:  # the module is shared: git for provenance runs for real
            return real_run(cmd, **kw)
        cmds.append(cmd)
        v, out = cmd[cmd.index("--rope") + 1], Path(cmd[cmd.index("--out") + 1])
        per_length = {"104": {"score": 100.0, "recall": 100.0, "errors": 0, "tail_nll": 2.0},
                      "232": {"score": 90.0 if v != "none" else 0.0, "recall": 0.0, "errors": 0, "tail_nll": None}}
        out.write_text(json.dumps({"schema": {"name": "eval.stage", "version": 1}, "rope": {"type": v}, "suites": {
            "longctx": {"summary": {"effective_length": 232 if v != "none" else 104, "per_length": per_length}}}}))
        return subprocess.CompletedProcess(cmd, 0, "", "")

    study = importlib.import_module("eval.03_rope_study")
    monkeypatch.setattr(study.subprocess, "run", fake_01_eval)
    out = tmp_path / "rope.json"
    assert study.main(["--in", str(ckpt), "--out", str(out), "--recipe", "micro_cpu", "--factors", "2",
                       "--multiples", "1,2"]) == 0
    assert all(c[1:6] == ["-m", "eval.01_eval", "--suites", "longctx", "--in"] for c in cmds)
    assert [c[c.index("--rope") + 1] for c in cmds] == ["none", "linear:2", "yarn:2"]
    doc = json.loads(out.read_text())
    assert doc["schema"]["name"] == "eval.rope_study" and doc["lengths"] == [104, 232]
    effective = {v: x["effective_length"] for v, x in doc["variants"].items()}
    assert effective == {"none": 104, "linear:2": 232, "yarn:2": 232}
    assert doc["variants"]["yarn:2"]["per_length"]["104"]["tail_nll"] == 2.0


def test_unknown_recipe_names_the_choices(tmp_path):
    r = run([sys.executable, "-m", "eval.01_eval", "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r"),
             "--recipe", "nope", "--suites", "regression"])
    assert r.returncode == 2 and "micro_cpu" in r.stderr.strip().splitlines()[-1]


def test_rope_variant_configs(tmp_path):
    from eval import rope

    src = tmp_path / "hf"
    src.mkdir()
    (src / "config.json").write_text(json.dumps({"max_position_embeddings": 1024, "rope_theta": 1e4}))
    (src / "model.safetensors").write_bytes(b"x")
    y = json.loads((rope.make_variant(src, tmp_path / "y", "yarn", 4.0, 256, 2048) / "config.json").read_text())
    assert y["rope_scaling"] == {"rope_type": "yarn", "factor": 4.0, "original_max_position_embeddings": 256}
    # a scaled variant is defined up to original x factor (vLLM's cos/sin cache): that is its max length
    assert y["max_position_embeddings"] == 1024 == rope.supported_len("yarn", 4.0, 256)
    assert (tmp_path / "y" / "model.safetensors").is_symlink()
    n = json.loads((rope.make_variant(src, tmp_path / "n", "none", 1.0, 256, 512) / "config.json").read_text())
    assert "rope_scaling" not in n and n["max_position_embeddings"] == 1024 and rope.supported_len("none", 1, 256) is None
    with pytest.raises(ValueError, match="factor must be > 1"):
        rope.parse("linear:1")
