"""RoPE-scaling variants of an HF directory for the scaling study (weights symlinked, only config.json changes).

What vLLM 0.32 accepts (measured on the micro model, see README): max_model_len above max_position_embeddings
only with rope scaling, and then
  - linear:  vLLM derives max length = max_position_embeddings * factor;
  - yarn:    vLLM derives max length = max_position_embeddings (YaRN configs carry the *scaled* length there and
             the training length in rope_scaling.original_max_position_embeddings), so a yarn config that keeps
             max_position_embeddings at the training length is refused above it.
  - both build their cos/sin cache for original x factor positions (yarn: original_max_position_embeddings x
    factor): a prompt beyond that reads past the cache. Measured: yarn factor 2 over 256 trained tokens gave NaN
    prompt logprobs at 1024 and 2048 tokens. So a scaled variant supports exactly original x factor tokens.
Variants written here: "none" sets max_position_embeddings to the longest length studied (plain RoPE
extrapolation; the value only sizes the cache); linear:F and yarn:F set it to original x F, the scaled length
(vLLM then accepts max_model_len up to it; model.vllm_engine.Engine caps there too), and `supported_len()`
tells the caller to record longer prompts as errors instead of reading garbage.
"""
from __future__ import annotations

import json
import os
from pathlib import Path

TYPES = ("none", "linear", "yarn")


def parse(spec: str) -> tuple[str, float]:
    """'none' | 'linear:4' | 'yarn:8' -> (type, factor)."""
    kind, _, f = spec.partition(":")
    if kind not in TYPES or (kind != "none" and not f) or (kind == "none" and f):
        raise ValueError(f"--rope {spec!r}: use none, linear:<factor> or yarn:<factor> (factor > 1)")
    factor = float(f) if f else 1.0
    if kind != "none" and factor <= 1.0:
        raise ValueError(f"--rope {spec!r}: factor must be > 1")
    return kind, factor


def make_variant(hf_dir: Path, out: Path, kind: str, factor: float, original: int, max_len: int) -> Path:
    hf_dir, out = Path(hf_dir).resolve(), Path(out)
    out.mkdir(parents=True, exist_ok=True)
    for f in hf_dir.iterdir():
        if f.name != "config.json" and not (out / f.name).exists():
            os.symlink(f, out / f.name)
    c = json.loads((hf_dir / "config.json").read_text())
    c.pop("rope_scaling", None)
    c.pop("rope_parameters", None)
    c["max_position_embeddings"] = max(int(max_len), int(c["max_position_embeddings"])) if kind == "none" \
        else supported_len(kind, factor, original)
    if kind != "none":
        c["rope_scaling"] = {"rope_type": kind, "factor": factor, "original_max_position_embeddings": int(original)}
    (out / "config.json").write_text(json.dumps(c, indent=2, sort_keys=True) + "\n")
    return out


def supported_len(kind: str, factor: float, original: int) -> int | None:
    """Longest context a variant is defined for (None: no limit from the position encoding itself)."""
    return None if kind == "none" else int(original * factor)
