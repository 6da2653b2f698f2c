"""W8A8 compressed-tensors writer: round-trip error bounds, what is and is not quantized, the config block."""
from __future__ import annotations

import json

import pytest
import torch
from safetensors.torch import load_file, save_file

from serving import quantize


@pytest.mark.parametrize("scheme", ["w8a8_int8", "w8a8_fp8"])
def test_per_channel_round_trip_is_within_half_a_step(scheme):
    w = torch.randn(48, 64) * torch.logspace(-3, 1, 48)[:, None]  # rows of very different scale
    q, s = quantize.quantize_weight(w, scheme)
    assert q.dtype == (torch.int8 if scheme == "w8a8_int8" else torch.float8_e4m3fn) and s.shape == (48, 1)
    err = (quantize.dequantize(q, s) - w).abs()
    if scheme == "w8a8_int8":
        assert (err <= s / 2 + 1e-7).all()  # rounding to the nearest of 255 levels per row
    else:
        assert (err <= w.abs() * 2 ** -4 + s * 2 ** -9).all()  # e4m3: 3 mantissa bits, subnormals near 0


def _hf_dir(tmp_path, moe: bool):
    g = torch.Generator().manual_seed(0)
    t = {"model.embed_tokens.weight": torch.randn(128, 32, generator=g), "lm_head.weight": torch.randn(128, 32, generator=g),
         "model.layers.0.self_attn.q_proj.weight": torch.randn(64, 32, generator=g),
         "model.layers.0.input_layernorm.weight": torch.ones(32)}
    if moe:
        t["model.layers.0.mlp.gate.weight"] = torch.randn(4, 32, generator=g)
        t["model.layers.0.mlp.experts.0.up_proj.weight"] = torch.randn(32, 32, generator=g)
    else:
        t["model.layers.0.mlp.up_proj.weight"] = torch.randn(32, 32, generator=g)
    save_file(t, str(tmp_path / "model.safetensors"))
    (tmp_path / "config.json").write_text(json.dumps({"model_type": "qwen3_moe" if moe else "llama"}))
    (tmp_path / "tokenizer.json").write_text("{}")
    return t


def test_moe_experts_and_router_stay_unquantized_without_a_kernel(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    orig = _hf_dir(src, moe=True)
    stats = quantize.quantize_hf_dir(src, dst, experts=False)
    out = load_file(str(dst / "model.safetensors"))
    assert out["model.layers.0.self_attn.q_proj.weight"].dtype == torch.int8
    assert "model.layers.0.self_attn.q_proj.weight_scale" in out
    for k in ("model.layers.0.mlp.experts.0.up_proj.weight", "model.layers.0.mlp.gate.weight", "lm_head.weight",
              "model.embed_tokens.weight"):
        assert torch.equal(out[k], orig[k]), k
    qc = json.loads((dst / "config.json").read_text())["quantization_config"]
    assert qc["quant_method"] == "compressed-tensors" and qc["format"] == "int-quantized"
    assert "re:.*mlp\\.experts.*" in qc["ignore"] and "re:.*mlp\\.gate$" in qc["ignore"]
    assert stats["quantized_tensors"] == 1 and (dst / "tokenizer.json").exists()


def test_experts_are_quantized_when_asked(tmp_path):
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.mkdir()
    _hf_dir(src, moe=True)
    quantize.quantize_hf_dir(src, dst, experts=True)
    out = load_file(str(dst / "model.safetensors"))
    assert out["model.layers.0.mlp.experts.0.up_proj.weight"].dtype == torch.int8
    assert not any("experts" in x for x in json.loads((dst / "config.json").read_text())["quantization_config"]["ignore"])


def test_already_quantized_input_is_refused(tmp_path):
    src = tmp_path / "src"
    src.mkdir()
    _hf_dir(src, moe=False)
    quantize.quantize_hf_dir(src, tmp_path / "q")
    with pytest.raises(ValueError, match="already has a quantization_config"):
        quantize.quantize_hf_dir(tmp_path / "q", tmp_path / "qq")


def _gemm(*args):
    import sys

    from serving.tests.conftest import ROOT, run

    r = run([sys.executable, str(ROOT / "serving/tests/_gemm_check.py"), *args])
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks vLLM's CPU int8 GEMM")
def test_vllm_cpu_int8_gemm_is_exact_on_the_weights_we_write():
    # the weight range is chosen per machine (7 bits without VNNI); vLLM's kernel then equals the W8A8 reference
    assert _gemm()["worst_rel_error"] < 1e-4


@pytest.mark.parametrize("amx,dtype,ok", [(False, "float32", False), (False, "bfloat16", False),
                                          (True, "float32", False), (True, "bfloat16", True)])
def test_experts_are_quantized_only_where_vllm_cpu_runs_them(monkeypatch, amx, dtype, ok):
    # vLLM-CPU's CPUExpertsInt8 needs AMX tiles AND bf16/half activations: in float32 on a Xeon with AMX it raised
    # "int8_scaled_mm_with_quant: expect A to be bfloat16 or half" on every request of the fast variant
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    assert quantize.experts_supported(dtype)[0] is ok


@pytest.mark.parametrize("amx", [False, True])
def test_the_fast_variant_is_served_in_a_dtype_its_int8_kernels_take(monkeypatch, amx):
    import importlib

    from model import recipe

    fast = importlib.import_module("serving.02_fast")
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    monkeypatch.setattr(torch.cpu, "_is_amx_tile_supported", lambda: amx, raising=False)
    choice = fast.validate(recipe.load_recipe("serving", "tiny_cpu", []))
    assert (choice["dtype"], choice["experts"]) == (("bfloat16", True) if amx else ("float32", False))
