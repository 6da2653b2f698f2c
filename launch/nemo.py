"""Build and run NeMo-Run experiments for one stage command (needs .venv-launch: `make setup-launch`).

Slurm: the job runs the clone itself, not a copy. The clone is mounted into the container at its own
path and NeMo-Run's code folder is a symlink to it, so relative paths (checkpoints/, data/, results/)
mean the same thing as on the submitting machine and every manifest records the clone's git commit.
This needs the clone on a filesystem that the compute nodes share (the usual /lustre or /home).
"""
from __future__ import annotations

import os
import shlex
from pathlib import Path

from launch.cluster import ClusterConfig

ROOT = Path(__file__).resolve().parent.parent
os.environ.setdefault("NEMORUN_HOME", str(ROOT / ".nemo_run"))  # not ~/.nemo_run: state stays with the clone

import nemo_run as run  # noqa: E402


def _script(module: str, args: list[str], env: dict[str, str] | None = None) -> run.Script:
    """`python -m module args` (the job runs in the clone's root, where the project's packages import)."""
    return run.Script(path=module, args=list(args), entrypoint="python", m=True, env=dict(env or {}))


def slurm_executor(cl: ClusterConfig) -> run.SlurmExecutor:
    root = cl.remote_root or str(ROOT)
    job_dir = cl.job_dir or os.path.join(root, ".nemo_run", "jobs")
    tunnel = (run.SSHTunnel(host=cl.host, user=cl.user, job_dir=job_dir) if cl.host
              else run.LocalTunnel(job_dir=job_dir))
    extra = {k: getattr(cl, k) for k in ("qos", "exclusive", "mem", "cpus_per_task") if getattr(cl, k) is not None}
    return run.SlurmExecutor(
        account=cl.account, partition=cl.partition, time=cl.time, nodes=cl.nodes,
        ntasks_per_node=cl.gpus_per_node if cl.launcher == "torchrun" else 1,
        gpus_per_node=cl.gpus_per_node or None, container_image=cl.container_image,
        container_mounts=[f"{root}:{root}", *cl.mounts], env_vars={"PYTHONPATH": root, **cl.env},  # -m imports the clone
        setup_lines="\n".join(cl.setup) or None, job_name_prefix="posttrain-", tunnel=tunnel,
        # no copy of the code: NeMo-Run's code dir becomes a symlink to the clone (see the module docstring)
        packager=run.GitArchivePackager(symlink_from_remote_dir=root),
        launcher="torchrun" if cl.launcher == "torchrun" else None, **extra)


def local_executor(nproc: int, env: dict[str, str] | None = None) -> run.LocalExecutor:
    return run.LocalExecutor(ntasks_per_node=nproc, launcher="torchrun", env_vars=dict(env or {}))


def dry_run(name: str, executor, module: str, args: list[str]) -> tuple[str, str]:
    """(submit command, sbatch script) of the stage command as one job; nothing is submitted."""
    with run.Experiment(name, executor=executor, log_level="WARN") as exp:
        exp.add(_script(module, args), name=name)
        exp.dryrun(log=False, delete_exp_dir=True)
        req = exp.jobs[0]._dryrun_info.request  # set by Job.launch(dryrun=True); the public API only logs it
        return shlex.join(req.launch_cmd) + " <this script>", req.materialize()


def run_and_wait(name: str, executor, module: str, args: list[str], detach: bool) -> tuple[int, str]:
    """Run; NeMo-Run does not raise when a job fails, so the job's final state becomes the exit code."""
    with run.Experiment(name, executor=executor, log_level="WARN") as exp:
        exp.add(_script(module, args), name=name)
        exp.run(detach=detach, tail_logs=not detach)
    # leaving the block waited for the job (unless detached) and recorded its final state
    job = exp.jobs[0]
    if detach:
        return 0, f"submitted {job.id}: {job.handle}"
    state = str(job.state)
    return (0 if state.endswith("SUCCEEDED") else 1), f"{job.id}: {state}"
