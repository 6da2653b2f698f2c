"""Helper run by test_grouped_experts.py (plain python): GroupedSequentialMLP vs Megatron's SequentialMLP, as JSON.

    python _run_grouped_experts.py --out diffs.json

Builds the tiny MoE model in float64, float32 and bfloat16, runs the first layer's experts on the same rows, counts
and probs through GroupedSequentialMLP.forward (and in float32 also through its padded path, `float32_padded`) and
through SequentialMLP.forward, backpropagates the same output gradient,
and writes per dtype the largest differences of outputs, input gradients and weight gradients, the group sizes the
grouped GEMMs were given, and the row counts the expert modules were called with (none on the grouped path).
"""
from __future__ import annotations

import json
from pathlib import Path

import torch
from megatron.core.transformer.moe.experts import SequentialMLP

from model import parallel
from model.build import build_model
from model.layers import GroupedSequentialMLP
from model.tests._run_layout import start_tiny

COUNTS = [0, 1, 63, 64, 65, 130, 7, 200]  # none, one, below/at/above the alignment, several blocks


def run(experts, forward, x, counts, probs, grad, rows: list, groups: list):
    """(output, grad of x, grads of the weights); `rows` collects the row count each expert module was called with,
    `groups` the group sizes of every torch._grouped_mm call."""
    hooks = [e.register_forward_pre_hook(lambda m, args: rows.append(args[0].shape[0])) for e in experts.local_experts]
    grouped_mm = torch._grouped_mm

    def spy(a, b, offs=None, **kw):
        groups.append(torch.diff(offs, prepend=offs.new_zeros(1)).tolist())
        return grouped_mm(a, b, offs=offs, **kw)

    torch._grouped_mm = spy
    try:
        experts.zero_grad(set_to_none=True)
        x = x.detach().clone().requires_grad_(True)
        out, _ = forward(experts, x, counts, probs)
        out.backward(grad)
    finally:
        torch._grouped_mm = grouped_mm
        for h in hooks:
            h.remove()
    return out.detach(), x.grad, {n: p.grad.clone() for n, p in experts.named_parameters()}


def padded(experts, x, counts, probs):
    return experts.grouped_forward(x, counts.tolist(), probs, GroupedSequentialMLP.ALIGN)


def compare(dtype: torch.dtype, cfg, par, forward=GroupedSequentialMLP.forward) -> dict:
    experts = build_model(cfg, par, dtype).decoder.layers[0].mlp.experts
    assert isinstance(experts, GroupedSequentialMLP), type(experts)
    g = torch.Generator().manual_seed(0)
    n = sum(COUNTS)
    x = torch.randn(n, cfg.hidden_size, generator=g).to(dtype)
    probs = torch.rand(n, generator=g)  # float32, as the router gives them (moe_router_dtype fp32)
    grad = torch.randn(n, cfg.hidden_size, generator=g).to(dtype)
    counts = torch.tensor(COUNTS)
    rows, groups, ref_rows = [], [], []
    a = run(experts, forward, x, counts, probs, grad, rows, groups)
    b = run(experts, SequentialMLP.forward, x, counts, probs, grad, ref_rows, [])
    scale = max(b[0].abs().max().item(), 1e-30)
    return {"out_max_abs": (a[0] - b[0]).abs().max().item(), "out_scale": scale,
            "x_grad_max_abs": (a[1] - b[1]).abs().max().item(),
            "x_grad_scale": max(b[1].abs().max().item(), 1e-30),
            "w_grad_max_abs": max((a[2][k] - b[2][k]).abs().max().item() for k in b[2]),
            "w_grad_scale": max(v.abs().max().item() for v in b[2].values()), "params": sorted(b[2]),
            "expert_module_rows": rows, "reference_expert_module_rows": ref_rows, "groups": groups}


def main() -> None:
    a, cfg, par = start_tiny(True)
    out = {str(dt).replace("torch.", ""): compare(dt, cfg, par)
           for dt in (torch.float64, torch.float32, torch.bfloat16)}
    out["float32_padded"] = compare(torch.float32, cfg, par, padded)
    Path(a.out).write_text(json.dumps(out))
    parallel.destroy()


if __name__ == "__main__":
    main()
