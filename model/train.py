"""The Megatron-Core training step every stage shares: DDP + optimizer + LR schedule + forward/backward.

Data comes as `sample(i) -> {"tokens", "labels", "loss_mask", "position_ids"[, "attention_mask"]}` for
a global sample index i; step s consumes indices [s*GBS, (s+1)*GBS), split over data-parallel ranks
and micro batches, so every layout sees the same global batch and resumes by step number alone.
"""
from __future__ import annotations

import math
import time
from functools import partial
from typing import Callable

import torch

from model import cpu_compat, logit_rows
from model.config import ConfigError, ParallelConfig
from model.sections import OptimConfig  # noqa: F401  (the recipe's optim: section; callers use train.OptimConfig)


def setup(model, optim: OptimConfig, total_steps: int, global_batch_size: int, seed: int = 0):
    """Wrap in Megatron DDP and build the Megatron optimizer and LR/WD scheduler. `seed` (train.seed) seeds the
    stochastic rounding of bf16 weights when `optim.bf16_rounding` asks for it (model/rounding.py)."""
    from megatron.core.distributed import DistributedDataParallel, DistributedDataParallelConfig, finalize_model_grads
    from megatron.core.optimizer import OptimizerConfig, get_megatron_optimizer
    from megatron.core.optimizer_param_scheduler import OptimizerParamScheduler

    if optim.warmup_steps >= max(total_steps, 1):
        raise ConfigError(f"optim.warmup_steps={optim.warmup_steps} must be < train steps={total_steps}")
    tc = model.config
    ddp = DistributedDataParallel(
        tc, DistributedDataParallelConfig(grad_reduce_in_fp32=True, overlap_grad_reduce=False,
                                          use_distributed_optimizer=optim.use_distributed_optimizer),
        module=model)
    tc.finalize_model_grads_func = finalize_model_grads  # DP all-reduce, SP/qk-norm and embedding grads
    tc.no_sync_func = ddp.no_sync
    ocfg = OptimizerConfig(optimizer="adam", lr=optim.lr, min_lr=optim.min_lr, weight_decay=optim.weight_decay,
                           adam_beta1=optim.beta1, adam_beta2=optim.beta2, clip_grad=optim.clip_grad,
                           bf16=tc.bf16, params_dtype=tc.params_dtype,
                           use_distributed_optimizer=optim.use_distributed_optimizer)
    optimizer = get_megatron_optimizer(ocfg, [ddp])
    fuse_cpu_adam(optimizer)
    scale = global_batch_size  # the scheduler counts samples, as Megatron's trainer does
    scheduler = OptimizerParamScheduler(
        optimizer, init_lr=0.0, max_lr=optim.lr, min_lr=optim.min_lr,
        lr_warmup_steps=optim.warmup_steps * scale, lr_decay_steps=max(total_steps, 1) * scale,
        lr_decay_style=optim.decay_style, start_wd=optim.weight_decay, end_wd=optim.weight_decay,
        wd_incr_steps=max(total_steps, 1) * scale, wd_incr_style="constant")
    if optim.bf16_rounding == "stochastic":
        from megatron.core import parallel_state as ps

        from model import rounding

        rounding.install(optimizer, seed, lambda: scheduler.num_steps,  # samples seen: one value per step
                         (ps.get_tensor_model_parallel_rank(), ps.get_pipeline_model_parallel_rank()))
    return ddp, optimizer, scheduler


def fuse_cpu_adam(optimizer) -> int:
    """Switch Megatron's torch AdamW to torch's fused CPU kernel; returns how many optimizers were switched.

    Without TransformerEngine/Apex, Megatron builds torch.optim.AdamW with foreach/fused left at their
    defaults, which on CPU is the single-tensor loop (~8 elementwise passes and Python per parameter; the
    tiny base has 187 parameter tensors). The fused kernel does one pass per tensor: 0.147 -> 0.062 s per
    optimizer step on the tiny base (1 thread). Same update rule; it differs from the loop by rounding only.
    GPU runs use TE/Apex FusedAdam and are left alone.
    """
    n = 0
    for o in getattr(optimizer, "chained_optimizers", [optimizer]):
        inner = getattr(o, "optimizer", None)
        if not isinstance(inner, (torch.optim.Adam, torch.optim.AdamW)):
            continue
        params = [p for g in inner.param_groups for p in g["params"]]
        if not params or any(p.device.type != "cpu" for p in params):
            continue
        for g in [*inner.param_groups, inner.defaults]:
            g["fused"], g["foreach"] = True, False
        n += 1
    return n


def sync_main_params(optimizer) -> None:
    """Refresh the optimizer's fp32 main params from the model's weights; call after filling weights into a model
    whose optimizer `setup` already built (a parent checkpoint, a seeded init), before the first step.

    With bf16 params Megatron's Float16OptimizerWithFloat16Params (and the distributed optimizer) clone fp32 main
    copies of the params when they are built, step those, and copy them back into the model after every step: main
    copies taken from the freshly built model would overwrite the filled-in weights at the first step. A no-op for
    float32 without the distributed optimizer (FP32Optimizer steps the params themselves). Not after `checkpoint.load_step`: the step checkpoint
    restores the main params themselves, in fp32, where a refresh would round them to the bf16 weights.
    """
    optimizer.reload_model_params()


