"""Fixtures shared by the pretrain_ckpt tests."""
from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def bt():
    """pretrain_ckpt/bench_train.py, one fresh copy per test module (tests patch it only through monkeypatch)."""
    # named as its package's module: a script imported without its package stops at its run-by-path guard
    spec = importlib.util.spec_from_file_location("pretrain_ckpt.bench_train", ROOT / "pretrain_ckpt/bench_train.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod
