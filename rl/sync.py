"""Weight sync Megatron -> vLLM, in place: the policy's weights as an HF safetensors directory, then reload.

One process (TP=PP=EP=1): the full state dict goes through model/hf_mapping.to_hf straight into safetensors.
Several processes: the shards are saved as a torch_dist checkpoint and converted in a fresh single process
(model/to_hf.py; Megatron reshards on load), exactly as a stage publishes hf/, and every engine (rl/engines.py)
reloads that one directory. It lives in /dev/shm when it exists (tmpfs: no disk round trip). The engine reloads
without restarting (model/vllm_engine.Engine.reload_weights, which also fixes vLLM-CPU's MoE prepack on reload).
In memory (`in_memory`, rollout.weight_sync: memory; memory_layout: TP=PP=CP=expert-TP=1, any DP and EP): each rank
assembles all HF tensors (hf_tensors: its own, plus the experts of the other EP ranks broadcast over the expert-
parallel group), each engine owner copies them into one shared-memory buffer per dtype (kept across steps) and hands
it to its engine process over the pipe, which passes handles, not bytes; the engine runs the same in-place reload from
them (Engine.load_weights). No safetensors are written or parsed. Trainers split by TP, PP, CP or expert-TP take the
files path: gathering those shards in memory is not built.
"""
from __future__ import annotations

import os
import re
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


def memory_layout(par) -> bool:
    """Whether a rank can assemble all HF tensors without files: no TP, PP, CP or expert-TP split (experts split
    over EP are gathered in memory: hf_tensors)."""
    return par.tp == par.pp == par.cp == par.expert_tp == 1


_EXPERT = re.compile(r"model\.layers\.(\d+)\.mlp\.experts\.(\d+)\.(.+)")


def hf_tensors(ddp, mcfg) -> dict[str, torch.Tensor]:
    """All of the policy's HF tensors on this rank (every rank calls: a collective when experts are split).
    Layout: memory_layout. With EP > 1 each rank maps its local experts to their global numbers and every rank
    of the expert-parallel group broadcasts its experts as one flat buffer to the others (gloo on the CPU, NCCL on
    GPUs), so each engine owner ends with all experts."""
    from megatron.core import parallel_state as ps

    from model import checkpoint, hf_mapping

    local = hf_mapping.to_hf(checkpoint.full_state_dict(ddp), mcfg)
    ep = ps.get_expert_model_parallel_world_size() if mcfg.is_moe else 1
    if ep == 1:
        return local
    per, me = mcfg.num_experts // ep, ps.get_expert_model_parallel_rank()
    out = {k: v for k, v in local.items() if not _EXPERT.fullmatch(k)}
    mine = sorted((k for k in local if _EXPERT.fullmatch(k)), key=lambda k: tuple(
        int(x) if x.isdigit() else x for x in _EXPERT.fullmatch(k).groups()))
    group = ps.get_expert_model_parallel_group()
    ranks = torch.distributed.get_process_group_ranks(group)
    dev = next(ddp.parameters()).device
    for src in range(ep):  # the same key order on every rank: layer, local expert, tensor
        flat = torch.cat([local[k].flatten() for k in mine]).to(dev) if src == me else \
            torch.empty(sum(local[k].numel() for k in mine), dtype=local[mine[0]].dtype, device=dev)
        torch.distributed.broadcast(flat, src=ranks[src], group=group)
        flat, at = flat.cpu(), 0
        for k in mine:
            layer, j, rest = _EXPERT.fullmatch(k).groups()
            n = local[k].numel()
            out[f"model.layers.{layer}.mlp.experts.{src * per + int(j)}.{rest}"] = flat[at:at + n].view_as(local[k])
            at += n
    return out


_SHARED: dict = {}  # "flat": the rollout engine's SharedTensors, reused by every in-memory sync
EVAL_SHARED: dict = {}  # the same for the evaluation engine (rl/01_train.py)


def shared_hf_tensors(ddp, mcfg, quant: dict | None = None, pool: dict | None = None):
    """The policy's HF tensors (hf_tensors), W8A8-quantized with `quant` (model.quantize.quantize_tensors'
    arguments: the int8 rollout engine), copied into the shared-memory buffers of `pool` (default: the rollout
    engine's) as one model.vllm_engine.SharedTensors, which crosses the engine's pipe as one handle per dtype."""
    from model.vllm_engine import SharedTensors

    pool = _SHARED if pool is None else pool
    tensors = hf_tensors(ddp, mcfg)
    if quant:
        from model.quantize import quantize_tensors

        tensors = quantize_tensors(tensors, **quant)[0]
    if "flat" not in pool or not pool["flat"].fits(tensors):
        pool["flat"] = SharedTensors(tensors)
    return pool["flat"].fill(tensors)


def sync(ddp, mcfg, engine, out_dir: Path, tokenizer_dir: Path, in_memory: bool = False, layout_ok: bool = True,
         quant: dict | None = None) -> dict:
    """Every rank calls; `engine` is this rank's (None where it owns none). HF write + in-place reload by every
    engine, or with `in_memory` and `layout_ok` (memory_layout) each owner's tensors handed to its engine in
    shared memory, W8A8-quantized first with `quant` (in memory only). Timings (this rank's): export_s (the HF
    write, or gathering, quantizing and copying into shared memory; the key results/reference/ holds), reload_s;
    bytes; sync_path."""
    if quant and not (in_memory and layout_ok):
        raise ValueError("a quantized rollout engine is synced in memory only (rollout.weight_sync: memory, no TP/PP/CP"
                         " split)")
    if in_memory and layout_ok:
        t0 = time.perf_counter()
        if engine is not None:
            tensors = shared_hf_tensors(ddp, mcfg, quant)
        else:
            hf_tensors(ddp, mcfg)  # this rank's part of the expert exchange
            tensors = None
        t1 = time.perf_counter()
        reload_s = engine.load_weights(tensors) if engine is not None else 0.0
        return {"export_s": t1 - t0, "reload_s": reload_s, "sync_s": time.perf_counter() - t0,
                "sync_bytes": tensors.nbytes if tensors is not None else 0, "sync_path": "memory"}
    t0 = time.perf_counter()
    nbytes = write_hf(ddp, mcfg, out_dir, tokenizer_dir)  # ends with a barrier: every rank sees the directory
    t1 = time.perf_counter()
    reload_s = engine.reload_weights(out_dir) if engine is not None else 0.0
    return {"export_s": t1 - t0, "reload_s": reload_s, "sync_s": time.perf_counter() - t0, "sync_bytes": nbytes,
            "sync_path": "files"}