def _loss_func(loss_mask: torch.Tensor, output_tensor: torch.Tensor):
    losses = output_tensor.float()
    mask = loss_mask.float()
    loss = (losses * mask).sum() / mask.sum().clamp(min=1.0)
    return loss, {"lm loss": loss.detach().clone()}  # the schedule divides `loss` in place


def _forward_step(rows_only: bool, data_iterator, model):
    """One micro batch's forward; with `rows_only` the output layer and the loss run at the loss's positions only
    (model/logit_rows.py), their labels and mask selected by the same rows: the same loss and gradients."""
    b = next(data_iterator)
    labels, mask = b["labels"], b["loss_mask"]
    rows = logit_rows.select(model, mask) if rows_only else None
    if rows is not None:  # logits come as [n, 1, v]: the loss is over [1, n]
        labels, mask = labels[rows][None], mask[rows][None]
    with cpu_compat.suspended():  # the forward needs no CUDA rewrite; spares ~4 us per torch call on CPU
        out = model(b["tokens"], b["position_ids"], b.get("attention_mask"), labels=labels)
    return out, partial(_loss_func, mask)


def dp_share(batch_size: int) -> range:
    """This DP rank's sample indices of a batch of `batch_size` (contiguous, equal shares)."""
    from megatron.core import parallel_state as ps

    per_rank = batch_size // ps.get_data_parallel_world_size()
    return range(ps.get_data_parallel_rank() * per_rank, (ps.get_data_parallel_rank() + 1) * per_rank)


def microbatches(sample: Callable[[int], dict], step: int, par: ParallelConfig) -> list[dict]:
    """This DP rank's micro batches of global step `step`."""
    mine = dp_share(par.global_batch_size)
    out = []
    for j in range(0, len(mine), par.micro_batch_size):
        items = [sample(step * par.global_batch_size + mine[j + k]) for k in range(par.micro_batch_size)]
        out.append({k: torch.stack([it[k] for it in items]) for k in items[0]})
    return out


def _last_stage_mean(value: float | None) -> float:
    """Average a value held by the last pipeline stage's ranks, visible on every rank."""
    from megatron.core import parallel_state as ps

    last = ps.is_pipeline_last_stage()
    t = torch.tensor([value if (last and value is not None) else 0.0, 1.0 if last else 0.0], dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return (t[0] / t[1]).item()


def run_batches(ddp, batches: list[dict], seq_length: int, forward_only: bool, rows_only: bool = False) -> float:
    from megatron.core.pipeline_parallel import get_forward_backward_func

    fb = get_forward_backward_func()
    losses = fb(forward_step_func=partial(_forward_step, rows_only), data_iterator=iter(batches), model=[ddp],
                num_microbatches=len(batches), seq_length=seq_length, micro_batch_size=batches[0]["tokens"].shape[0],
                forward_only=forward_only)
    local = None
    if losses:
        local = float(torch.stack([x["lm loss"] for x in losses]).mean())
    return _last_stage_mean(local)


def train_step(ddp, optimizer, scheduler, batches: list[dict], seq_length: int, global_batch_size: int,
               rows_only: bool = False) -> dict:
    ddp.zero_grad_buffer()
    optimizer.zero_grad()
    t0 = time.perf_counter()
    loss = run_batches(ddp, batches, seq_length, forward_only=False, rows_only=rows_only)
    ok, grad_norm, _ = optimizer.step()
    if ok:
        scheduler.step(increment=global_batch_size)
    return {"loss": loss, "grad_norm": float(grad_norm) if grad_norm is not None else math.nan,
            "lr": optimizer.param_groups[0]["lr"], "skipped": not ok, "step_s": time.perf_counter() - t0}


@torch.no_grad()
def eval_loss(ddp, batches: list[dict], seq_length: int, rows_only: bool = False) -> float:
    ddp.eval()
    try:
        return run_batches(ddp, batches, seq_length, forward_only=True, rows_only=rows_only)
    finally:
        ddp.train()


def fmt_time(s: float) -> str:
    s = int(max(s, 0))
    return f"{s // 3600}h{s % 3600 // 60:02d}m{s % 60:02d}s" if s >= 3600 else f"{s // 60}m{s % 60:02d}s"


def log_line(step: int, total: int, m: dict, tokens_per_step: int, elapsed: float, done_steps: int) -> str:
    """The one greppable line rank 0 prints per step."""
    rate = tokens_per_step * done_steps / max(elapsed, 1e-9)
    eta = (total - step) * elapsed / max(done_steps, 1)
    return (f"step {step}/{total} | loss {m['loss']:.5f} | lr {m['lr']:.2e} | grad_norm {m['grad_norm']:.3f} | "
            f"tok/s {rate:.0f} | elapsed {fmt_time(elapsed)} | eta {fmt_time(eta)}")
