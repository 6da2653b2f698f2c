"""Megatron dist checkpoints (torch_dist): model weights, optimizer, scheduler, RNG and data position.

Layout of a training run directory (resumable, kept until the stage publishes its output):
    <run>/step_000040/          a complete step checkpoint (renamed from step_000040.tmp when done)
    <run>/latest                the name of the newest complete step (written after the rename)
A stage output directory holds `mcore/` (model weights only, torch_dist, loadable at any TP/PP/EP),
`hf/` (safetensors export) and manifest.json.
"""
from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import torch

from model.manifest import CheckpointError


def _barrier():
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


def _rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else 0


def unwrap(model):
    while hasattr(model, "module"):
        model = model.module
    return model


def _rng_object(is_loading: bool):
    from megatron.core import tensor_parallel
    from megatron.core.dist_checkpointing.mapping import ShardedObject

    ws = torch.distributed.get_world_size()
    state = None if is_loading else {
        "cpu": torch.get_rng_state(), "tracker": tensor_parallel.get_cuda_rng_tracker().get_states(),
        "cuda": torch.cuda.get_rng_state() if torch.cuda.is_available() else None,
    }
    return ShardedObject("rng_state", state, (ws,), (_rank(),), replica_id=0)


def save_model_only(model, ckpt_dir: Path) -> None:
    """Weights only (what the next stage loads), collectively by all ranks."""
    from megatron.core import dist_checkpointing

    ckpt_dir = Path(ckpt_dir)
    if _rank() == 0:
        ckpt_dir.mkdir(parents=True, exist_ok=True)
    _barrier()
    dist_checkpointing.save({"model": unwrap(model).sharded_state_dict()}, str(ckpt_dir))
    _barrier()


def load_model_only(model, ckpt_dir: Path) -> None:
    from megatron.core import dist_checkpointing

    ckpt_dir = Path(ckpt_dir)
    if not (ckpt_dir / "metadata.json").exists():
        raise CheckpointError(f"{ckpt_dir}: not a Megatron dist checkpoint (no metadata.json); pass a stage's mcore/ dir")
    m = unwrap(model)
    state = dist_checkpointing.load({"model": m.sharded_state_dict()}, str(ckpt_dir))
    m.load_state_dict(state["model"], strict=False)


def save_step(run_dir: Path, step: int, model, optimizer, scheduler, common: dict[str, Any]) -> Path:
    """A complete step checkpoint, published by rename; `latest` is updated after it exists."""
    from megatron.core import dist_checkpointing

    run_dir = Path(run_dir)
    name = f"step_{step:06d}"
    tmp, final = run_dir / f"{name}.tmp", run_dir / name
    if _rank() == 0:
        if tmp.exists():
            shutil.rmtree(tmp)
        tmp.mkdir(parents=True)
    _barrier()
    model_sd = unwrap(model).sharded_state_dict()
    state = {"model": model_sd, "optimizer": optimizer.sharded_state_dict(model_sd),
             "rng_state": _rng_object(False), "scheduler": scheduler.state_dict(), "common": common}
    dist_checkpointing.save(state, str(tmp))
    _barrier()
    if _rank() == 0:
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        latest_tmp = run_dir / "latest.tmp"
        latest_tmp.write_text(name + "\n")
        os.replace(latest_tmp, run_dir / "latest")
    _barrier()
    return final


def latest_step(run_dir: Path) -> Path | None:
    p = Path(run_dir) / "latest"
    if not p.exists():
        return None
    step = Path(run_dir) / p.read_text().strip()
    return step if step.is_dir() else None


def prune_steps(run_dir: Path, keep: int) -> None:
    """Keep the newest `keep` complete steps (rank 0 only)."""
    if _rank() != 0:
        return
    steps = sorted(d for d in Path(run_dir).glob("step_*") if d.is_dir() and not d.name.endswith(".tmp"))
    for d in steps[:-keep]:
        shutil.rmtree(d, ignore_errors=True)


def load_step(step_dir: Path, model, optimizer, scheduler, restore_rng: bool = True) -> dict[str, Any]:
    """Restore everything saved by save_step; returns the common dict (step, data position, ...)."""
    from megatron.core import dist_checkpointing

    m = unwrap(model)
    model_sd = m.sharded_state_dict()
    req = {"model": model_sd, "optimizer": optimizer.sharded_state_dict(model_sd, is_loading=True),
           "rng_state": _rng_object(True), "scheduler": None, "common": None}
    state = dist_checkpointing.load(req, str(step_dir))
    m.load_state_dict(state["model"], strict=False)
    optimizer.load_state_dict(state["optimizer"])
    from model.train import fuse_cpu_adam

    fuse_cpu_adam(optimizer)  # saved param groups carry their own `fused` flag (False in older checkpoints)
    scheduler.load_state_dict(state["scheduler"])
    if restore_rng:
        from megatron.core import tensor_parallel

        rng = state["rng_state"]
        torch.set_rng_state(rng["cpu"])
        tensor_parallel.get_cuda_rng_tracker().set_states(rng["tracker"])
        if rng.get("cuda") is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state(rng["cuda"])
    return state["common"]


def full_state_dict(model) -> dict[str, torch.Tensor]:
    """Parameters of a single-process (TP=PP=EP=1) model, without extra states."""
    return {k: v for k, v in unwrap(model).state_dict().items() if not k.endswith("_extra_state") and v is not None}
