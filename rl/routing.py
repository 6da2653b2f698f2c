"""Routing replay for MoE policies: the trainer's forward routes each token to the experts the rollout engine used.

The engine records, per token and MoE layer, the k experts it routed to (model/vllm_routing.py, rollout.
record_routing); each trainer sample carries them as `routing` [seq, layers, k] (-1 where the engine computed
nothing: padding, text after the last turn). Megatron-Core's TopKRouter takes a `router_replay` object whose
get_replay_topk wraps its top-k; `install` gives every router of the policy one of ours, which
- always computes the trainer's own top-k and counts the tokens whose expert set differs from the engine's in any
  layer (`routing_differ_frac` in the step metrics: the engine/trainer routing mismatch), and
- with `replay` on, uses the engine's experts instead wherever the engine recorded them (the router's scores are
  gathered at those experts, so the gate weights and the router's gradient stay the trainer's own).
Megatron flattens a micro batch [s, b] to s * b router rows (sequence-major); a tensor-parallel rank with sequence
parallelism sees its contiguous share of those rows.
"""
from __future__ import annotations

import torch


class LayerReplay:
    """One MoE layer's hook (Megatron's RouterReplay interface: get_replay_topk)."""

    def __init__(self, ctl: "Replay", layer: int):
        self.ctl, self.layer = ctl, layer

    def get_replay_topk(self, scores, topk, num_groups=None, group_topk=None, default_compute_topk=None):
        probs, idx = default_compute_topk(scores, topk, num_groups=num_groups, group_topk=group_topk)
        target = self.ctl.target(self.layer, scores.shape[0])
        if target is None:
            return probs, idx
        valid = target[:, 0] >= 0
        differ = (torch.sort(idx, -1).values != torch.sort(target.to(idx.dtype), -1).values).any(-1) & valid
        self.ctl.mark(differ, valid)
        if not self.ctl.replay:
            return probs, idx
        use = torch.where(valid.unsqueeze(-1), target.to(idx.dtype), idx)
        return scores.gather(1, use), use


class Replay:
    """The policy's router hooks and the current micro batch's engine routing."""

    def __init__(self, model, replay: bool):
        from megatron.core.transformer.moe.router import TopKRouter

        self.replay = replay
        self.routers = [m for m in model.modules() if isinstance(m, TopKRouter)]
        if not self.routers:
            raise ValueError("routing replay needs a mixture-of-experts policy (model.num_experts > 0)")
        for r in self.routers:
            r.router_replay = LayerReplay(self, r.layer_number - 1)  # global layer index (pipeline stages too)
        self._routing = None
        self._differ = self._valid = None

    def set_batch(self, routing: torch.Tensor | None) -> None:
        """This micro batch's engine routing [b, s, layers, k] (None: the trainer routes alone)."""
        self._routing = None if routing is None else routing.transpose(0, 1).contiguous()  # [s, b, L, k]
        self._differ = self._valid = None

    def target(self, layer: int, rows: int) -> torch.Tensor | None:
        if self._routing is None:
            return None
        flat = self._routing[:, :, layer].reshape(-1, self._routing.shape[-1])
        if rows != flat.shape[0]:  # sequence parallel: this rank's contiguous share of the sequence
            from megatron.core import parallel_state as ps

            rank = ps.get_tensor_model_parallel_rank()
            flat = flat[rank * rows:(rank + 1) * rows]
        return flat

    def mark(self, differ: torch.Tensor, valid: torch.Tensor) -> None:
        self._differ = differ if self._differ is None else self._differ | differ
        self._valid = valid if self._valid is None else self._valid | valid

    def stats(self) -> dict[str, torch.Tensor]:
        """Tokens of this micro batch with engine routing, and those whose experts differ in any layer."""
        if self._valid is None:
            return {}
        return {"routing_tokens_sum": self._valid.sum().float(), "routing_differ_sum": self._differ.sum().float()}
