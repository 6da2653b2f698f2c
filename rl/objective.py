"""GRPO-family objective: group-normalized advantages, token-level aggregation, asymmetric clip, k3 KL,
truncated importance sampling for the trainer/rollout logprob mismatch.

Per action token t of a trajectory with advantage A (its group-normalized reward):
    ratio   = exp(logp_new - logp_old)                 (logp_old: trainer, before this update)
    w       = min(exp(logp_old - logp_rollout), cap)   (the engine sampled from logp_rollout; detached)
    loss_t  = -w * min(ratio * A, clip(ratio, 1 - clip_low, 1 + clip_high) * A) + kl_coef * k3(ref, new)
and the step loss is sum_t loss_t / (number of action tokens in the whole global batch): every token weighs
the same whatever the length of its trajectory (DAPO's token-level aggregation).

The engine/trainer importance weight rho = exp(logp_old - logp_rollout) corrects for the rollout engine not being
the trainer (kernels, precision, quantization, stale weights). Three corrections, each a recipe switch (algo.*):
- truncated IS (TIS, `tis_cap`): w = min(rho, cap);
- masked IS (MIS, `mis_low`/`mis_high`): w = rho inside [mis_low, mis_high] (min(rho, cap) with TIS on), and a
  token whose rho leaves the band is dropped from the loss (weight 0; it still counts in the normaliser, like a
  clipped token), so the few tokens the engine and trainer disagree on most carry no gradient at all, where TIS
  keeps them at the cap;
- `is_level: sequence`: rho is the product over the trajectory's action tokens (exp of the summed log-ratio),
  one weight for every token of the trajectory; TIS caps it and MIS masks the whole trajectory.
With neither TIS nor MIS on, w = 1 (no correction). With rho = 1 (engine == trainer) every correction is the
identity.
"""
from __future__ import annotations

import math

import torch


def group_advantages(rewards: list[float | None], n: int, normalize_std: bool, eps: float = 1e-6
                     ) -> tuple[list[float | None], list[bool]]:
    """Advantages per sample (None = excluded: infra error) and whether each group has any signal.

    rewards[i*n:(i+1)*n] is group i; None marks an infra error, left out of the group's mean and std.
    A group with fewer than 2 valid rewards, or all equal, carries no signal (all advantages 0)."""
    adv: list[float | None] = []
    informative = []
    for g in range(0, len(rewards), n):
        rs = rewards[g:g + n]
        valid = [r for r in rs if r is not None]
        if len(valid) < 2 or max(valid) - min(valid) < 1e-9:
            informative.append(False)
            adv += [None if r is None else 0.0 for r in rs]
            continue
        informative.append(True)
        mean = sum(valid) / len(valid)
        std = math.sqrt(sum((r - mean) ** 2 for r in valid) / (len(valid) - 1))
        scale = (std + eps) if normalize_std else 1.0
        adv += [None if r is None else (r - mean) / scale for r in rs]
    return adv, informative


