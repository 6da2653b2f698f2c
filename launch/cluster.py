"""The recipe's `cluster:` section: where and how a stage runs on a Slurm cluster.

The section's dataclass is model/cluster.py's ClusterConfig (model/ holds it: every training recipe's schema
includes it, and model/ imports no stage); here it is checked against the recipe's parallel sizes. Pure Python,
so it is validated the same way from .venv and from .venv-launch. Example (`sft/recipes/<name>_h200x8.yaml`):

    cluster:
      nodes: 2                      # nodes in the job
      gpus_per_node: 8              # GPUs per node = torchrun processes per node
      container_image: nvcr.io/nvidia/nemo:25.07   # pyxis/enroot image with the GPU environment
      account: my_account           # or export SBATCH_ACCOUNT (site-specific, so usually not in the recipe)
      partition: batch              # or export SBATCH_PARTITION
      time: "04:00:00"              # wall-clock limit, [D-]HH:MM:SS
      # optional
      gpu: h200                     # for `make plan` (memory per GPU, step time), as is mfu: 0.3
      launcher: torchrun            # torchrun (one process per GPU) | none (one process per node: vLLM eval)
      mounts: [/lustre/datasets:/datasets]   # extra container mounts; the clone is always mounted at its path
      env: {HF_HOME: /lustre/hf}    # environment of the job
      setup: ["module load pmix"]   # shell lines in the sbatch script before srun
      job_dir: /lustre/me/nemo_run_jobs      # NeMo-Run job folders (default: <clone>/.nemo_run/jobs)
      host: login.example.org       # submit over ssh (with user); omit when running make on a login node
      user: me
      remote_root: /lustre/me/posttrain      # the clone's path on the cluster (default: this clone's path)
      qos: normal
      exclusive: true
      mem: 0
      cpus_per_task: 16
"""
from __future__ import annotations

from model.cluster import LAUNCHERS, ClusterConfig  # noqa: F401 - re-exported for the launcher and its tests
from model.config import ConfigError, ModelConfig, ParallelConfig


def from_recipe(cfg: dict, where: str) -> ClusterConfig:
    """The cluster section of a loaded recipe, checked against the recipe's parallel sizes."""
    if "cluster" not in cfg:
        raise ConfigError(f"{where} has no cluster: section: add one (schema in launch/README.md) "
                          "or run locally (EXECUTOR=local)")
    cl = ClusterConfig.from_dict(cfg["cluster"], f"{where}: cluster")
    par = cfg.get("parallel")
    if cl.launcher == "torchrun" and isinstance(par, dict):
        pc = ParallelConfig.from_dict(par)
        try:
            if isinstance(cfg.get("model"), dict):  # the training run's own cross-field rules
                seq = cfg.get("train", {}).get("seq_length")
                pc.validate(ModelConfig.from_dict(cfg["model"]), cl.world_size, seq)
            else:  # the rules that need only the world size (the model comes from the parent checkpoint)
                pc.num_microbatches(cl.world_size)
                if (cl.world_size // pc.pp) % (pc.expert_tp * pc.ep):
                    raise ConfigError(f"ETP*EP={pc.expert_tp}*{pc.ep} does not divide the {cl.world_size // pc.pp} "
                                      "ranks of a pipeline stage")
        except ConfigError as e:
            raise ConfigError(f"{where}: cluster nodes*gpus_per_node={cl.nodes}*{cl.gpus_per_node}={cl.world_size} "
                              f"does not fit the parallel section: {e}") from None
    return cl
