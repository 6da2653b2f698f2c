"""The policy on Megatron-Core: per-token logprobs (any TP/PP/EP) and the GRPO update step.

Logprobs come from the model's logits divided by the sampling temperature through Megatron's
vocab-parallel cross entropy, so TP-split vocabularies work unchanged. A micro batch returns its summed
token loss scaled by (num_microbatches * DP / global action tokens): after the schedule's division by the
number of micro batches and DDP's average over DP ranks, the gradient is that of
sum(token losses) / (action tokens of the global batch).
"""
from __future__ import annotations

import math
import time
from functools import partial

import torch

from model import logit_rows
from rl import objective

STAT_KEYS = ("tokens", "loss_sum", "clip_frac_sum", "mismatch_abs_sum", "mismatch_kl_sum", "tis_capped_sum",
             "is_masked_sum", "kl_sum", "routing_tokens_sum", "routing_differ_sum")


def token_logprobs(logits: torch.Tensor, labels: torch.Tensor, temperature: float) -> torch.Tensor:
    """[b, s, v/tp] logits, [b, s] labels -> [b, s] log p(label) at `temperature`."""
    from megatron.core.tensor_parallel import vocab_parallel_cross_entropy

    x = (logits.transpose(0, 1).float() / temperature).contiguous()
    return -vocab_parallel_cross_entropy(x, labels.transpose(0, 1).contiguous()).transpose(0, 1)


def _row_logprobs(output: torch.Tensor, labels: torch.Tensor, rows: torch.Tensor | None, temperature: float
                  ) -> torch.Tensor:
    """[b, s] logprobs from the model's output: [b, s, v] logits, or with `rows` (model/logit_rows.py) the [1, n, v]
    logits of those positions, put back in place (0 at the positions not computed, which no loss reads)."""
    if rows is None:
        return token_logprobs(output, labels, temperature)
    lp = token_logprobs(output, labels[rows][None], temperature)[0]
    return torch.zeros(labels.shape, dtype=lp.dtype, device=lp.device).masked_scatter(rows, lp)


def _forward(model, b: dict, replay):
    if replay is not None:  # the engine's experts for this micro batch (rl/routing.py)
        replay.set_batch(b.get("routing"))
    return model(b["tokens"], b["position_ids"], b.get("attention_mask"))  # a mask: packed rows (rl/packing.py)


def _collect_fwd(temperature: float, replay, data_iterator, model):
    b = next(data_iterator)
    rows = logit_rows.select(model, b["loss_mask"])
    logits = _forward(model, b, replay)

    def fn(output):
        return torch.zeros((), requires_grad=False), {
            "logprobs": _row_logprobs(output, b["labels"], rows, temperature).detach()}
    return logits, fn


def _train_fwd(cfg, scale: float, data_iterator, model):
    b = next(data_iterator)
    rows = logit_rows.select(model, b["loss_mask"])
    logits = _forward(model, b, cfg.replay)

    def fn(output):
        new = _row_logprobs(output, b["labels"], rows, cfg.temperature)
        old = b["old_logprobs"] if "old_logprobs" in b else new.detach()
        loss_sum, st = objective.token_loss(
            new, old, b["rollout_logprobs"], b["advantages"], b["loss_mask"], clip_low=cfg.clip_low,
            clip_high=cfg.clip_high, tis_cap=cfg.tis_cap, ref_lp=b.get("ref_logprobs"), kl_coef=cfg.kl_coef,
            mis_low=cfg.mis_low, mis_high=cfg.mis_high, is_level=cfg.is_level, doc_ids=b.get("doc_ids"))
        st["loss_sum"] = loss_sum.detach()
        if cfg.replay is not None:
            st.update(cfg.replay.stats())
        return loss_sum * scale, {k: v.detach().float() for k, v in st.items()}
    return logits, fn


def _schedule(model, fwd, batches: list[dict], seq_length: int, forward_only: bool):
    from megatron.core.pipeline_parallel import get_forward_backward_func

    return get_forward_backward_func()(
        forward_step_func=fwd, data_iterator=iter(batches), model=[model], num_microbatches=len(batches),
        seq_length=seq_length, micro_batch_size=batches[0]["tokens"].shape[0], forward_only=forward_only)


@torch.no_grad()
def logprobs(model, batches: list[dict], seq_length: int, temperature: float, replay=None
             ) -> list[torch.Tensor] | None:
    """[mbs, seq] logprobs per micro batch on the last pipeline stage (None on other stages), at the positions of the
    batch's loss_mask (others may hold 0: model/logit_rows.py); `replay`
    (rl/routing.Replay of `model`): the batches' engine routing is replayed or compared."""
    model.eval()
    try:
        out = _schedule(model, partial(_collect_fwd, temperature, replay), batches, seq_length, forward_only=True)
    finally:
        model.train()
    return [o["logprobs"] for o in out] if out else None


