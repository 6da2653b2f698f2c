"""Weight sync Megatron -> vLLM, in place: the policy's weights as an HF safetensors directory, then reload.

One process (TP=PP=EP=1): the full state dict goes through model/hf_mapping.to_hf straight into safetensors.
Several processes: the shards are saved as a torch_dist checkpoint and converted in a fresh single process
(model/to_hf.py; Megatron reshards on load), exactly as a stage publishes hf/. The directory lives in
/dev/shm when it exists (tmpfs: no disk round trip). The engine reloads it without restarting
(model/vllm_engine.Engine.reload_weights, which also fixes vLLM-CPU's MoE prepack on reload).
In memory (`in_memory`, rollout.weight_sync: memory; one process only): the HF tensors are copied into shared-memory
buffers (kept across steps) and handed to the engine process over its pipe, which passes handles, not bytes; the
engine runs the same in-place reload from them (Engine.load_weights). No safetensors are written or parsed.
"""
from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import torch


def sync_dir(key: str | None = None) -> Path:
    """A tmpfs directory for synced weights; with `key` (the run directory) a resumed run reuses it after kill -9."""
    base = Path("/dev/shm") if Path("/dev/shm").is_dir() and os.access("/dev/shm", os.W_OK) else None
    if key is None:
        return Path(tempfile.mkdtemp(prefix="rl-sync-", dir=base))
    import hashlib

    d = Path(base or tempfile.gettempdir()) / f"rl-sync-{hashlib.sha256(key.encode()).hexdigest()[:16]}"
    d.mkdir(parents=True, exist_ok=True)
    return d


def write_hf(ddp, mcfg, out_dir: Path, tokenizer_dir: Path, dtype: str = "float32") -> int:
    """Write the policy's weights as an HF directory (rank 0 writes; all ranks call). Returns bytes written."""
    from model import checkpoint, hf_io, hf_mapping, parallel

    out_dir = Path(out_dir)
    if parallel.world_size() == 1:
        tensors = hf_mapping.to_hf(checkpoint.full_state_dict(ddp), mcfg)
        if out_dir.exists():
            shutil.rmtree(out_dir)
        hf_io.save_hf(out_dir, tensors, mcfg, tokenizer_dir, getattr(torch, dtype))
    else:
        import json

        from model.to_hf import convert_in_subprocess

        stage = out_dir.with_name(out_dir.name + ".mcore")
        if parallel.is_rank0() and stage.exists():
            shutil.rmtree(stage)
        checkpoint.save_model_only(ddp, stage)
        if parallel.is_rank0():
            (stage / "model_config.json").write_text(json.dumps(mcfg.to_dict()))
            if out_dir.exists():
                shutil.rmtree(out_dir)
            convert_in_subprocess(stage, stage / "model_config.json", out_dir, tokenizer_dir, dtype)
            shutil.rmtree(stage)
        torch.distributed.barrier()
    return sum(p.stat().st_size for p in out_dir.glob("*.safetensors")) if parallel.is_rank0() else 0


_SHARED: dict[str, torch.Tensor] = {}  # HF name -> shared-memory buffer, reused by every in-memory sync


def shared_hf_tensors(ddp, mcfg) -> list[tuple[str, torch.Tensor]]:
    """The policy's HF tensors copied into shared-memory buffers (one process: TP=PP=EP=1)."""
    from model import checkpoint, hf_mapping

    out = []
    for name, t in hf_mapping.to_hf(checkpoint.full_state_dict(ddp), mcfg).items():
        buf = _SHARED.get(name)
        if buf is None or buf.shape != t.shape or buf.dtype != t.dtype:
            buf = _SHARED[name] = torch.empty_like(t, memory_format=torch.contiguous_format).share_memory_()
        buf.copy_(t)
        out.append((name, buf))
    return out


def sync(ddp, mcfg, engine, out_dir: Path, tokenizer_dir: Path, in_memory: bool = False) -> dict:
    """HF write + in-place reload (engine only on rank 0), or with `in_memory` (one process) the tensors handed to the
    engine in shared memory. Timings: export_s (the HF write or the copy into shared memory; the key
    results/reference/ holds), reload_s; bytes; sync_path."""
    from model import parallel

    if in_memory and parallel.world_size() == 1:
        t0 = time.perf_counter()
        tensors = shared_hf_tensors(ddp, mcfg)
        t1 = time.perf_counter()
        reload_s = engine.load_weights(tensors) if engine is not None else 0.0
        return {"export_s": t1 - t0, "reload_s": reload_s, "sync_s": time.perf_counter() - t0,
                "sync_bytes": sum(t.numel() * t.element_size() for _, t in tensors), "sync_path": "memory"}
    t0 = time.perf_counter()
    nbytes = write_hf(ddp, mcfg, out_dir, tokenizer_dir)
    t1 = time.perf_counter()
    reload_s = engine.reload_weights(out_dir) if (engine is not None and parallel.is_rank0()) else 0.0
    return {"export_s": t1 - t0, "reload_s": reload_s, "sync_s": time.perf_counter() - t0, "sync_bytes": nbytes,
            "sync_path": "files"}
