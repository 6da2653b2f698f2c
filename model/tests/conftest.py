"""Shared helpers: run a helper script in a fresh process (plain python or torchrun) and read its JSON.

Megatron jobs run out of process: model.cpu_compat installs a process-wide TorchFunctionMode and vLLM
changes the thread count and LD_PRELOAD of its process, so the pytest process stays clean.
"""
from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_helper(script: str, args: list[str], nproc: int = 1, timeout: int = 600, env: dict | None = None) -> None:
    """Run model/tests/<script> with `args`; nproc > 1 uses torchrun. Raises with the tail of its output."""
    e = dict(os.environ, PYTHONPATH=str(REPO), OMP_NUM_THREADS="1" if nproc > 1 else os.environ.get("OMP_NUM_THREADS", "2"))
    e.pop("WORLD_SIZE", None), e.pop("RANK", None), e.pop("MASTER_ADDR", None), e.pop("MASTER_PORT", None)
    e.update(env or {})
    if nproc > 1:
        cmd = [sys.executable, "-m", "torch.distributed.run", f"--nproc-per-node={nproc}", "--nnodes=1",
               "--master-addr=127.0.0.1", f"--master-port={_free_port()}", str(HERE / script), *args]
    else:
        cmd = [sys.executable, str(HERE / script), *args]
    p = subprocess.run(cmd, cwd=REPO, env=e, capture_output=True, text=True, timeout=timeout)
    if p.returncode != 0:
        raise AssertionError(f"{' '.join(cmd[-len(args) - 1:])} failed (rc {p.returncode}):\n{(p.stdout + p.stderr)[-4000:]}")


def read_json(path: Path):
    return json.loads(Path(path).read_text())


def helper_json(out: Path, script: str, *args: str):
    """Run model/tests/<script> with `args` and `--out out` (one process) and read the JSON it wrote there."""
    run_helper(script, [*args, "--out", str(out)])
    return read_json(out)


@pytest.fixture(scope="session")
def session_tmp(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("model_tests")
