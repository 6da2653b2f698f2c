"""An int8 (W8A8) vLLM engine reloaded in place computes what a fresh engine on the same weights computes
(the RL int8 rollout engine is synced this way every step; model.vllm_engine.keep_onednn_scales)."""
from __future__ import annotations

import math

import pytest

from model.tests.conftest import helper_json


@pytest.fixture(scope="module")
def scores(tmp_path_factory):
    d = tmp_path_factory.mktemp("int8_reload")
    return helper_json(d / "out.json", "_int8_reload.py", str(d))


def _gap(x, y) -> float:
    """Largest |difference| of two logprob tables; a NaN anywhere counts as infinitely far (max() over NaNs
    depends on their order)."""
    d = [abs(a - b) for r, s in zip(x, y) for a, b in zip(r, s)]
    return max(math.inf if math.isnan(v) else v for v in d)


@pytest.mark.slow
def test_the_two_checkpoints_score_differently(scores):
    assert _gap(scores["fresh_a"], scores["fresh_b"]) > 1e-2  # else the reload checks below prove nothing


@pytest.mark.slow
@pytest.mark.parametrize("path", ["mem_b", "dir_b"])
def test_reloaded_int8_weights_score_as_a_fresh_engine(scores, path):
    assert _gap(scores[path], scores["fresh_b"]) < 1e-5


@pytest.mark.slow
def test_reloading_the_first_weights_gives_back_the_first_scores(scores):
    assert _gap(scores["back_a"], scores["fresh_a"]) < 1e-5