def _global_stats(local: dict[str, float]) -> dict[str, float]:
    """Sum statistics over DP ranks; each (TP, CP) copy of the last stage contributes once."""
    from megatron.core import parallel_state as ps

    owner = ps.is_pipeline_last_stage() and ps.get_tensor_model_parallel_rank() == 0 \
        and ps.get_context_parallel_rank() == 0
    t = torch.tensor([local.get(k, 0.0) if owner else 0.0 for k in STAT_KEYS], dtype=torch.float64)
    torch.distributed.all_reduce(t)
    return dict(zip(STAT_KEYS, t.tolist()))


def count_tokens(batches: list[dict]) -> float:
    """Action tokens of this DP rank's batches, summed over DP ranks (the normaliser of the loss)."""
    from megatron.core import parallel_state as ps

    t = torch.tensor([float(sum(b["loss_mask"].sum() for b in batches))], dtype=torch.float64)
    torch.distributed.all_reduce(t, group=ps.get_data_parallel_group())
    return float(t.item())


def _refuse_non_finite(batches: list[dict], local: dict[str, float]) -> None:
    """Every rank, before the optimizer step: raise (on all ranks alike) if an engine logprob of a trained token or
    this step's loss is not finite. Megatron's float32 optimizer steps on a NaN gradient, which would turn every
    weight into NaN and publish it as the next checkpoint (seen with a broken int8 weight sync)."""
    bad_lp = sum(int((~torch.isfinite(b["rollout_logprobs"]) & b["loss_mask"].bool()).sum()) for b in batches)
    t = torch.tensor([bad_lp, 0 if math.isfinite(local.get("loss_sum", 0.0)) else 1], dtype=torch.float64)
    if torch.distributed.is_initialized():
        torch.distributed.all_reduce(t)
    if t[0]:
        raise RuntimeError(f"the rollout engine gave {int(t[0])} non-finite logprobs of trained tokens: its weights are "
                           f"broken (a failed weight sync?); nothing was applied, the last published checkpoint stands")
    if t[1]:
        raise RuntimeError("the update's loss is not finite (the trainer's logprobs or advantages): nothing was "
                           "applied, the last published checkpoint stands; resume from it with a lower optim.lr")


def update(ddp, optimizer, scheduler, batches: list[dict], seq_length: int, global_batch_size: int, algo, temperature,
           replay=None) -> dict:
    """One optimizer step on this rank's micro batches of one minibatch; `replay` as in logprobs."""
    from megatron.core import parallel_state as ps

    class _C:  # the loss settings the micro batch closure needs
        pass
    cfg = _C()
    cfg.__dict__.update(vars(algo), temperature=temperature, replay=replay)
    total = count_tokens(batches)
    scale = len(batches) * ps.get_data_parallel_world_size() / max(total, 1.0)
    ddp.zero_grad_buffer()
    optimizer.zero_grad()
    t0 = time.perf_counter()
    out = _schedule(ddp, partial(_train_fwd, cfg, scale), batches, seq_length, forward_only=False)
    local = {k: sum(float(o[k]) for o in out) for k in STAT_KEYS if out and k in out[0]} if out else {}
    _refuse_non_finite(batches, local)
    ok, grad_norm, _ = optimizer.step()
    if ok:
        scheduler.step(increment=global_batch_size)
    st = _global_stats(local)
    n = max(st["tokens"], 1.0)
    return {"loss": st["loss_sum"] / n, "action_tokens": st["tokens"], "clip_frac": st["clip_frac_sum"] / n,
            "mismatch_abs": st["mismatch_abs_sum"] / n, "mismatch_kl": st["mismatch_kl_sum"] / n,
            "tis_capped_frac": st["tis_capped_sum"] / n, "is_masked_frac": st["is_masked_sum"] / n,
            "kl_ref": st["kl_sum"] / n,
            **({"routing_differ_frac": st["routing_differ_sum"] / max(st["routing_tokens_sum"], 1.0),
                "routing_tokens": st["routing_tokens_sum"]} if replay is not None else {}),
            "grad_norm": float(grad_norm) if grad_norm is not None else math.nan,
            "lr": optimizer.param_groups[0]["lr"], "skipped": not ok, "update_s": time.perf_counter() - t0}
