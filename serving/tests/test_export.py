"""Open-weights export: same weights, a card with this checkpoint's evaluations and provenance, a valid manifest."""
from __future__ import annotations

import json
import sys

import pytest
import torch
from safetensors.torch import load_file

from model import manifest, results
from serving.tests.conftest import run

pytestmark = pytest.mark.slow  # the micro chain fixture trains a base (about a minute)


def export(chain, out, *extra):
    return run([sys.executable, "-m", "serving.01_export", "--in", str(chain / "base"), "--out", str(out), *extra])


def test_export_keeps_weights_and_ends_turns_at_im_end(chain, tmp_path):
    r = export(chain, tmp_path / "exp", "--results", str(tmp_path / "none"))
    assert r.returncode == 0, r.stderr[-2000:]
    m = manifest.verify(tmp_path / "exp", stage="export")
    assert m["parent"]["manifest_sha256"] == manifest.manifest_hash(chain / "base")
    a, b = load_file(str(chain / "base/hf/model.safetensors")), load_file(str(tmp_path / "exp/hf/model.safetensors"))
    assert a.keys() == b.keys() and all(torch.equal(a[k], b[k]) for k in a)
    tok = {t["content"]: t["id"] for t in json.loads((tmp_path / "exp/hf/tokenizer.json").read_text())["added_tokens"]}
    gen = json.loads((tmp_path / "exp/hf/generation_config.json").read_text())
    assert tok["<|im_end|>"] in gen["eos_token_id"] and tok["<|endoftext|>"] in gen["eos_token_id"]
    assert (tmp_path / "exp/hf/chat_template.jinja").exists()


def test_card_lists_only_this_checkpoints_results_and_the_chain(chain, tmp_path):
    res = tmp_path / "results"
    results.write(res / "eval/base.json", "eval.quick", {"pass_rate": 0.4375}, measured=chain / "base")
    results.write(res / "eval/other.json", "eval.quick", {"pass_rate": 0.9111}, measured=chain / "tok")
    r = export(chain, tmp_path / "exp", "--results", str(res))
    assert r.returncode == 0, r.stderr[-2000:]
    text = (tmp_path / "exp/hf/README.md").read_text()
    assert "0.4375" in text and "0.9111" not in text
    rows = [line.split("|")[1].strip() for line in text.split("## Provenance")[1].splitlines() if line.startswith("| ")]
    assert rows[1:] == ["base", "tokenizer", "corpus"]  # newest first, after the header row
    assert manifest.manifest_hash(chain / "base")[:16] in text


def test_bfloat16_export(chain, tmp_path):
    r = export(chain, tmp_path / "exp", "--dtype", "bfloat16", "--results", str(tmp_path))
    assert r.returncode == 0, r.stderr[-2000:]
    w = load_file(str(tmp_path / "exp/hf/model.safetensors"))
    assert {v.dtype for v in w.values()} == {torch.bfloat16}
    assert json.loads((tmp_path / "exp/hf/config.json").read_text())["torch_dtype"] == "bfloat16"


def test_damaged_input_is_refused_with_nothing_written(chain, tmp_path):
    import shutil

    bad = tmp_path / "bad"
    shutil.copytree(chain / "base", bad)
    (bad / "hf/config.json").write_text("{}")
    r = run([sys.executable, "-m", "serving.01_export", "--in", str(bad), "--out", str(tmp_path / "exp")])
    assert r.returncode == 2
    assert "sha256 mismatch" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "exp").exists() and not list(tmp_path.glob("exp.tmp-*"))
