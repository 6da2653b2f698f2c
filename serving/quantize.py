"""W8A8 quantization written as a compressed-tensors checkpoint (what vLLM loads).

    quantize_hf_dir(Path("ckpt/hf"), Path("out/hf"), scheme="w8a8_int8", experts=False)

The scheme itself (per-channel int8/fp8 weights, dynamic per-token activations, what stays unquantized, which
kernels this machine has) lives in model/quantize.py, shared with RL's int8 rollout engine; this module writes a
quantized copy of an HF directory, optionally SmoothQuant-folded first (serving/smooth.py).
"""
from __future__ import annotations

import json
from pathlib import Path

from model.quantize import (DENSE, EXPERT, IGNORE, SCHEMES, dequantize, experts_supported,  # noqa: F401 - re-exported
                            int8_weight_max, quantization_config, quantize_tensors, quantize_weight, save_quantized,
                            serve_dtype)


def quantize_hf_dir(src: Path, dst: Path, scheme: str = "w8a8_int8", experts: bool = False,
                    int_max: int | None = None, smooth_alpha: float = 0.0, maxima: dict | None = None) -> dict:
    """Write a quantized copy of the HF directory `src` into `dst`; returns stats (counts, max rel. error).
    int_max: largest |int8 weight| (default: int8_weight_max() of this machine). smooth_alpha > 0: SmoothQuant with
    the activation maxima `maxima` (serving/smooth.py) folded into the weights first."""
    why = "given"
    if int_max is None:
        int_max, why = int8_weight_max()
    from safetensors.torch import load_file

    src, dst = Path(src), Path(dst)
    if "quantization_config" in json.loads((src / "config.json").read_text()):
        raise ValueError(f"{src}/config.json already has a quantization_config: pass the unquantized checkpoint")
    tensors = {n: t for f in sorted(src.glob("*.safetensors")) for n, t in load_file(str(f)).items()}
    bytes_in = sum(t.numel() * t.element_size() for t in tensors.values())
    smoothed = None
    if smooth_alpha:
        from serving.smooth import smooth

        if not maxima:
            raise ValueError("smooth_alpha > 0 needs the activation maxima (serving.smooth.activation_maxima)")
        smoothed = smooth(tensors, maxima, smooth_alpha)
    out, n_q, worst = quantize_tensors(tensors, scheme, experts, int_max)
    if n_q == 0:
        raise ValueError(f"{src}: no linear weights matched {DENSE.pattern}; is it a Llama / Qwen3-MoE HF checkpoint?")
    bytes_out = sum(t.numel() * t.element_size() for t in out.values())
    save_quantized(out, src, dst, scheme, experts)
    return {"scheme": scheme, "quantized_experts": experts, "int8_weight_max": int_max if scheme == "w8a8_int8" else None,
            "int8_weight_max_reason": why if scheme == "w8a8_int8" else None, "quantized_tensors": n_q, "max_rel_error": worst,
            "bytes_before": bytes_in, "bytes_after": bytes_out, "smooth": smoothed}
