"""Fixtures for serving tests: the shared micro chain, memorised datasets and target (tests/trained_fixtures.py), and
the fast variant built from that target by serving/02_fast.py."""
from __future__ import annotations

import sys
from pathlib import Path

import pytest

from tests.trained_fixtures import MEMORISED_TASKS, ROOT, run  # noqa: F401 - re-exported for serving's tests


@pytest.fixture(scope="session")
def chain(micro_math_chain) -> Path:
    """corpus -> tokenizer -> a 2-step micro base (the target's parent) + math-only domains datasets."""
    return micro_math_chain


@pytest.fixture(scope="session")
def fast(target, memorised, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serving_fast") / "fast"
    r = run([sys.executable, "-m", "serving.02_fast", "--in", str(target), "--data", str(memorised),
             "--out", str(out), "--recipe", "micro_cpu"])
    assert r.returncode == 0, r.stderr[-3000:]
    return out
