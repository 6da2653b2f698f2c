"""An int8 (W8A8) vLLM engine reloaded in place computes what a fresh engine on the same weights computes
(the RL int8 rollout engine is synced this way every step; model.vllm_engine.keep_onednn_scales)."""
from __future__ import annotations

import pytest

from model.tests.conftest import helper_json


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    d = tmp_path_factory.mktemp("int8_reload")
    return helper_json(d / "out.json", "_int8_reload.py", str(d))


def _gap(x, y) -> float:
    return max(abs(a - b) for r, s in zip(x, y) for a, b in zip(r, s))  # nan compares False: inf below


def _finite_gap(x, y) -> float:
    g = _gap(x, y)
    return g if g == g else float("inf")


@pytest.mark.slow
def test_the_two_checkpoints_score_differently(scores):
    assert _finite_gap(scores["fresh_a"], scores["fresh_b"]) > 1e-2  # else the reload checks below prove nothing


@pytest.mark.slow
@pytest.mark.parametrize("path", ["mem_b", "dir_b"])
def test_reloaded_int8_weights_score_as_a_fresh_engine(scores, path):
    assert _finite_gap(scores[path], scores["fresh_b"]) < 1e-5


@pytest.mark.slow
def test_reloading_the_first_weights_gives_back_the_first_scores(scores):
    assert _finite_gap(scores["back_a"], scores["fresh_a"]) < 1e-5
