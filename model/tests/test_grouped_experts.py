"""GroupedSequentialMLP (model/layers.py) runs the experts on the CPU as one grouped GEMM per linear, each expert's
rows padded to a multiple of 64 in bf16 so oneDNN reuses its GEMM primitives. It must compute Megatron's
SequentialMLP: the same outputs, input gradients and weight gradients, to float32 rounding in float32 (padded or
not: zero rows add exact zeros, only the GEMMs' blocking differs) and to bf16 rounding in bfloat16. float64, which
torch._grouped_mm lacks, runs SequentialMLP's loop."""
from __future__ import annotations

import pytest

from model.tests.conftest import helper_json

COUNTS = [0, 1, 63, 64, 65, 130, 7, 200]  # _run_grouped_experts.COUNTS
F32_REL_TOL = 1e-5  # relative to the largest value; float32 has 24 bits of mantissa
BF16_REL_TOL = 0.02  # relative to the largest value; bf16 has 8 bits of mantissa
GROUPED = ["float32", "float32_padded", "bfloat16"]


@pytest.fixture(scope="module")
def diffs(session_tmp):
    return helper_json(session_tmp / "grouped_experts.json", "_run_grouped_experts.py")


@pytest.mark.parametrize("case", GROUPED)
def test_the_grouped_path_replaces_the_expert_loop(diffs, case):
    # else the comparisons below would compare SequentialMLP with itself
    d = diffs[case]
    assert d["expert_module_rows"] == [] and len(d["groups"]) == 2, d
    assert d["reference_expert_module_rows"] == COUNTS, d


def test_float64_runs_the_expert_loop(diffs):
    d = diffs["float64"]
    assert d["expert_module_rows"] == COUNTS and d["groups"] == [], d
    assert d["out_max_abs"] == 0 and d["w_grad_max_abs"] == 0, d


@pytest.mark.parametrize("case", ["float32_padded", "bfloat16"])
def test_groups_are_padded_to_multiples_of_64(diffs, case):
    for sizes in diffs[case]["groups"]:
        assert [s - (-c % 64) for s, c in zip(sizes, COUNTS)] == COUNTS, sizes


def test_float32_groups_are_the_expert_counts(diffs):
    # MKL has no per-shape set-up, so float32 runs unpadded
    assert diffs["float32"]["groups"] == [COUNTS, COUNTS], diffs["float32"]["groups"]


def test_every_expert_weight_gets_a_gradient(diffs):
    # 8 experts x (fc1, fc2): else a weight the comparison never sees could hide a difference
    assert len(diffs["float32"]["params"]) == 16, diffs["float32"]["params"]


@pytest.mark.parametrize("case,tol", [("float32", F32_REL_TOL), ("float32_padded", F32_REL_TOL),
                                      ("bfloat16", BF16_REL_TOL)])
def test_grouped_experts_match_sequential_mlp(diffs, case, tol):
    d = diffs[case]
    assert d["out_max_abs"] <= tol * d["out_scale"], d
    assert d["x_grad_max_abs"] <= tol * d["x_grad_scale"], d
    assert d["w_grad_max_abs"] <= tol * d["w_grad_scale"], d
