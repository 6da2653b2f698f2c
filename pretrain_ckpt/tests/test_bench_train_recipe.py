"""bench_train on a recipe's model (make bench-train RECIPE=...): the SmolLM2-135M recipe is the imported checkpoint's
shape, the tiny default is today's MoE, the FLOPs of a dense model are a hand computation, the Makefile names each
recipe's results file, and the dense path builds Megatron and transformers LlamaForCausalLM on a tiny dense model
and runs a step each (subprocesses, small mode). No speed is asserted."""
from __future__ import annotations

import json
import math
import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from model.config import ConfigError, ModelConfig
from model.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]

# config.json of SmolLM2-135M-Instruct as the wheel's de-quantized HF directory holds it (pretrain_ckpt/wheel_base.py)
SMOLLM2_HF = {"architectures": ["LlamaForCausalLM"], "model_type": "llama", "head_dim": 64, "hidden_size": 576,
              "initializer_range": 0.02, "intermediate_size": 1536, "max_position_embeddings": 8192,
              "num_attention_heads": 9, "num_hidden_layers": 30, "num_key_value_heads": 3,
              "rms_norm_eps": 9.999999747378752e-06,
              "rope_parameters": {"rope_theta": 100000.0, "rope_type": "default"},
              "tie_word_embeddings": True, "vocab_size": 49152}


def test_smollm2_recipe_is_the_imported_checkpoints_model_at_the_real_chains_length(bt):
    from model.hf_io import model_config_from_hf

    rc, cfg, bench = bt.load_bench("smollm2_cpu", [])
    assert cfg.to_dict() == model_config_from_hf(SMOLLM2_HF).to_dict()  # every field, as the import makes it
    assert not cfg.is_moe and cfg.tie_word_embeddings and cfg.num_parameters() == 134_515_008
    sft = load_recipe("sft", "smollm2_cpu")
    assert bench["seq_length"] == sft["train"]["seq_length"] == 1024 and bench["batch"] in (1, 2)
    # steps few enough for < 5 min on 2 cores at ~4-8 s per step of a side (fp32), enough for a median
    n = bench["warmup"] + bench["steps"]
    assert 2 * n + 2 * bench["fused_cost"] + 2 * bench["mode_cost"] <= 24 and bench["steps"] >= 5


def test_tiny_default_is_the_tiny_moe_base_with_todays_sizes(bt):
    rc, cfg, bench = bt.load_bench("tiny_cpu", [])
    old_base_config = ModelConfig(vocab_size=4096, hidden_size=256, num_layers=8, num_attention_heads=4,
                                  num_query_groups=2, head_dim=64, num_experts=8, moe_router_topk=2,
                                  moe_ffn_hidden_size=256, max_position_embeddings=512)
    want = old_base_config.to_dict() | {"max_position_embeddings": 1024}  # RoPE is computed per position: no effect
    assert cfg.to_dict() == want
    assert bench == {"seq_length": 512, "batch": 4, "warmup": 2, "steps": 5, "mode_cost": 2, "fused_cost": 2}
    assert bt.default_out("tiny_cpu", "fp32") == "results/bench/train.json"
    assert bt.default_out("smollm2_cpu", "fp32") == "results/bench/train_smollm2_cpu.json"
    assert bt.default_out("smollm2_cpu", "bf16") == "results/bench/train_smollm2_cpu_bf16.json"
    assert bt.default_out("tiny_cpu", "bf16", fused=True) == "results/bench/train_bf16_fused.json"


def test_a_typo_in_the_bench_section_is_refused(bt):
    with pytest.raises(ConfigError, match=r"^bench\.stpes is not a key of bench \(did you mean steps\?\)"):
        bt.load_bench("smollm2_cpu", ["bench.stpes=2"])
    with pytest.raises(ConfigError, match=r"bench\.batch='two' must be int"):
        bt.load_bench("smollm2_cpu", ["bench.batch=two"])


