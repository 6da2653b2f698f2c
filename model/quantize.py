"""W8A8 quantization of HF tensors in the compressed-tensors layout vLLM loads (shared: serving's fast variant writes
it to disk, RL's int8 rollout engine gets it at every weight sync).

Weights: symmetric per output channel, int8 (scale = max|w_row| / 127; vLLM CPU and GPU kernels) or
fp8 e4m3 (scale = max|w_row| / 448; GPU only: vLLM-CPU has no fp8 kernel), stored as `<name>.weight`
and `<name>.weight_scale` (float32, [out, 1]). Activations: per token, quantized at run time by
vLLM (dynamic), so no calibration data is needed. MoE experts are quantized only with `experts=True`:
vLLM's int8 MoE kernel on CPU needs AMX tiles and bf16/half activations (`experts_supported(dtype)`); without
them they stay as they are. Embeddings, norms, lm_head and the MoE router stay in their original dtype: the
router is tiny and its argmax decides expert choice, and vLLM's fused MoE kernel expects quantized experts only.
No llm-compressor is installed here, so the format is written directly; vLLM's CompressedTensorsW8A8Int8 (linear)
and W8A8Int8MoE (experts) schemes read it.
"""
from __future__ import annotations

import json
import re
import shutil
from pathlib import Path

import torch

# Linear weights of the Llama / Qwen3-MoE HF layouts that are quantized (everything else is kept as is).
DENSE = re.compile(r"^model\.layers\.\d+\.(self_attn\.(q|k|v|o)_proj|mlp\.(gate|up|down)_proj)\.weight$")
EXPERT = re.compile(r"^model\.layers\.\d+\.mlp\.experts\.\d+\.(gate|up|down)_proj\.weight$")
IGNORE = ["lm_head", "re:.*mlp\\.gate$"]  # module names vLLM must build unquantized (lm_head, MoE router)
SCHEMES = {"w8a8_int8": ("int", "int-quantized", 127.0), "w8a8_fp8": ("float", "float-quantized", 448.0)}


def int8_weight_max() -> tuple[int, str]:
    """Largest |int8 weight| to store. x86 CPUs without VNNI/AMX run vLLM's oneDNN int8 GEMM on u8*s8 pairs
    summed in saturating int16 (vpmaddubsw): full-range weights overflow it. Measured here (EPYC, no VNNI):
    GEMM error 2-8% with |q| <= 127, exact (1e-7 vs the W8A8 reference) with |q| <= 63, i.e. 7-bit weights."""
    if torch.cuda.is_available():
        return 127, "CUDA GPU"
    try:
        flags = set(Path("/proc/cpuinfo").read_text().split())
    except OSError:
        flags = set()
    if flags & {"avx512_vnni", "avx_vnni", "amx_int8"} or not flags & {"avx2", "avx512f"}:
        return 127, "int8 dot products without int16 saturation (VNNI/AMX) or a non-x86 CPU"
    return 63, ("x86 CPU without VNNI/AMX: vLLM's oneDNN int8 GEMM saturates int16 pair sums, so weights use 7 bits "
                "(|q| <= 63) in int8 storage")


def _amx() -> bool:
    """CPU with AMX tiles: vLLM-CPU's int8 kernels there (GEMM and CPUExpertsInt8) take bf16/half activations only."""
    return getattr(torch.cpu, "_is_amx_tile_supported", lambda: False)()


def serve_dtype() -> tuple[str, str]:
    """The activation dtype a W8A8 int8 model runs in with vLLM on this machine, and why. On a CPU with AMX tiles vLLM
    0.32 picks its int8 GEMM (int8_scaled_mm_with_quant) by AMX and weight shape alone, and that kernel takes only
    bfloat16/half activations: in float32 every request failed ("expect A to be bfloat16 or half", measured on a Xeon
    with AMX). Elsewhere oneDNN's int8 GEMM takes float32, the target's own dtype."""
    if not torch.cuda.is_available() and _amx():
        return "bfloat16", "CPU with AMX tiles: vLLM-CPU's int8 GEMM there takes only bfloat16/half activations"
    return "float32", "the target's dtype (vLLM's int8 GEMM here takes float32 activations)"


