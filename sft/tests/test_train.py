"""SFT training: the loss moves, layouts agree with one process, kill -9 resumes to the same curve, packed
documents stay isolated through the trainer's own data path, bad input is refused.

Losses are compared at full precision from the published metrics.jsonl, never from the 5-decimal log line."""
from __future__ import annotations

import json
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
    return launch + ["-m", "sft.02_train", "--in", str(chain / "base"), "--data", str(chain / "sft_data"),
                     "--out", str(out), "--recipe", "micro_cpu", *extra]


def losses(stdout: str) -> list[float]:
    return [float(x) for _, x in STEP.findall(stdout)]


def metrics(out) -> list[dict]:
    return [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]


def step_losses(out) -> list[float]:
    return [r["loss"] for r in metrics(out) if "loss" in r]


@pytest.fixture(scope="module")
def single(micro_chain, tmp_path_factory):
    out = tmp_path_factory.mktemp("single") / "sft"
    r = run(sft_cmd(micro_chain, out, "--set", "train.steps=3",
                    "--set", "parallel.global_batch_size=4", "--set", "parallel.micro_batch_size=1"))
    assert r.returncode == 0, r.stderr[-3000:]
    assert losses(r.stdout) == [round(x, 5) for x in step_losses(out)]  # the log line shows the recorded loss
    return out


def test_training_moves_the_loss_down(single):
    rows = metrics(single)
    val = {r["step"]: r["val_loss"] for r in rows if "val_loss" in r}
    assert sorted(val) == [0, 3]
    assert val[3] < val[0] - 0.05, val  # 3 steps at lr 1e-3 lower the held-out loss: the updates took effect
    assert all(r["grad_norm"] > 0 and not r["skipped"] for r in rows if "loss" in r)
    m = json.loads((single / "manifest.json").read_text())["metrics"]
    assert m["val_loss_at_start"] == val[0] and m["val_loss"] == val[3]


@pytest.mark.slow
@pytest.mark.parametrize("layout", [["parallel.tp=2", "parallel.sp=true"], ["parallel.pp=2"], ["parallel.ep=2"]],
                         ids=["tp2_sp", "pp2", "ep2"])
def test_layout_reproduces_single_process_losses(micro_chain, single, tmp_path, layout):
    sets = [x for s in layout + ["train.steps=3", "parallel.global_batch_size=4", "parallel.micro_batch_size=1"]
            for x in ("--set", s)]
    env_cmd = sft_cmd(micro_chain, tmp_path / "sft", *sets, nproc=2)
    r = run(env_cmd)
    assert r.returncode == 0, r.stderr[-3000:]
    got, ref = step_losses(tmp_path / "sft"), step_losses(single)
    assert len(got) == len(ref) == 3
    assert got == pytest.approx(ref, rel=1e-6, abs=0)


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
    assert "resumed from" in r.stdout and 0 < len(resumed) < len(losses(ref.stdout))

    assert metrics(out) == metrics(tmp_path / "ref")  # the published curve is whole: steps before the kill kept once


def test_packed_documents_keep_their_own_loss_through_the_training_path(micro_chain):
    r = run([sys.executable, "-m", "sft.tests._packed_step_check", str(micro_chain / "base"), str(micro_chain / "sft_data")])
    assert r.returncode == 0, r.stderr[-3000:]
    out = json.loads(r.stdout.strip().splitlines()[-1])
    assert out["docs"] >= 2 and max(out["first_token"]) > 0, out  # a document that starts mid-pack
    assert out["packed"] == pytest.approx(out["alone"], rel=1e-5, abs=1e-6), out


def test_mismatched_seq_length_is_refused(micro_chain, tmp_path):
    r = run(sft_cmd(micro_chain, tmp_path / "sft", "--set", "train.seq_length=256"))
    assert r.returncode == 2
    assert "train.seq_length=256 != the data's pack_length=512" in r.stderr.strip().splitlines()[-1]
    assert not (tmp_path / "sft").exists()


def test_input_without_manifest_is_refused(micro_chain, tmp_path):
    (tmp_path / "fake").mkdir()
    cmd = sft_cmd(micro_chain, tmp_path / "sft")
    i = cmd.index("--in")
    r = run(cmd[:i] + ["--in", str(tmp_path / "fake")] + cmd[i + 2:])
    assert r.returncode == 2
    assert "manifest.json: missing" in r.stderr