def test_dense_flops_are_six_matmul_params_per_token_plus_attention(bt):
    cfg = ModelConfig(vocab_size=1000, hidden_size=64, num_layers=2, num_attention_heads=4, num_query_groups=2,
                      head_dim=16, ffn_hidden_size=128, tie_word_embeddings=True, max_position_embeddings=64)
    f = bt.model_flops_per_step(cfg, batch=2, seq=32)
    # by hand, per layer: q 64x64 + k 64x32 + v 64x32 + o 64x64 = 12288; SwiGLU 3 x 64x128 = 24576 -> 36864;
    # 2 layers 73728 + the output layer 1000x64 = 64000 -> 137728 (tied: the one matrix once; norms not counted)
    assert f["matmul_params"] == 137_728
    assert f["tokens"] == 64 and f["flops_6nd"] == 6 * 137_728 * 64 == 52_887_552
    # QK^T and AV, 2 FLOPs/MAC, fwd+bwd 3x, causal half: 3*2*2 * b 2 * s^2/2 512 * heads*head_dim 64 * layers 2
    assert f["flops_attention"] == 3 * 2 * 2 * 2 * 512 * 64 * 2 == 1_572_864
    assert f["flops_per_step"] == 52_887_552 + 1_572_864
    assert f["total_params"] == 137_728 + 64_000 - 64_000 + 2 * 2 * 64 + 64  # all params: + 5 norms of 64
    untied = bt.model_flops_per_step(ModelConfig(**{**cfg.to_dict(), "rope_scaling": cfg.rope_scaling,
                                                    "tie_word_embeddings": False}), batch=2, seq=32)
    assert untied["matmul_params"] == 137_728 and untied["total_params"] == f["total_params"] + 64_000
    # SmolLM2-135M: 30 x (576x(9+3+3)x64 + 9x64x576 + 3x576x1536) + 49152x576 = 134,479,872 (its 134,515,008 less
    # the 61 norms of 576)
    real = bt.model_flops_per_step(bt.load_bench("smollm2_cpu", [])[1], batch=1, seq=1024)
    assert real["matmul_params"] == 134_479_872 == 134_515_008 - 61 * 576
    assert real["flops_6nd"] == 6 * 134_479_872 * 1024
    assert real["flops_attention"] == 12 * 1024 * 1024 // 2 * 9 * 64 * 30


def test_moe_flops_count_the_router_and_the_top_k_experts(bt):
    cfg = bt.load_bench("tiny_cpu", [])[1]
    f = bt.model_flops_per_step(cfg, batch=1, seq=512)
    # 8 x (256x64x(4+2+2) + 4x64x256 + router 8x256 + top-2 x 3 x 256x256) + output 4096x256
    assert f["matmul_params"] == 8 * (131072 + 65536 + 2048 + 393216) + 1_048_576 == 5_783_552


def make_n(*args) -> str:
    out = subprocess.run(["make", "-n", "--no-print-directory", "bench-train", *args], cwd=ROOT, capture_output=True,
                         text=True, timeout=120)
    assert out.returncode == 0, out.stderr
    return [ln for ln in out.stdout.splitlines() if "pretrain_ckpt.bench_train" in ln][-1]


def test_make_bench_train_passes_the_recipe_and_names_its_results_file():
    assert make_n().endswith("--recipe tiny_cpu --dtype fp32 --profile --out results/bench/train.json")
    assert make_n("RECIPE=smollm2_cpu").endswith(
        "--recipe smollm2_cpu --dtype fp32 --profile --out results/bench/train_smollm2_cpu.json")
    assert make_n("RECIPE=smollm2_cpu", "BENCH_DTYPE=bf16", "RESULTS=/tmp/r").endswith(
        "--recipe smollm2_cpu --dtype bf16 --profile --out /tmp/r/bench/train_smollm2_cpu_bf16.json")
    assert make_n("BENCH_DTYPE=bf16", "BENCH_FUSE=1").endswith(
        "--recipe tiny_cpu --dtype bf16 --profile --fuse-elementwise --out results/bench/train_bf16_fused.json")
    assert make_n("BENCH_DTYPE=bf16", "BENCH_FUSE=1", "BENCH_ATTN=gemm").endswith(
        "--recipe tiny_cpu --dtype bf16 --profile --fuse-elementwise --cpu-attention gemm "
        "--out results/bench/train_bf16_fused_gemm.json")