def experts_supported(dtype: str = "float32") -> tuple[bool, str]:
    """Whether vLLM has a W8A8 MoE kernel on this machine for a model served in `dtype`, and why (checked in vLLM
    0.32's CPUExpertsInt8: AMX tiles, and activations in bfloat16/half; in float32 it raises "int8_scaled_mm_with_quant:
    expect A to be bfloat16 or half", measured on a Xeon with AMX)."""
    if torch.cuda.is_available():
        return True, "CUDA GPU: vLLM's Triton W8A8 MoE kernels"
    if not _amx():
        return False, ("vLLM-CPU's int8 MoE kernel (CPUExpertsInt8) requires AMX tiles, which this CPU lacks: "
                       "experts stay unquantized, attention/dense linears are W8A8")
    if dtype not in ("bfloat16", "float16"):
        return False, (f"vLLM-CPU's int8 MoE kernel (CPUExpertsInt8) takes bfloat16/half activations, and the model "
                       f"is served in {dtype}: experts stay unquantized, attention/dense linears are W8A8")
    return True, f"CPU with AMX tiles, served in {dtype}: vLLM's CPUExpertsInt8 kernel"


def quantization_config(scheme: str = "w8a8_int8", experts: bool = True) -> dict:
    """The config.json `quantization_config` block (compressed-tensors W8A8, channel weights, token activations)."""
    typ, fmt, _ = SCHEMES[scheme]
    q8 = {"num_bits": 8, "type": typ, "symmetric": True, "group_size": None, "block_structure": None,
          "actorder": None, "observer": None, "observer_kwargs": {}}
    return {
        "quant_method": "compressed-tensors", "format": fmt, "quantization_status": "compressed",
        "config_groups": {"group_0": {
            "targets": ["Linear"],
            "weights": {**q8, "strategy": "channel", "dynamic": False, "observer": "minmax"},
            "input_activations": {**q8, "strategy": "token", "dynamic": True},
            "output_activations": None}},
        "ignore": IGNORE + ([] if experts else ["re:.*mlp\\.experts.*"]),
        "kv_cache_scheme": None, "global_compression_ratio": None,
    }


def quantize_weight(w: torch.Tensor, scheme: str = "w8a8_int8", int_max: int = 127) -> tuple[torch.Tensor, torch.Tensor]:
    """Symmetric per-row quantization: w ~= q * scale (int8 in [-int_max, int_max] or fp8 e4m3 in [-448, 448])."""
    qmax = float(int_max) if scheme == "w8a8_int8" else SCHEMES[scheme][2]
    w = w.float()
    scale = (w.abs().amax(dim=1, keepdim=True) / qmax).clamp(min=1e-12)
    if scheme == "w8a8_int8":
        return torch.round(w / scale).clamp(-int_max, int_max).to(torch.int8), scale
    return (w / scale).clamp(-qmax, qmax).to(torch.float8_e4m3fn), scale


def dequantize(q: torch.Tensor, scale: torch.Tensor) -> torch.Tensor:
    return q.float() * scale


def quantize_tensors(tensors: dict[str, torch.Tensor], scheme: str = "w8a8_int8", experts: bool = False,
                     int_max: int = 127) -> tuple[dict[str, torch.Tensor], int, float]:
    """(the quantized HF tensors, how many weights were quantized, their largest relative error): the linear weights
    of DENSE (and EXPERT with `experts`) become `<name>.weight` + `<name>.weight_scale`; the rest stays as it is."""
    out: dict[str, torch.Tensor] = {}
    n_q, worst = 0, 0.0
    for name, t in tensors.items():
        if DENSE.match(name) or (experts and EXPERT.match(name)):
            q, s = quantize_weight(t, scheme, int_max)
            worst = max(worst, float((dequantize(q, s) - t.float()).abs().max() / t.float().abs().max().clamp(min=1e-12)))
            out[name], out[name.removesuffix(".weight") + ".weight_scale"] = q, s
            n_q += 1
        else:
            out[name] = t.contiguous()
    return out, n_q, worst


def save_quantized(tensors: dict[str, torch.Tensor], src: Path, dst: Path, scheme: str = "w8a8_int8",
                   experts: bool = False) -> None:
    """Write quantized tensors (quantize_tensors) as an HF directory vLLM loads: the safetensors, `src`'s config.json
    with the quantization_config block, and `src`'s other files (tokenizer, chat template, generation config)."""
    from safetensors.torch import save_file

    src, dst = Path(src), Path(dst)
    conf = json.loads((src / "config.json").read_text())
    if "quantization_config" in conf:
        raise ValueError(f"{src}/config.json already has a quantization_config: pass the unquantized checkpoint")
    dst.mkdir(parents=True, exist_ok=True)
    save_file(tensors, str(dst / "model.safetensors"), metadata={"format": "pt"})
    conf["quantization_config"] = quantization_config(scheme, experts)
    (dst / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
    for p in src.iterdir():
        if p.is_file() and p.suffix != ".safetensors" and p.name not in ("config.json", "README.md"):
            shutil.copy2(p, dst / p.name)
