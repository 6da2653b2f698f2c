"""AlignedSequentialMLP (model/layers.py) pads each expert's rows to a multiple of 64 on the CPU in 16-bit dtypes
so oneDNN reuses its GEMM primitives. The padding must change nothing: the same outputs, input gradients and
weight gradients as Megatron's SequentialMLP, exactly in float64 (where only the zero rows differ) and to bf16
rounding in bfloat16."""
from __future__ import annotations

import pytest

from model.tests.conftest import read_json, run_helper

F64_TOL = 1e-12  # zero rows add exact zeros; only a GEMM's blocking may differ
BF16_REL_TOL = 0.02  # relative to the largest value; bf16 has 8 bits of mantissa (seen: 0)


@pytest.fixture(scope="module")
def diffs(session_tmp):
    out = session_tmp / "aligned_experts.json"
    run_helper("_run_aligned_experts.py", ["--out", str(out)])
    return read_json(out)


@pytest.mark.parametrize("dtype", ["float64", "bfloat16"])
def test_experts_see_padded_rows(diffs, dtype):
    # else the comparisons below would compare SequentialMLP with itself
    rows = diffs[dtype]["rows_per_expert"]
    assert len(rows) == 8 and all(r % 64 == 0 for r in rows) and sum(rows) > 0, rows


def test_every_expert_weight_gets_a_gradient(diffs):
    # 8 experts x (fc1, fc2): else a weight the comparison never sees could hide a difference
    assert len(diffs["float64"]["params"]) == 16, diffs["float64"]["params"]


def test_padding_is_exact_in_float64(diffs):
    d = diffs["float64"]
    assert d["out_max_abs"] <= F64_TOL * d["out_scale"], d
    assert d["x_grad_max_abs"] <= F64_TOL * d["out_scale"], d
    assert d["w_grad_max_abs"] <= F64_TOL * d["w_grad_scale"], d


def test_padding_matches_to_bf16_rounding(diffs):
    d = diffs["bfloat16"]
    assert d["out_max_abs"] <= BF16_REL_TOL * d["out_scale"], d
    assert d["w_grad_max_abs"] <= BF16_REL_TOL * d["w_grad_scale"], d