def batch_length(rollouts, seq_length: int, multiple: int = 64) -> int:
    """The padded length of a step's samples: the longest trajectory rounded up, at most seq_length."""
    longest = max((len(r.tokens) - 1 for r in rollouts), default=1)
    return max(1, min(seq_length, -(-longest // multiple) * multiple))


def trim_microbatch(mb: dict, multiple: int = 16) -> dict:
    """Cut a stacked micro batch after its last trained position (rounded up to `multiple`).

    Exact for the policy loss: attention is causal, so no kept position sees a cut one, and every cut position
    has loss_mask 0 (padding, or observation tokens after the last sampled turn). Only the MoE load-balancing
    loss changes: it no longer counts those untrained tokens. A group of similar-length rollouts then costs its
    own length instead of the step's longest (math ~50 tokens beside retrieval ~150); a zero-weight filler
    costs `multiple` positions."""
    seq = mb["loss_mask"].shape[1]
    used = mb["loss_mask"].sum(0).nonzero()
    keep = int(used[-1]) + 1 if len(used) else 1
    keep = min(seq, -(-keep // multiple) * multiple)
    return {k: (v[:, :keep].contiguous() if v.dim() >= 2 and v.shape[1] == seq else v) for k, v in mb.items()}


def build_samples(rollouts, advantages, seq_length: int, pad_id: int, routing: tuple[int, int] | None = None
                  ) -> list[dict]:
    """One trainer sample per rollout: next-token labels, the action mask and per-token tensors, padded.

    Position i predicts tokens[i+1]; loss_mask[i] = 1 when tokens[i+1] was sampled by the policy and the
    rollout is not excluded. Sequences longer than seq_length are cut (their tail is not trained). With
    `routing` = (layers, k) each sample carries the engine's experts per position (-1 where unknown)."""
    out = []
    for r, a in zip(rollouts, advantages):
        toks = r.tokens[:seq_length + 1]
        n = len(toks) - 1
        mask = [float(m) for m in r.action_mask[1:n + 1]] if a is not None else [0.0] * max(n, 0)
        lps = r.rollout_logprobs[1:n + 1]
        pad = seq_length - max(n, 0)
        out.append({
            "tokens": torch.tensor(toks[:-1] + [pad_id] * pad if n > 0 else [pad_id] * seq_length),
            "labels": torch.tensor(toks[1:] + [pad_id] * pad if n > 0 else [pad_id] * seq_length),
            "loss_mask": torch.tensor(mask + [0.0] * pad),
            "advantages": torch.full((seq_length,), float(a or 0.0)),
            "rollout_logprobs": torch.tensor(list(lps) + [0.0] * pad, dtype=torch.float32),
            "position_ids": torch.arange(seq_length),
        })
        if routing is not None:
            out[-1]["routing"] = _routing(getattr(r, "routing", None), seq_length, routing)
    return out


def _routing(rt, seq_length: int, shape: tuple[int, int]) -> torch.Tensor:
    t = torch.full((seq_length, *shape), -1, dtype=torch.int16)
    if rt is not None:
        n = min(len(rt), seq_length)
        t[:n] = torch.from_numpy(rt[:n])
    return t


def empty_sample(seq_length: int, pad_id: int, routing: tuple[int, int] | None = None) -> dict:
    """A zero-weight filler (dynamic sampling found fewer informative groups than the batch holds)."""
    z = torch.zeros(seq_length)
    out = {"tokens": torch.full((seq_length,), pad_id), "labels": torch.full((seq_length,), pad_id),
           "loss_mask": z.clone(), "advantages": z.clone(), "rollout_logprobs": z.clone(),
           "position_ids": torch.arange(seq_length)}
    if routing is not None:
        out["routing"] = _routing(None, seq_length, routing)
    return out


def engine_weights(old_lp: torch.Tensor, rollout_lp: torch.Tensor, mask: torch.Tensor, *, tis_cap: float,
                   mis_low: float = 0.0, mis_high: float = 0.0, is_level: str = "token",
                   doc_ids: torch.Tensor | None = None) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(weight, capped, masked) per token: the engine/trainer importance correction (module docstring).

    Tensors are [b, seq]: each row is one trajectory, or with `doc_ids` (packed rows, rl/packing.py) the
    trajectories numbered there, so the sequence-level log weight is the masked sum over each trajectory.
    capped/masked are 0/1 floats per token."""
    log_rho = (old_lp.detach() - rollout_lp) * mask
    if is_level == "sequence" and doc_ids is None:
        log_rho = log_rho.sum(-1, keepdim=True).expand_as(mask)
    elif is_level == "sequence":
        per_doc = torch.zeros(doc_ids.shape[0], int(doc_ids.max()) + 1, dtype=log_rho.dtype, device=log_rho.device)
        log_rho = per_doc.scatter_add_(1, doc_ids, log_rho).gather(1, doc_ids)
    rho = torch.exp(log_rho)
    masked = ((rho < mis_low) | (rho > mis_high)).float() if mis_high else torch.zeros_like(rho)
    capped = (rho > tis_cap).float() * (1 - masked) if tis_cap else torch.zeros_like(rho)
    w = rho.clamp(max=tis_cap) if tis_cap else rho if mis_high else torch.ones_like(rho)
    return torch.where(masked.bool(), torch.zeros_like(w), w).detach(), capped, masked  # where: inf * 0 is nan


def token_loss(new_lp: torch.Tensor, old_lp: torch.Tensor, rollout_lp: torch.Tensor, adv: torch.Tensor,
               mask: torch.Tensor, *, clip_low: float, clip_high: float, tis_cap: float,
               ref_lp: torch.Tensor | None = None, kl_coef: float = 0.0, mis_low: float = 0.0,
               mis_high: float = 0.0, is_level: str = "token", doc_ids: torch.Tensor | None = None
               ) -> tuple[torch.Tensor, dict]:
    """Summed (not averaged) masked loss and summed statistics; the caller divides by the global token count."""
    mask = mask.float()
    log_ratio = new_lp - old_lp.detach()
    ratio = torch.exp(log_ratio)
    clipped = torch.clamp(ratio, 1.0 - clip_low, 1.0 + clip_high)
    surr = torch.minimum(ratio * adv, clipped * adv)
    w, capped, masked = engine_weights(old_lp, rollout_lp, mask, tis_cap=tis_cap, mis_low=mis_low,
                                       mis_high=mis_high, is_level=is_level, doc_ids=doc_ids)
    per_tok = -w * surr
    stats = {}
    if ref_lp is not None and kl_coef:
        d = ref_lp.detach() - new_lp
        kl = torch.exp(d) - d - 1.0  # k3: unbiased, non-negative estimate of KL(new || ref)
        per_tok = per_tok + kl_coef * kl
        stats["kl_sum"] = (kl.detach() * mask).sum()
    with torch.no_grad():
        diff = (old_lp - rollout_lp) * mask
        stats.update({
            "tokens": mask.sum(),
            "clip_frac_sum": (((ratio < 1 - clip_low) & (adv < 0)) | ((ratio > 1 + clip_high) & (adv > 0))).float()
            .mul(mask).sum(),
            "mismatch_abs_sum": diff.abs().sum(),  # |trainer - engine| logprob of the sampled tokens
            "mismatch_kl_sum": (torch.exp(-diff) - 1 + diff).mul(mask).sum(),  # k3 estimate of KL(engine||trainer)
            "tis_capped_sum": (capped * mask).sum(),  # tokens whose weight (token or sequence) hit the cap
            "is_masked_sum": (masked * mask).sum(),  # tokens MIS dropped
        })
    return (per_tok * mask).sum(), stats
