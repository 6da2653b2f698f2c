"""manifest.verify refuses damaged checkpoints with one clear line; publish() is all-or-nothing."""
from __future__ import annotations

import json
import os

import pytest

from model import manifest
from model.manifest import CheckpointError, publish, staging_dir, verify, write_manifest


def _build(final, payload: bytes = b"weights-v1"):
    tmp = staging_dir(final)
    (tmp / "hf").mkdir()
    (tmp / "hf" / "model.safetensors").write_bytes(payload * 100)
    (tmp / "hf" / "config.json").write_text('{"a": 1}')
    write_manifest(tmp, stage="sft", parent=None, config={"lr": 1}, seed=0, metrics={})
    return tmp


@pytest.fixture
def ckpt(tmp_path):
    final = tmp_path / "ckpt"
    publish(_build(final), final)
    return final


def _refused(path, **kw) -> str:
    with pytest.raises(CheckpointError) as ei:
        verify(path, **kw)
    msg = str(ei.value)
    assert msg and "\n" not in msg, f"not one line: {msg!r}"
    return msg


def test_intact_checkpoint_verifies(ckpt):
    m = verify(ckpt, stage="sft")
    assert set(m["files"]) == {"hf/model.safetensors", "hf/config.json"}


def test_flipped_byte_is_refused_naming_the_file(ckpt):
    f = ckpt / "hf" / "model.safetensors"
    data = bytearray(f.read_bytes())
    data[17] ^= 1
    f.write_bytes(bytes(data))
    msg = _refused(ckpt)
    assert "model.safetensors" in msg and "sha256" in msg


def test_truncated_file_is_refused(ckpt):
    f = ckpt / "hf" / "model.safetensors"
    f.write_bytes(f.read_bytes()[:-1])
    assert "model.safetensors" in _refused(ckpt)


def test_missing_listed_file_is_refused(ckpt):
    (ckpt / "hf" / "config.json").unlink()
    assert "config.json" in _refused(ckpt)


def test_unlisted_extra_file_is_refused(ckpt):
    (ckpt / "hf" / "stray.bin").write_bytes(b"x")
    assert "stray.bin" in _refused(ckpt)


def test_corrupted_manifest_json_is_refused(ckpt):
    p = ckpt / manifest.MANIFEST
    p.write_text(p.read_text()[:-20])
    assert "manifest.json" in _refused(ckpt)


def test_manifest_with_edited_digest_is_refused(ckpt):
    p = ckpt / manifest.MANIFEST
    m = json.loads(p.read_text())
    m["files"]["hf/config.json"] = "0" * 64
    p.write_text(json.dumps(m))
    assert "config.json" in _refused(ckpt)


def test_missing_manifest_is_refused(ckpt):
    (ckpt / manifest.MANIFEST).unlink()
    assert "manifest.json" in _refused(ckpt)


def test_wrong_stage_is_refused(ckpt):
    msg = _refused(ckpt, stage="rl")
    assert "'sft'" in msg and "'rl'" in msg


def test_missing_directory_is_refused(tmp_path):
    assert "nope" in _refused(tmp_path / "nope")


def test_staging_dir_is_not_the_final_name(tmp_path):
    final = tmp_path / "ckpt"
    tmp = staging_dir(final)
    assert tmp != final and tmp.parent == final.parent and not final.exists()


def test_publish_without_manifest_is_refused_and_nothing_appears(tmp_path):
    final = tmp_path / "ckpt"
    tmp = staging_dir(final)
    (tmp / "half_written.bin").write_bytes(b"x")
    with pytest.raises(CheckpointError):
        publish(tmp, final)
    assert not final.exists()


def test_publish_replaces_old_checkpoint_completely(ckpt):
    publish(_build(ckpt, b"weights-v2"), ckpt)
    verify(ckpt)
    assert (ckpt / "hf" / "model.safetensors").read_bytes() == b"weights-v2" * 100
    assert [p.name for p in ckpt.parent.iterdir()] == ["ckpt"], "staging or old directories left behind"


def test_failed_publish_never_exposes_a_partial_directory(ckpt, monkeypatch):
    tmp = _build(ckpt, b"weights-v2")
    real_replace = os.replace

    def failing_replace(src, dst):
        if os.fspath(src) == os.fspath(tmp):
            raise OSError("disk gone")
        return real_replace(src, dst)

    monkeypatch.setattr(manifest.os, "replace", failing_replace)
    with pytest.raises(OSError):
        publish(tmp, ckpt)
    if ckpt.exists():  # either the old complete checkpoint or nothing, never a mix
        verify(ckpt)
        assert (ckpt / "hf" / "model.safetensors").read_bytes() == b"weights-v1" * 100


def test_staging_removes_the_half_made_dir_on_error(tmp_path):
    out = tmp_path / "stage"
    with pytest.raises(RuntimeError):
        with manifest.staging(out) as tmp:
            (tmp / "weights.bin").write_bytes(b"x")
            raise RuntimeError("crashed mid-build")
    assert not out.exists() and list(tmp_path.iterdir()) == []


def test_verify_hashes_each_file_once(ckpt, monkeypatch):
    """Every listed file is hashed exactly once per verify (the unlisted-file check lists names, hashes nothing)."""
    seen = []
    real = manifest.sha256_file
    monkeypatch.setattr(manifest, "sha256_file", lambda p, *a, **kw: seen.append(str(p)) or real(p, *a, **kw))
    m = verify(ckpt, stage="sft")
    assert sorted(seen) == sorted(str(ckpt / rel) for rel in m["files"]) and len(m["files"]) == 2
