"""W8A8 int8 quantization written as a compressed-tensors checkpoint (what vLLM loads on CPU and GPU).

    quantize_hf_dir(Path("ckpt/hf"), Path("out/hf"))

Weights: symmetric int8 per output channel (scale = max|w_row| / 127), stored as `<name>.weight` (int8)
and `<name>.weight_scale` (float32, [out, 1]). Activations: int8 per token, computed at run time by
vLLM (dynamic), so no calibration data is needed. Embeddings, norms, lm_head and the MoE router stay
in their original dtype: the router is tiny and its argmax decides expert choice, and vLLM's fused
MoE kernel expects quantized experts only. No llm-compressor is installed here, so the format is
written directly; vLLM's CompressedTensorsW8A8Int8 (linear) and W8A8Int8MoE (experts) schemes read it.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

# Linear weights of the Llama / Qwen3-MoE HF layouts that are quantized (everything else is kept as is).
QUANTIZED = re.compile(r"^model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(experts\.\d+\.)?(gate|up|down)_proj)\.weight$")
IGNORE = ["lm_head", "re:.*mlp\\.gate$"]  # module names vLLM must build unquantized


def quantization_config() -> dict:
    """The config.json `quantization_config` block (compressed-tensors, int-quantized W8A8)."""
    int8 = {"num_bits": 8, "type": "int", "symmetric": True, "group_size": None, "block_structure": None,
            "actorder": None, "observer": None, "observer_kwargs": {}}
    return {
        "quant_method": "compressed-tensors", "format": "int-quantized", "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {**int8, "strategy": "channel", "dynamic": False, "observer": "minmax"},
            "input_activations": {**int8, "strategy": "token", "dynamic": True},
            "output_activations": None}},
        "ignore": IGNORE, "kv_cache_scheme": None, "global_compression_ratio": None,
    }


def quantize_weight(w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row int8: w ~= q * scale with q in [-127, 127]."""
    w = w.float()
    scale = (w.abs().amax(dim=1, keepdim=True) / 127.0).clamp(min=1e-12)
    q = torch.round(w / scale).clamp(-127, 127).to(torch.int8)
    return q, scale


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale


def quantize_hf_dir(src: Path, dst: Path) -> dict:
    """Write a quantized copy of the HF directory `src` into `dst`; returns stats (counts, max rel. error)."""
    from safetensors.torch import load_file, save_file

    src, dst = Path(src), Path(dst)
    conf = json.loads((src / "config.json").read_text())
    if "quantization_config" in conf:
        raise ValueError(f"{src}/config.json already has a quantization_config: pass the unquantized checkpoint")
    dst.mkdir(parents=True, exist_ok=True)
    out: dict[str, torch.Tensor] = {}
    n_q, worst, bytes_in, bytes_out = 0, 0.0, 0, 0
    for f in sorted(src.glob("*.safetensors")):
        for name, t in load_file(str(f)).items():
            bytes_in += t.numel() * t.element_size()
            if QUANTIZED.match(name):
                q, s = quantize_weight(t)
                worst = max(worst, float((dequantize(q, s) - t.float()).abs().max() / t.float().abs().max().clamp(min=1e-12)))
                out[name], out[name.removesuffix(".weight") + ".weight_scale"] = q, s
                n_q += 1
            else:
                out[name] = t.contiguous()
    if n_q == 0:
        raise ValueError(f"{src}: no linear weights matched {QUANTIZED.pattern}; is it a Llama / Qwen3-MoE HF export?")
    bytes_out = sum(t.numel() * t.element_size() for t in out.values())
    save_file(out, str(dst / "model.safetensors"), metadata={"format": "pt"})
    conf["quantization_config"] = quantization_config()
    (dst / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
    for p in src.iterdir():  # tokenizer, chat template, generation config
        if p.is_file() and p.suffix != ".safetensors" and p.name not in ("config.json", "README.md"):
            shutil.copy2(p, dst / p.name)
    return {"quantized_tensors": n_q, "max_rel_error": worst, "bytes_before": bytes_in, "bytes_after": bytes_out}