def test_a_base_of_another_model_is_refused_in_one_line(tmp_path):
    from model.hf_io import hf_config

    d = tmp_path / "hf"
    d.mkdir()
    other = ModelConfig(vocab_size=512, hidden_size=64, num_layers=2, num_attention_heads=4, num_query_groups=2,
                        head_dim=16, ffn_hidden_size=128)
    (d / "config.json").write_text(json.dumps(hf_config(other)))
    (d / "model.safetensors").write_bytes(b"")  # never read: the config is compared first
    r = subprocess.run([sys.executable, "-m", "pretrain_ckpt.bench_train", "--recipe", "smollm2_cpu", "--base", str(d),
                        "--out", str(tmp_path / "x.json")], cwd=ROOT, capture_output=True, text=True, timeout=300)
    assert r.returncode == 2 and r.stderr.count("\n") == 1, r.stderr
    assert r.stderr.startswith(f"error: --base {d} is another model than the recipe's: model.vocab_size=49152 but the "
                               "base has 512") and not (tmp_path / "x.json").exists()


TINY_DENSE = {"model": {"vocab_size": 512, "hidden_size": 64, "num_layers": 2, "num_attention_heads": 4,
                        "num_query_groups": 2, "head_dim": 16, "ffn_hidden_size": 128, "num_experts": 0,
                        "tie_word_embeddings": True, "rope_theta": 100000.0, "max_position_embeddings": 128},
              "bench": {"seq_length": 32, "batch": 1, "warmup": 1, "steps": 1, "mode_cost": 0, "fused_cost": 1}}


def test_dense_path_builds_both_sides_and_steps_each_in_fp32_and_bf16(bt, tmp_path):
    recipe = tmp_path / "tiny_dense.yaml"
    recipe.write_text(yaml.safe_dump(TINY_DENSE))
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    procs = {dt: subprocess.Popen([sys.executable, "-m", "pretrain_ckpt.bench_train", "--recipe", str(recipe),
                                   "--dtype", dt, "--threads", "1", "--out", str(tmp_path / f"{dt}.json")], cwd=ROOT,
                                  env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
             for dt in ("fp32", "bf16")}  # both at once: one thread each
    logs = {dt: p.communicate(timeout=600)[0] for dt, p in procs.items()}
    cfg = ModelConfig.from_dict(TINY_DENSE["model"])
    for dt, p in procs.items():
        assert p.returncode == 0, logs[dt][-3000:]
        res = json.loads((tmp_path / f"{dt}.json").read_text())
        assert res["schema"] == {"name": "bench.train", "version": 2} and res["git_commit"] and res["machine"]["cores"]
        assert res["recipe"] == str(recipe) and res["model"] == "dense" and "random init" in res["weights"]
        assert res["baseline"] == "transformers LlamaForCausalLM + torch AdamW loop"
        assert res["model_config"] == cfg.to_dict()
        assert res["setup"]["dtype"] == dt and (res["setup"]["seq_length"], res["setup"]["micro_batch"]) == (32, 1)
        assert res["flops"] == bt.model_flops_per_step(cfg, 1, 32)
        # tied on the baseline too: embedding + final norm + 2 layers x (2 norms, q k v o, gate up down), no lm_head
        assert res["hf"]["parameter_tensors"] == 2 + 2 * 9
        # and on Megatron: embedding + final norm + 2 x (2 norms, qkv, proj, fc1, fc2), no output_layer weight
        assert res["megatron"]["parameter_tensors"] == 2 + 2 * 6
        for side in ("megatron", "hf"):
            r = res[side]
            assert len(r["losses"]) == 2 and all(math.isfinite(x) for x in r["losses"])
            assert abs(r["losses"][0] - math.log(512)) < 0.1  # a near-uniform random init
            assert r["mfu"] == pytest.approx(r["model_gflop_per_s"] / res["matmul_peak_gflops"]["used_gflops"])
            assert r["tokens_per_s"] == pytest.approx(32 / r["step_s_median"])
        # the same weights and batch: the first losses agree (bf16: Megatron's bf16 weights vs HF's fp32 + autocast)
        assert res["first_step_loss_abs_diff"] < (1e-4 if dt == "fp32" else 2e-2), res["first_step_loss_abs_diff"]
        assert res["baseline_fused_adamw"] is not None and res["cpu_compat_mode_cost"] is None
