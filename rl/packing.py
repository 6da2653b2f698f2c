"""Sequence packing for the RL update (`algo.pack`, pipeline-parallel size 1): a DP rank's trajectories are packed
into rows of train.seq_length, each attending only within its own trajectory (model/masks.doc_causal_mask), so the
update computes no pad positions beyond each micro batch's longest row.

A trajectory keeps its positions up to its last trained token (later positions have loss_mask 0 and, attention
being causal, change nothing before them); one with no trained token (a dynamic-sampling filler, an excluded
rollout) is left out: it adds nothing to the loss or to any statistic. The rows are as few as the tokens allow
and evenly filled (balanced_rows), micro batches hold `micro_batch_size` rows each (the last may hold fewer) and
are cut to their fullest row rounded up to `multiple`: the positions trained are about the tokens trained, in
fewer forward passes than one micro batch per group. Positions in a row run on across its
trajectories: RoPE scores depend only on the distance between two tokens of the same trajectory, as in SFT's
packs. Each micro batch carries `doc_ids` (1.. per trajectory, 0 for padding) for the sequence-level importance
weight, which is then one product per trajectory, not per row. The engine's routing (`routing`, rl/routing.py) rides
along when the samples carry it, -1 (the trainer routes) on padding.
"""
from __future__ import annotations

import torch

from model.masks import doc_causal_mask

FIELDS = ("tokens", "labels", "loss_mask", "advantages", "rollout_logprobs")


def trained_length(sample: dict) -> int:
    """Positions up to and including the last trained one (0: nothing trained)."""
    used = sample["loss_mask"].nonzero()
    return int(used[-1]) + 1 if len(used) else 0


def balanced_rows(lengths: list[int], capacity: int) -> list[list[int]]:
    """Indices of `lengths` in as few rows of at most `capacity` as their total allows, filled evenly: longest
    first, each to the least-filled row (ties by index: deterministic), one more row while any overflows. Even
    rows matter because a micro batch is as wide as its fullest row. Zero lengths are left out."""
    todo = sorted((i for i, n in enumerate(lengths) if n), key=lambda i: (-lengths[i], i))
    n_rows = max(1, -(-sum(lengths) // capacity))
    while True:
        rows: list[list[int]] = [[] for _ in range(n_rows)]
        fill = [0] * n_rows
        for i in todo:
            r = min(range(n_rows), key=lambda r: (fill[r], r))
            rows[r].append(i)
            fill[r] += lengths[i]
        if max(fill) <= capacity:
            return [r for r in rows if r]
        n_rows += 1


def pack(samples: list[dict], seq_length: int, micro_batch_size: int, multiple: int = 16,
         fields: tuple[str, ...] = FIELDS, row_length: int = 0) -> list[dict]:
    """One DP rank's samples (rl/objective.build_samples) -> its packed micro batches (possibly none), with the
    per-position `fields` of the samples; rows hold up to `row_length` positions (0: seq_length), and a longer
    trajectory gets a row of its own."""
    if samples and "routing" in samples[0] and "routing" not in fields:
        fields = (*fields, "routing")
    lengths = [min(trained_length(s), seq_length) for s in samples]
    cap = row_length or seq_length
    rows = []
    for idx in [[i] for i, n in enumerate(lengths) if n > cap] + \
            balanced_rows([n if n <= cap else 0 for n in lengths], cap):
        row = {k: torch.cat([samples[i][k][:lengths[i]] for i in idx]) for k in fields}
        row["doc_ids"] = torch.cat([torch.full((lengths[i],), d + 1) for d, i in enumerate(idx)])
        rows.append(row)
    return [_stack(rows[a:a + micro_batch_size], seq_length, multiple) for a in range(0, len(rows), micro_batch_size)]


def empty_microbatch(multiple: int = 16) -> dict:
    """A micro batch that trains nothing: what a DP rank with fewer rows runs so that every rank runs as many
    forward passes (expert-parallel all-to-alls and DDP's reduction take every rank)."""
    return _stack([{k: torch.zeros(0) for k in (*FIELDS, "doc_ids")}], multiple, multiple)


def _stack(rows: list[dict], seq_length: int, multiple: int) -> dict:
    width = min(seq_length, max(multiple, -(-max(len(r["tokens"]) for r in rows) // multiple) * multiple))
    out = {}
    for k in rows[0]:
        if k == "routing":  # -1: no engine routing (padding)
            t = torch.full((len(rows), width, *rows[0][k].shape[1:]), -1, dtype=rows[0][k].dtype)
        else:
            t = torch.zeros(len(rows), width, dtype=torch.long if k in ("tokens", "labels", "doc_ids") else torch.float32)
        for j, r in enumerate(rows):
            t[j, :len(r[k])] = r[k]
        out[k] = t
    out["position_ids"] = torch.arange(width).expand(len(rows), width).contiguous()
    out["attention_mask"] = doc_causal_mask(out["doc_ids"])
    return out
