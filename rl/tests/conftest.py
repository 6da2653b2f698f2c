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


def env(**extra: str) -> dict:
    from model.parallel import single_process_env

    return dict(single_process_env(), PYTHONPATH=str(ROOT), DOMAINS_PLUGINS=PLUGINS, **extra)


def run(args: list[str], extra_env: dict | None = None, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(args, cwd=ROOT, env=env(**(extra_env or {})), capture_output=True, text=True, **kw)


def torchrun(nproc: int, module: str, *args: str) -> list[str]:
    return [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}", "-m", module,
            *args]


def kill9_at_checkpoint(args: list[str], run_dir: Path, timeout_s: float = 900, *, at_step: int = 0,
                        rank: int | None = None, extra_env: dict | None = None) -> None:
    """Start an RL run and, as soon as a step checkpoint is published (with `at_step`: the checkpoint of that step),
    SIGKILL its whole process group, or with `rank` only the torchrun worker of that rank (the launcher then stops
    the others, as on a cluster when one node dies)."""
    import signal
    import time

    import psutil

    p = subprocess.Popen(args, cwd=ROOT, env=env(**(extra_env or {})), stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    latest = run_dir / "latest"
    deadline = time.time() + timeout_s

    def published() -> bool:  # `latest` names the newest complete step directory, step_NNNNNN
        return latest.exists() and int(latest.read_text().strip().split("_")[-1] or 0) >= at_step

    while time.time() < deadline and not published():
        assert p.poll() is None, "run ended before it could be killed"
        time.sleep(0.1)
    if rank is None:
        os.killpg(p.pid, signal.SIGKILL)
    else:
        workers = [c for c in psutil.Process(p.pid).children(recursive=True)
                   if c.environ().get("RANK") == str(rank) and "rl.01_train" in " ".join(c.cmdline())]
        assert len(workers) == 1, f"rank {rank}'s worker not found among {workers}"
        workers[0].kill()
        try:
            p.wait(timeout=120)  # the launcher stops the other ranks and exits
        finally:
            try:
                os.killpg(p.pid, signal.SIGKILL)  # anything the launcher left behind
            except ProcessLookupError:
                pass
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
