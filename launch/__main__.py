"""Run one stage command through NeMo-Run: Slurm from the recipe's `cluster:` section, or locally.

    # print the sbatch script a cluster run would submit (nothing is submitted, no cluster needed)
    .venv-launch/bin/python -m launch --dry-run -- -m sft.02_train --in checkpoints/base --data data/sft \
        --out checkpoints/sft --recipe qwen3_30b_a3b_h200x8
    # submit and wait (exit code = the job's), what `EXECUTOR=slurm make sft` runs for each torchrun step
    .venv-launch/bin/python -m launch -- -m sft.02_train --in checkpoints/base --data data/sft --out checkpoints/sft \
        --recipe qwen3_30b_a3b_h200x8
    # the same command under torchrun on this machine through NeMo-Run's LocalExecutor (2 processes)
    .venv-launch/bin/python -m launch --executor local --nproc 2 -- -m sft.02_train ... --recipe tiny_cpu

The stage is the module's top package (-m sft.02_train -> sft; a path, sft/02_train.py, is taken as that
module); the recipe is the script's own
`--recipe` value unless --recipe is given; its `cluster:` section (launch/cluster.py) sets nodes,
GPUs per node, container, account, partition and time, and is checked against its `parallel:` sizes
before anything is submitted.
"""
from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m launch ...")

from launch.cluster import from_recipe  # noqa: E402
from model import cli  # noqa: E402
from model.config import ConfigError  # noqa: E402
from model.recipe import load_recipe  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def parse(argv):
    ap = cli.parser(__doc__, prog="python -m launch")
    ap.add_argument("--executor", choices=("slurm", "local"), default="slurm",
                    help="slurm: NeMo-Run SlurmExecutor from the recipe's cluster: section; local: LocalExecutor + torchrun")
    ap.add_argument("--recipe", default=None, help="recipe name or path (default: the script's --recipe value)")
    ap.add_argument("--stage", default=None, help="stage folder whose recipes/ to read (default: the script's folder)")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe value for the launcher, e.g. --set cluster.nodes=4 (the script's own "
                         "--set values are applied first)")
    ap.add_argument("--dry-run", action="store_true", help="print the submit command and sbatch script; submit nothing")
    ap.add_argument("--sbatch-out", type=Path, default=None, help="with --dry-run: also write the sbatch script here")
    ap.add_argument("--detach", action="store_true", help="slurm: return once submitted instead of waiting for the job")
    ap.add_argument("--nproc", type=int, default=1, help="local: torchrun processes")
    ap.add_argument("command", nargs=argparse.REMAINDER, help="-- -m MODULE [ARGS...]: the stage command")
    a = ap.parse_args(argv)
    cmd = a.command[1:] if a.command[:1] == ["--"] else a.command
    if cmd[:1] == ["-m"]:
        cmd = cmd[1:]
    elif cmd[:1] and cmd[0].endswith(".py"):  # a script path names its module
        cmd = [cmd[0].removesuffix(".py").replace("/", "."), *cmd[1:]]
    if not cmd:
        ap.error("no stage command: append -- -m MODULE [ARGS...], e.g. -- -m sft.02_train --in ... --out ...")
    a.module, a.args = cmd[0], cmd[1:]
    return a


def script_option(args: list[str], name: str) -> list[str]:
    """Every value of `--name V` / `--name=V` in the stage command."""
    out = []
    for i, x in enumerate(args):
        if x == name and i + 1 < len(args):
            out.append(args[i + 1])
        elif x.startswith(name + "="):
            out.append(x.split("=", 1)[1])
    return out


def main(argv=None) -> int:
    a = parse(argv)
    with cli.input_errors():
        if not (ROOT / (a.module.replace(".", "/") + ".py")).is_file():
            raise ConfigError(f"stage module {a.module!r} is not a script of this clone: give a module of {ROOT}, "
                              "e.g. -m sft.02_train")
        stage = a.stage or a.module.split(".")[0]
        recipe = a.recipe or (script_option(a.args, "--recipe") or [None])[-1]
        if a.executor == "local" and a.nproc < 1:
            raise ConfigError(f"--nproc={a.nproc} must be >= 1")
        if a.executor == "slurm":
            if recipe is None:
                raise ConfigError(f"no recipe: pass --recipe NAME to {a.module} (or to the launcher); its cluster: "
                                  "section says where to run")
            cfg = load_recipe(stage, recipe, script_option(a.args, "--set") + a.overrides)
            cl = from_recipe(cfg, f"recipe {stage}/recipes/{recipe}")
        elif a.dry_run:
            raise ConfigError("--dry-run renders a Slurm job: use it with --executor slurm")
    from launch import nemo  # NeMo-Run (.venv-launch) is imported only after the cheap checks

    if a.executor == "slurm":
        executor = nemo.slurm_executor(cl)
    else:
        # torchrun and the stage run in the project's .venv, not in the launcher's
        os.environ["PATH"] = f"{ROOT / '.venv' / 'bin'}{os.pathsep}{os.environ.get('PATH', '')}"
        executor = nemo.local_executor(a.nproc, env={"PYTHONPATH": str(ROOT)})
    name = stage  # the job is "posttrain-<stage>" (executor prefix)
    if a.dry_run:
        submit, text = nemo.dry_run(name, executor, a.module, a.args)
        if a.sbatch_out:
            a.sbatch_out.parent.mkdir(parents=True, exist_ok=True)
            a.sbatch_out.write_text(text)
        print(f"# dry run: nothing submitted. Submit command: {submit}\n{text}")
        return 0
    rc, msg = nemo.run_and_wait(name, executor, a.module, a.args, detach=a.detach)
    print(("launch: " if rc == 0 else "error: launch: ") + msg, file=sys.stderr if rc else sys.stdout)
    return rc


if __name__ == "__main__":
    sys.exit(main())
