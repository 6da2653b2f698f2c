"""Fixtures for serving tests: a micro target (2-layer MoE, near its seeded init so its greedy outputs vary
with the prompt), a small domains export, and the fast variant built from them by serving/02_fast.py."""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        env.pop(k, None)
    return subprocess.run(args, cwd=ROOT, env=env, capture_output=True, text=True, **kw)


@pytest.fixture(scope="session")
def chain(tmp_path_factory) -> Path:
    """corpus -> tokenizer -> a 2-step micro base (the target) + a math-only domains export."""
    d = tmp_path_factory.mktemp("serving_chain")
    steps = [
        ["pretrain_ckpt/01_corpus.py", "--out", str(d / "corpus"), "--max-mb", "0.3", "--drill-docs", "50"],
        ["pretrain_ckpt/02_tokenizer.py", "--in", str(d / "corpus"), "--out", str(d / "tok"), "--vocab-size", "1024"],
        ["pretrain_ckpt/03_pretrain.py", "--corpus", str(d / "corpus"), "--tokenizer", str(d / "tok"), "--out",
         str(d / "base"), "--recipe", "micro_cpu", "--set", "model.vocab_size=1024", "--set", "train.steps=2",
         "--set", "optim.warmup_steps=1", "--set", "train.save_every=100"],
        ["-m", "domains", "export", "--out", str(d / "domains"), "--sft-per-domain", "1", "--rl-per-domain", "2",
         "--eval-per-domain", "1", "--max-difficulty", "0", "--families", "math"],
    ]
    for s in steps:
        r = run([sys.executable, *s])
        assert r.returncode == 0, f"{s[0]}: {r.stderr[-3000:]}"
    return d


@pytest.fixture(scope="session")
def fast(chain, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("serving_fast") / "fast"
    r = run([sys.executable, "serving/02_fast.py", "--in", str(chain / "base"), "--data", str(chain / "domains"),
             "--out", str(out), "--recipe", "micro_cpu"])
    assert r.returncode == 0, r.stderr[-3000:]
    return out
