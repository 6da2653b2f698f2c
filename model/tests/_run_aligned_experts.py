"""Helper run by test_aligned_experts.py (plain python): AlignedSequentialMLP vs Megatron's SequentialMLP, as JSON.

    python _run_aligned_experts.py --out diffs.json

Builds the tiny MoE model in float64 and bfloat16, runs the first layer's experts on the same rows, counts and
probs through the padded forward and through SequentialMLP.forward, backpropagates the same output gradient, and
writes the largest differences of outputs, input gradients and weight gradients per dtype.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch
from megatron.core.transformer.moe.experts import SequentialMLP

from model import parallel
from model.build import build_model
from model.config import ParallelConfig
from model.layers import AlignedSequentialMLP
from model.tests._run_layout import GBS, MBS, SEQ, tiny_config

COUNTS = [0, 1, 63, 64, 65, 130, 7, 200]  # none, one, below/at/above the alignment, several blocks


def run(experts, forward, x, counts, probs, grad, rows: list | None = None):
    """(output, grad of x, grads of the weights); `rows` collects the row count each expert was called with."""
    hooks = [e.register_forward_pre_hook(lambda m, args: rows.append(args[0].shape[0])) for e in experts.local_experts
             ] if rows is not None else []
    experts.zero_grad(set_to_none=True)
    x = x.detach().clone().requires_grad_(True)
    out, _ = forward(experts, x, counts, probs)
    out.backward(grad)
    for h in hooks:
        h.remove()
    return out.detach(), x.grad, {n: p.grad.clone() for n, p in experts.named_parameters()}


def compare(dtype: torch.dtype, cfg, par) -> dict:
    experts = build_model(cfg, par, dtype).decoder.layers[0].mlp.experts
    assert isinstance(experts, AlignedSequentialMLP), type(experts)
    g = torch.Generator().manual_seed(0)
    n = sum(COUNTS)
    x = torch.randn(n, cfg.hidden_size, generator=g).to(dtype)
    probs = torch.rand(n, generator=g).to(dtype)
    grad = torch.randn(n, cfg.hidden_size, generator=g).to(dtype)
    counts = torch.tensor(COUNTS)
    rows: list[int] = []
    a = run(experts, AlignedSequentialMLP.forward, x, counts, probs, grad, rows)
    b = run(experts, SequentialMLP.forward, x, counts, probs, grad)
    scale = max(b[0].abs().max().item(), 1e-30)
    return {"out_max_abs": (a[0] - b[0]).abs().max().item(), "out_scale": scale,
            "x_grad_max_abs": (a[1] - b[1]).abs().max().item(),
            "w_grad_max_abs": max((a[2][k] - b[2][k]).abs().max().item() for k in b[2]),
            "w_grad_scale": max(v.abs().max().item() for v in b[2].values()), "params": sorted(b[2]), "rows_per_expert": rows}


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    cfg = tiny_config(True)
    par = ParallelConfig(micro_batch_size=MBS, global_batch_size=GBS)
    parallel.init(par, cfg, seed=1, seq_length=SEQ)
    out = {str(dt).replace("torch.", ""): compare(dt, cfg, par) for dt in (torch.float64, torch.bfloat16)}
    Path(a.out).write_text(json.dumps(out))
    parallel.destroy()


if __name__ == "__main__":
    main()
