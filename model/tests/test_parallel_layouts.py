"""TP=2, PP=2, EP=2 (MoE) and TP=2+SP (MoE) reproduce the single-process training losses (3 steps, dropout 0)."""
from __future__ import annotations

import pytest

from model.tests.conftest import read_json, run_helper

TOL = 1e-5


def _losses(tmp, name: str, nproc: int, *args: str) -> list[float]:
    out = tmp / f"{name}.json"
    run_helper("_run_layout.py", ["train", *args, "--out", str(out)], nproc=nproc)
    return read_json(out)["losses"]


@pytest.fixture(scope="module")
def dense_ref(session_tmp):
    return _losses(session_tmp, "dense_ref", 1)


@pytest.fixture(scope="module")
def moe_ref(session_tmp):
    return _losses(session_tmp, "moe_ref", 1, "--moe")


def _check(ref: list[float], got: list[float]) -> None:
    assert len(got) == len(ref) == 3
    assert ref[0] != ref[2], "the reference run did not train (loss unchanged): the comparison would prove nothing"
    diffs = [abs(a - b) for a, b in zip(ref, got)]
    assert max(diffs) <= TOL, f"losses {got} differ from single-process {ref} by up to {max(diffs):.3g}"


def test_tp2_dense_matches_single_process(tmp_path, dense_ref):
    _check(dense_ref, _losses(tmp_path, "tp2", 2, "--tp", "2"))


def test_pp2_dense_matches_single_process(tmp_path, dense_ref):
    _check(dense_ref, _losses(tmp_path, "pp2", 2, "--pp", "2"))


def test_ep2_moe_matches_single_process(tmp_path, moe_ref):
    _check(moe_ref, _losses(tmp_path, "ep2", 2, "--moe", "--ep", "2"))


def test_tp2_sp_moe_matches_single_process(tmp_path, moe_ref):
    _check(moe_ref, _losses(tmp_path, "tp2sp", 2, "--moe", "--tp", "2", "--sp"))


@pytest.mark.parametrize("mode", ["selective", "full"])
def test_recompute_matches_no_recompute(tmp_path, moe_ref, mode):
    _check(moe_ref, _losses(tmp_path, f"recompute_{mode}", 1, "--moe", "--recompute", mode))
