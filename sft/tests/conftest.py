"""Fixtures for SFT tests: a small tokenizer with the chat special tokens, a micro base and SFT data."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("RANK", None)
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def tokenizer_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("sft_tok")
    r = run([sys.executable, "-m", "pretrain_ckpt.01_corpus", "--out", str(d / "corpus"), "--max-mb", "0.4",
             "--drill-docs", "100"])
    assert r.returncode == 0, r.stderr
    r = run([sys.executable, "-m", "pretrain_ckpt.02_tokenizer", "--in", str(d / "corpus"), "--out", str(d / "tok"),
             "--vocab-size", "1024"])
    assert r.returncode == 0, r.stderr
    return d


@pytest.fixture(scope="session")
def micro_chain(tokenizer_dir, tmp_path_factory) -> Path:
    """A micro base (2-layer MoE) + domains datasets (math, agent) + packed SFT data."""
    d = tmp_path_factory.mktemp("sft_chain")
    r = run([sys.executable, "-m", "pretrain_ckpt.03_pretrain", "--corpus", str(tokenizer_dir / "corpus"), "--tokenizer",
             str(tokenizer_dir / "tok"), "--out", str(d / "base"), "--recipe", "micro_cpu",
             "--set", "model.vocab_size=1024", "--set", "train.steps=4", "--set", "train.save_every=100"])
    assert r.returncode == 0, r.stderr[-3000:]
    r = run([sys.executable, "-m", "domains", "datasets", "--out", str(d / "domains"), "--sft-per-domain", "3",
             "--rl-per-domain", "1", "--eval-per-domain", "1", "--max-difficulty", "0", "--families", "math,agent"])
    assert r.returncode == 0, r.stderr[-3000:]
    r = run([sys.executable, "-m", "sft.01_data", "--in", str(d / "domains"), "--base", str(d / "base"), "--out",
             str(d / "sft_data"), "--recipe", "micro_cpu", "--set", "data.mixture={math: 1.0, agent: 1.0}",
             "--set", "data.num_demos=40"])
    assert r.returncode == 0, r.stderr[-3000:]
    return d
