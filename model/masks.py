"""Attention masks for packed sequences, in Megatron's convention (True = masked out): SFT packs conversations and
RL packs trajectories into rows, and each token must see only its own document (model/layers.SDPAttention)."""
from __future__ import annotations

import torch


def doc_causal_mask(doc_ids: torch.Tensor) -> torch.Tensor:
    """[s] or [b, s] document ids -> [b, 1, s, s] bool, True where attention is NOT allowed: each position sees the
    earlier positions of its own document only."""
    d = doc_ids if doc_ids.dim() == 2 else doc_ids.unsqueeze(0)
    s = d.shape[-1]
    same = d.unsqueeze(-1) == d.unsqueeze(-2)
    causal = torch.ones(s, s, dtype=torch.bool, device=d.device).tril()
    return ~(same & causal).unsqueeze(1)
