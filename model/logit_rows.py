"""The output layer at the positions whose loss counts, not at every position.

RL's loss covers the completion tokens, about 5% of a step's packed positions; the vocabulary projection and cross
entropy of every other position are thrown away. `select(model, loss_mask)` puts a forward pre-hook on the GPT model's
output layer (once) and hands it the micro batch's rows: the hook keeps those rows of the [s, b, h] hidden states as
an [n, 1, h] batch, so the logits come out as [1, n, v] in the order of `tensor[rows]`, and the caller selects its
labels with the same rows (rl/policy.py). SFT and pre-training use it with `train.loss_rows_only` (model/train.py),
on in the real base's SFT recipe: its loss covers ~9% of the positions, and its 576 x 49,152 output layer is a fifth
of the step's matmul FLOPs (9 steps: 11.3 s a step against 12.8). The tiny default's recipe leaves it off: its loss
covers 15% of the positions, and a bf16 SFT step took 1.00 s with it against 1.01 s without (medians of 10 steps
each, alternating), because the bf16 output GEMM is a small part of a step dominated by small MoE operations.

The rows are the loss positions plus the first other positions up to a multiple of ALIGN, so the output GEMM keeps a
few shapes (oneDNN reuses a primitive per shape; the same reason as layers.GroupedSequentialMLP). Each selected row's
logits are those of the full computation up to the GEMM's summation order. No selection (None) where the rank has no
output layer (an earlier pipeline stage), under sequence parallelism (the hidden states are split along the
sequence) or multi-token prediction, and when every position counts.
"""
from __future__ import annotations

import torch

ALIGN = 64


def _output_layer(model):
    m = model
    while hasattr(m, "module"):  # DDP -> Float16Module -> GPTModel
        m = m.module
    layer = getattr(m, "output_layer", None)
    cfg = getattr(m, "config", None)
    if layer is None or cfg is None or cfg.sequence_parallel or getattr(cfg, "mtp_num_layers", None):
        return None
    return layer


def _hook(module, args):
    rows, module._logit_rows = module._logit_rows, None
    if rows is None:
        return None
    rows = rows.to(args[0].device)
    return (args[0].transpose(0, 1)[rows].unsqueeze(1),) + args[1:]  # [s, b, h] -> [n, 1, h], batch-major


def rows_for(loss_mask: torch.Tensor, align: int = ALIGN) -> torch.Tensor:
    """[b, s] bool: the positions where loss_mask > 0, plus the first others up to a multiple of `align`."""
    rows = loss_mask > 0
    n = int(rows.sum())
    want = min(rows.numel(), -(-max(n, 1) // align) * align)
    if want > n:
        flat = rows.flatten()
        flat[(~flat).nonzero()[:want - n, 0]] = True
        rows = flat.view_as(rows)
    return rows


def select(model, loss_mask: torch.Tensor) -> torch.Tensor | None:
    """The rows (rows_for) the next forward of `model` computes logits at, or None where it computes them all."""
    layer = _output_layer(model)
    if layer is None:
        return None
    rows = rows_for(loss_mask)
    if bool(rows.all()):
        return None
    if not getattr(layer, "_logit_rows_hooked", False):
        layer.register_forward_pre_hook(_hook)
        layer._logit_rows_hooked = True
    layer._logit_rows = rows  # moved to the hidden states' device by the hook: a tied output layer has no weight
    return layer._logit_rows
