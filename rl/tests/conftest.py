"""Fixtures for RL tests: a micro policy checkpoint (2-layer MoE, 2 pretraining steps) and toy domains datasets.

The toy plug-in domains (rl/tests/toy_domains.py) give an untrained policy rewards with variance, plus
verifiers that raise or hang; DOMAINS_PLUGINS makes every subprocess see them.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PLUGINS = "rl.tests.toy_domains"


def env() -> dict:
    e = dict(os.environ, PYTHONPATH=str(ROOT), DOMAINS_PLUGINS=PLUGINS)
    for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT"):
        e.pop(k, None)
    return e


def run(args: list[str], **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env(), capture_output=True, text=True, **kw)


def kill9_after_first_checkpoint(args: list[str], run_dir: Path, timeout_s: float = 900) -> None:
    """Start an RL run and SIGKILL its whole process group as soon as its first step checkpoint is published."""
    import os
    import signal
    import time

    p = subprocess.Popen(args, cwd=ROOT, env=env(), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                         start_new_session=True)
    latest = run_dir / "latest"
    deadline = time.time() + timeout_s
    while time.time() < deadline and not latest.exists():
        assert p.poll() is None, "run ended before it could be killed"
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()


@pytest.fixture(scope="session")
def tok_dir(tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rl_tok")
    r = run([sys.executable, "-m", "pretrain_ckpt.01_corpus", "--out", str(d / "corpus"), "--max-mb", "0.3",
             "--drill-docs", "100"])
    assert r.returncode == 0, r.stderr[-3000:]
    r = run([sys.executable, "-m", "pretrain_ckpt.02_tokenizer", "--in", str(d / "corpus"), "--out", str(d / "tok"),
             "--vocab-size", "1024"])
    assert r.returncode == 0, r.stderr[-3000:]
    return d


@pytest.fixture(scope="session")
def chain(tok_dir, tmp_path_factory) -> Path:
    d = tmp_path_factory.mktemp("rl_chain")
    t = tok_dir
    r = run([sys.executable, "-m", "pretrain_ckpt.03_pretrain", "--corpus", str(t / "corpus"), "--tokenizer",
             str(t / "tok"), "--out", str(d / "policy"), "--recipe", "micro_cpu", "--set", "model.vocab_size=1024",
             "--set", "train.steps=2", "--set", "train.save_every=100", "--set", "optim.warmup_steps=1"])
    assert r.returncode == 0, r.stderr[-3000:]
    r = run([sys.executable, "-m", "domains", "datasets", "--out", str(d / "domains"), "--families", "toy",
             "--sft-per-domain", "0", "--rl-per-domain", "8", "--eval-per-domain", "2", "--max-difficulty", "0"])
    assert r.returncode == 0, r.stderr[-3000:]
    return d
