"""The recipe's `cluster:` section (where and how a stage runs on a Slurm cluster), checked on its own.

It lives in model/ because every training stage's recipe schema holds it (model/sections.py) and model/ imports no
stage; the launcher (launch/cluster.py) adds the check against the recipe's parallel sizes. Pure Python, so it is
validated the same way from .venv and from .venv-launch. Schema and example: launch/README.md, launch/cluster.py.
"""
from __future__ import annotations

import dataclasses
import os
import re
from dataclasses import dataclass, field
from typing import Any

from model.config import ConfigError

LAUNCHERS = ("torchrun", "none")
_TIME = re.compile(r"^(\d+-)?\d{1,3}:\d{2}:\d{2}$")


@dataclass
class ClusterConfig:
    nodes: int  # nodes in the job
    gpus_per_node: int  # GPUs per node; torchrun starts this many processes per node
    container_image: str  # pyxis/enroot container image with the project's GPU environment
    account: str  # Slurm account (sbatch --account); default $SBATCH_ACCOUNT
    partition: str | None = None  # Slurm partition (sbatch --partition); default $SBATCH_PARTITION
    time: str = "01:00:00"  # wall-clock limit [D-]HH:MM:SS
    launcher: str = "torchrun"  # torchrun | none (one process per node, e.g. vLLM with its own TP)
    mounts: list[str] = field(default_factory=list)  # extra container mounts "src:dst"
    env: dict[str, str] = field(default_factory=dict)  # environment variables of the job
    setup: list[str] = field(default_factory=list)  # shell lines run in the sbatch script before srun
    job_dir: str | None = None  # NeMo-Run job folders on the cluster filesystem
    host: str | None = None  # ssh host to submit from elsewhere (needs user); None = submit locally
    user: str | None = None  # ssh user
    remote_root: str | None = None  # path of this clone on the cluster (default: the local path)
    qos: str | None = None  # sbatch --qos
    exclusive: bool | None = None  # sbatch --exclusive
    mem: str | None = None  # sbatch --mem (e.g. "0" = all of the node)
    cpus_per_task: int | None = None  # sbatch --cpus-per-task
    gpu: str | None = None  # GPU model, read by `make plan` (model/plan.py), not by the launcher
    mfu: float | None = None  # assumed MFU, read by `make plan`

    @classmethod
    def from_dict(cls, d: Any, where: str = "cluster") -> "ClusterConfig":
        if not isinstance(d, dict):
            raise ConfigError(f"{where}: must be a mapping of cluster settings (see launch/README.md)")
        known = [f.name for f in dataclasses.fields(cls)]
        unknown = sorted(set(d) - set(known))
        if unknown:
            raise ConfigError(f"{where}: unknown keys {unknown}: valid keys are {known}")
        d = dict(d)
        # account and partition belong to the user and site more than to the recipe: Slurm's own variables
        for key, var in (("account", "SBATCH_ACCOUNT"), ("partition", "SBATCH_PARTITION")):
            if d.get(key) in (None, "") and os.environ.get(var):
                d[key] = os.environ[var]
        missing = [k for k in ("nodes", "gpus_per_node", "container_image", "account") if d.get(k) in (None, "")]
        if missing:
            raise ConfigError(f"{where}: missing {missing}: set them in the recipe's cluster: section or with "
                              f"--set cluster.KEY=VALUE (account: or export SBATCH_ACCOUNT); see launch/README.md")
        if d.get("mem") is not None:
            d["mem"] = str(d["mem"])
        if d.get("time") is not None:
            d["time"] = str(d["time"])
        cfg = cls(**d)
        cfg.validate(where)
        return cfg

    def validate(self, where: str = "cluster") -> None:
        for name in ("nodes", "gpus_per_node"):
            v = getattr(self, name)
            if not isinstance(v, int) or isinstance(v, bool) or v < 0:
                raise ConfigError(f"{where}.{name}={v!r} must be a non-negative integer")
        if self.nodes < 1:
            raise ConfigError(f"{where}.nodes={self.nodes} must be >= 1")
        if self.launcher not in LAUNCHERS:
            raise ConfigError(f"{where}.launcher={self.launcher!r} is unknown: use one of {list(LAUNCHERS)}")
        if self.launcher == "torchrun" and self.gpus_per_node < 1:
            raise ConfigError(f"{where}.gpus_per_node={self.gpus_per_node}: torchrun needs >= 1 GPU per node "
                              "(use launcher: none for CPU-only jobs)")
        if not _TIME.match(self.time):
            raise ConfigError(f"{where}.time={self.time!r} is not [D-]HH:MM:SS (quote it in YAML: \"04:00:00\")")
        for m in self.mounts:
            if not isinstance(m, str) or m.count(":") not in (1, 2):
                raise ConfigError(f"{where}.mounts entry {m!r} is not 'src:dst' or 'src:dst:flags'")
        if not isinstance(self.env, dict):
            raise ConfigError(f"{where}.env must be a mapping NAME: value")
        if (self.host is None) != (self.user is None):
            raise ConfigError(f"{where}: host and user go together (ssh submission); set both or neither")

    @property
    def world_size(self) -> int:
        return self.nodes * (self.gpus_per_node if self.launcher == "torchrun" else 1)
