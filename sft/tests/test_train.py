"""SFT training: layouts agree with one process, kill -9 resumes to the same curve, bad input is refused."""
from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import time

import pytest

from sft.tests.conftest import ROOT, run

STEP = re.compile(r"^step (\d+)/\d+ \| loss ([0-9.]+)", re.M)


def sft_cmd(chain, out, *extra, nproc=1):
    launch = [sys.executable] if nproc == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                   "--nproc-per-node", str(nproc)]
    return launch + ["sft/02_train.py", "--in", str(chain / "base"), "--data", str(chain / "sft_data"),
                     "--out", str(out), "--recipe", "micro_cpu", *extra]


def losses(stdout: str) -> list[float]:
    return [float(x) for _, x in STEP.findall(stdout)]


@pytest.fixture(scope="module")
def single(micro_chain, tmp_path_factory):
    r = run(sft_cmd(micro_chain, tmp_path_factory.mktemp("single") / "sft", "--set", "train.steps=3",
                    "--set", "parallel.global_batch_size=4", "--set", "parallel.micro_batch_size=1"))
    assert r.returncode == 0, r.stderr[-3000:]
    return losses(r.stdout)


@pytest.mark.slow
@pytest.mark.parametrize("layout", [["parallel.tp=2", "parallel.sp=true"], ["parallel.pp=2"], ["parallel.ep=2"]],
                         ids=["tp2_sp", "pp2", "ep2"])
def test_layout_reproduces_single_process_losses(micro_chain, single, tmp_path, layout):
    sets = [x for s in layout + ["train.steps=3", "parallel.global_batch_size=4", "parallel.micro_batch_size=1"]
            for x in ("--set", s)]
    env_cmd = sft_cmd(micro_chain, tmp_path / "sft", *sets, nproc=2)
    r = run(env_cmd)
    assert r.returncode == 0, r.stderr[-3000:]
    got = losses(r.stdout)
    assert len(got) == len(single) == 3
    assert got == pytest.approx(single, abs=1e-5)


def test_kill9_resume_gives_the_same_loss_curve(micro_chain, tmp_path):
    ref = run(sft_cmd(micro_chain, tmp_path / "ref"))
    assert ref.returncode == 0, ref.stderr[-3000:]
    out = tmp_path / "killed"
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    p = subprocess.Popen(sft_cmd(micro_chain, out), cwd=ROOT, env=env, stdout=subprocess.DEVNULL,
                         stderr=subprocess.DEVNULL, start_new_session=True)
    latest = tmp_path / "killed.run" / "latest"
    deadline = time.time() + 300
    while time.time() < deadline and not latest.exists():
        assert p.poll() is None, "run ended before it could be killed"
        time.sleep(0.1)
    os.killpg(p.pid, signal.SIGKILL)
    p.wait()
    assert not out.exists()
    r = run(sft_cmd(micro_chain, out))
    assert r.returncode == 0, r.stderr[-3000:]
    resumed = losses(r.stdout)
    full = losses(ref.stdout)
    assert "resumed from" in r.stdout and len(resumed) < len(full)
    assert resumed == full[len(full) - len(resumed):]


def test_mismatched_seq_length_is_refused(micro_chain, tmp_path):
    r = run(sft_cmd(micro_chain, tmp_path / "sft", "--set", "train.seq_length=256"))
    assert r.returncode == 2
    assert "train.seq_length=256 != the data's pack_length=512" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "sft").exists()


def test_input_without_manifest_is_refused(micro_chain, tmp_path):
    (tmp_path / "fake").mkdir()
    r = run(sft_cmd(micro_chain, tmp_path / "sft")[:2] + ["--in", str(tmp_path / "fake")]
            + sft_cmd(micro_chain, tmp_path / "sft")[4:])
    assert r.returncode == 2
    assert "manifest.json: missing" in r.stderr
