"""`train.fuse_elementwise` (model/fused.py) runs the norms, the experts' activation, the dense MLP's SwiGLU
(Megatron's own bias_activation_fusion) and the loss's cross entropy compiled (torch.compile); `train.cpu_attention:
gemm` adds model/attention.py. It must compute what the eager layers compute: the same per-token losses and gradients to
float32 rounding in float32, and to bf16 rounding in bfloat16: each piece against the code it replaces, and the
dense model as a whole (in the MoE model a bf16 rounding difference can flip a token's expert choice, which moves
that expert's gradient by far more than rounding: measured ||diff|| / ||grad|| 0.28 for one expert). A machine without a C++ compiler gets a one-line error before any work."""
from __future__ import annotations

import pytest

from model.tests.conftest import helper_json

PIECES = ["rms_norm", "swiglu_probs", "language_model_loss"]  # _run_fused.PIECES
F32_REL_TOL = 1e-5  # relative to the largest value; measured 1.2e-6 for the worst gradient, 7e-8 for the losses
BF16_REL_TOL = 0.02  # relative to the largest value, one piece; measured 0.006 at worst (the experts' activation)
BF16_LOSS_REL_TOL = 0.005  # relative to the largest loss, the dense model; measured 3.1e-4 (3.0e-4 with gemm attention)
BF16_GRAD_NORM_TOL = 0.05  # ||diff|| / ||grad|| per parameter, the dense model (4 layers); measured 0.0082 (gemm 0.0095)


@pytest.fixture(scope="module")
def diffs(session_tmp):
    return helper_json(session_tmp / "fused.json", "_run_fused.py")


def test_every_piece_runs_compiled(diffs):
    # else the comparisons below would compare the eager model with itself
    d = diffs["float32"]
    assert all(d["calls"][p] > 0 for p in PIECES), d["calls"]
    assert d["new_graphs"] >= len(PIECES) and d["graph_breaks"] == 0, d


def test_the_dense_model_runs_its_pieces_compiled(diffs):
    d = diffs["bfloat16_dense"]  # no experts: the norms and the loss
    assert d["calls"]["rms_norm"] > 0 and d["calls"]["language_model_loss"] == 1, d["calls"]
    assert d["graph_breaks"] == 0, d


def test_gemm_attention_runs_where_chosen(diffs):
    assert diffs["bfloat16_dense_gemm"]["calls"]["attention"] > 0, diffs["bfloat16_dense_gemm"]["calls"]
    assert diffs["bfloat16_dense"]["calls"]["attention"] == 0, diffs["bfloat16_dense"]["calls"]


@pytest.mark.parametrize("case", ["float32", "bfloat16_dense", "bfloat16_dense_gemm"])
def test_every_parameter_gets_a_gradient(diffs, case):
    d = diffs[case]
    assert d["params"] == d["fast_params_with_grad"] > 0, d


def test_float32_matches_the_eager_model(diffs):
    d = diffs["float32"]
    assert d["loss_max_abs"] <= F32_REL_TOL * d["loss_scale"], d
    assert d["grad_max_rel"] <= F32_REL_TOL, d


@pytest.mark.parametrize("case", ["bfloat16_dense", "bfloat16_dense_gemm"])
def test_bfloat16_matches_the_eager_model_to_bf16_rounding(diffs, case):
    d = diffs[case]
    assert d["loss_max_abs"] <= BF16_LOSS_REL_TOL * d["loss_scale"], d
    assert d["grad_norm_rel"] <= BF16_GRAD_NORM_TOL, d


@pytest.mark.parametrize("piece", PIECES)
def test_each_bfloat16_piece_matches_the_code_it_replaces(diffs, piece):
    d = diffs["bfloat16_pieces"][piece]
    assert d["grads"] == (1 if piece == "language_model_loss" else 2), d
    assert d["out_max_rel"] <= BF16_REL_TOL and d["grad_max_rel"] <= BF16_REL_TOL, d


def test_no_compiler_is_a_one_line_error():
    from torch._inductor import config

    from model import fused
    from model.config import ConfigError

    # config.patch, not monkeypatch: monkeypatch's undo left Inductor's config without cpp.cxx, so every later
    # compile in this process failed
    with config.patch({"cpp.cxx": ("no-such-c++-compiler",)}), \
            pytest.raises(ConfigError, match=r"needs a C\+\+ compiler .*set train.fuse_elementwise=false") as e:
        fused.check()
    assert "\n" not in str(e.value)
