"""The scripts end to end on a micro checkpoint through in-process vLLM (subprocess: vLLM changes its process).

The checkpoint: the micro chain's when EVAL_CHAIN (default /work/chain_micro) has one, else a 2-step micro base
trained by the micro_ckpt fixture, so CI runs these too.
"""
from __future__ import annotations

import json
import sys

import pytest

from eval.tests.conftest import run


@pytest.mark.slow
def test_eval_writes_the_documented_schema_for_a_checkpoint(tmp_path, micro_ckpt):
    out = tmp_path / "eval" / "stage.json"
    r = run([sys.executable, "-m", "eval.04_eval", "--in", str(micro_ckpt), "--out", str(out), "--recipe", "micro_cpu",
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
    r = run([sys.executable, "-m", "eval.04_eval", *args, "--out", str(out), "--recipe", "micro_cpu",
             "--suites", "longctx"])
    assert r.returncode == 2 and msg in r.stderr.strip().splitlines()[-1], r.stderr
    assert not out.exists()


def test_unknown_recipe_names_the_choices(tmp_path):
    r = run([sys.executable, "-m", "eval.04_eval", "--endpoint", "http://127.0.0.1:9/v1", "--out", str(tmp_path / "r"),
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
