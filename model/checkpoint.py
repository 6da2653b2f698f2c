"""Megatron dist checkpoints (torch_dist): model weights, optimizer, scheduler, RNG and data position.

Layout of a training run directory (resumable, kept until the stage publishes its output):
    <run>/step_000040/          a complete step checkpoint (renamed from step_000040.tmp when done)
    <run>/latest                the name of the newest complete step (written after the rename)
A stage output directory holds `mcore/` (model weights only, torch_dist, loadable at any TP/PP/EP),
`hf/` (safetensors, converted from mcore/ by model/to_hf.py) and manifest.json.
"""
from __future__ import annotations

import contextlib
import os
import shutil
from pathlib import Path
from typing import Any

import torch

from model.manifest import CheckpointError


def _barrier():
    if torch.distributed.is_initialized():
        torch.distributed.barrier()


@contextlib.contextmanager
def one_torch_thread():
    """Run a dist checkpoint load or save with one torch thread (CPU runs; GPU runs are left alone).

    Measured on 2 CPU cores: after the tiny base was loaded with 2 threads, every later train step of the process ran
    1.6-1.8x slower (0.50 -> 0.83 s; SFT 2,010 -> 1,100 tok/s), elementwise ops most (scatter_add 5.8x, cat 3.3x,
    mul 2.6x, mm 1.4x), and the profile gained kernel task switches where OpenMP's workers had been spinning.
    Loading with one thread, the steps stay at 0.50 s. A load or save is reads, writes and copies."""
    if torch.cuda.is_available():
        yield
        return
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        yield
    finally:
        torch.set_num_threads(n)


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
    with one_torch_thread():
        dist_checkpointing.save({"model": unwrap(model).sharded_state_dict()}, str(ckpt_dir))
    _barrier()
    if _rank() == 0:
        _drop_storage_meta(ckpt_dir)
    _barrier()


def _drop_storage_meta(ckpt_dir: Path) -> None:
    """Make a published torch_dist checkpoint byte-reproducible: torch DCP's `.metadata` records the path it was
    written to (a staging dir named by pid) and a random save uuid, so equal weights hashed differently. The
    reader needs neither (it puts an empty StorageMeta in place of None)."""
    import pickle

    path = Path(ckpt_dir) / ".metadata"
    meta = pickle.loads(path.read_bytes())
    if getattr(meta, "storage_meta", None) is None:
        return
    meta.storage_meta = None
    tmp = path.with_name(".metadata.tmp")
    tmp.write_bytes(pickle.dumps(meta))
    os.replace(tmp, path)


def _keys(keys: set[str]) -> str:
    names = sorted(keys)
    return ", ".join(names[:5]) + (f" (+{len(names) - 5} more)" if len(names) > 5 else "")


def _load_strict(request: dict, ckpt_dir: Path) -> dict:
    """dist_checkpointing.load that refuses any key mismatch, naming the keys.

    Megatron's default (ASSUME_OK_UNEXPECTED) loads only what the model asks for: a checkpoint tensor the
    model has no place for (an untied output layer loaded into a tied model) was dropped without a word.
    In Megatron's terms "missing" = in the checkpoint but not requested, "unexpected" = requested but absent.
    """
    from megatron.core import dist_checkpointing
    from megatron.core.dist_checkpointing.validation import StrictHandling

    try:
        with one_torch_thread():
            state, missing, unexpected = dist_checkpointing.load(request, str(ckpt_dir),
                                                                 strict=StrictHandling.RETURN_ALL)
        missing = {k for k in missing if not k.endswith("_extra_state")}
    except ValueError as e:  # factory merges fail before any key report (e.g. a dense checkpoint into a MoE model)
        from megatron.core.dist_checkpointing.dict_utils import nested_values

        saved = set(dist_checkpointing.load_tensors_metadata(str(ckpt_dir)))
        keys = (getattr(v, "key", None) for v in nested_values(request))
        wanted = {k for k in keys if k and not k.endswith("_extra_state")}
        missing, unexpected = saved - wanted, wanted - saved
        if not (missing or unexpected):
            raise
    if missing or unexpected:
        parts = ([f"this model needs {_keys(unexpected)}, absent from the checkpoint"] if unexpected else []) + \
                ([f"the checkpoint holds {_keys(missing)}, which this model has no place for"] if missing else [])
        raise CheckpointError(f"{ckpt_dir}: checkpoint and model disagree: {'; '.join(parts)}: load it into the "
                              "architecture it was saved from (its stage's model_config.json)")
    return state


def _load_model_state(m, state: dict, ckpt_dir: Path) -> None:
    # The one mismatch allowed: a layer's `_extra_state` (TE/fp8 metadata) that is None in this model, so it
    # carries no weights; anything else, or an extra state that holds something, must match exactly.
    own = m.state_dict()
    r = m.load_state_dict(state, strict=False)
    bad = [k for k in [*r.missing_keys, *r.unexpected_keys] if not (k.endswith("_extra_state") and own.get(k) is None)]
    if bad:
        raise CheckpointError(f"{ckpt_dir}: loaded state and model disagree on {_keys(set(bad))}")


def load_model_only(model, ckpt_dir: Path) -> None:
    ckpt_dir = Path(ckpt_dir)
    if not (ckpt_dir / "metadata.json").exists():
        raise CheckpointError(f"{ckpt_dir}: not a Megatron dist checkpoint (no metadata.json); pass a stage's mcore/ dir")
    m = unwrap(model)
    state = _load_strict({"model": m.sharded_state_dict()}, ckpt_dir)
    _load_model_state(m, state["model"], ckpt_dir)


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
    with one_torch_thread():
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
    m = unwrap(model)
    model_sd = m.sharded_state_dict()
    req = {"model": model_sd, "optimizer": optimizer.sharded_state_dict(model_sd, is_loading=True),
           "rng_state": _rng_object(True), "scheduler": None, "common": None}
    state = _load_strict(req, Path(step_dir))
    _load_model_state(m, state["model"], Path(step_dir))
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
