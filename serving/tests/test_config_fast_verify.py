"""serving/02_fast.py verifies its target once: the draft steps (serving.draft generate/train, own processes) get the
sha256 of the manifest it verified and check only that manifest.json is still that one, not every file again."""
from __future__ import annotations

import pytest

from model import manifest
from serving.draft import target_manifest


@pytest.fixture
def ckpt(tmp_path):
    d = tmp_path / "target"
    (d / "hf").mkdir(parents=True)
    (d / "hf" / "model.safetensors").write_bytes(b"weights")
    manifest.write_manifest(d, stage="sft", parent=None, config={}, seed=0, metrics={})
    return d


def test_a_verified_target_is_not_rehashed(ckpt):
    sha = manifest.manifest_hash(ckpt)
    (ckpt / "hf" / "model.safetensors").write_bytes(b"WEIGHTS")  # a full verify would now refuse it
    with pytest.raises(manifest.CheckpointError):
        manifest.verify(ckpt)
    assert target_manifest(ckpt, sha)["stage"] == "sft"


def test_a_target_whose_manifest_changed_since_it_was_verified_is_refused(ckpt):
    sha = manifest.manifest_hash(ckpt)
    manifest.write_manifest(ckpt, stage="sft", parent=None, config={"changed": 1}, seed=0, metrics={})
    with pytest.raises(manifest.CheckpointError, match="changed since it was verified"):
        target_manifest(ckpt, sha)


def test_without_a_verified_hash_the_target_is_verified_in_full(ckpt):
    (ckpt / "hf" / "model.safetensors").write_bytes(b"WEIGHTS")
    with pytest.raises(manifest.CheckpointError, match="sha256 mismatch"):
        target_manifest(ckpt, None)


def test_the_fast_variant_verifies_its_target_once_and_hands_the_hash_to_both_draft_steps(ckpt, tmp_path, monkeypatch):
    import importlib
    import json
    from pathlib import Path

    fast = importlib.import_module("serving.02_fast")
    (ckpt / "hf" / "config.json").write_text(json.dumps({"model_type": "llama"}))
    manifest.write_manifest(ckpt, stage="sft", parent=None, config={}, seed=0, metrics={})
    data = tmp_path / "data"
    data.mkdir()
    manifest.write_manifest(data, stage="data", parent=None, config={}, seed=0, metrics={})
    verified, steps = [], []
    real_verify = manifest.verify
    monkeypatch.setattr(manifest, "verify", lambda d, stage=None: verified.append(Path(d)) or real_verify(d, stage))
    monkeypatch.setattr(fast.quantize, "quantize_hf_dir", lambda *a, **kw: {"quantized_tensors": 0})

    def step(cmd):  # the draft steps' processes: record their command lines; stop after the second
        steps.append(cmd)
        if len(steps) == 2:
            raise RuntimeError("stop")
        return json.dumps({"sequences": 1}) + "\n"
    monkeypatch.setattr(fast, "run", step)
    rc = fast.main(["--in", str(ckpt), "--data", str(data), "--out", str(tmp_path / "fast"), "--recipe", "micro_cpu",
                    "--set", "quant.experts=false"])
    assert rc == 1 and [c[c.index("-m") + 2] for c in steps] == ["generate", "train"]
    assert verified.count(ckpt) == 1
    sha = manifest.manifest_hash(ckpt)
    assert all(c[c.index("--target-verified") + 1] == sha for c in steps)
