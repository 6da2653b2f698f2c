"""Chat demonstrations -> token ids with an assistant-only loss mask -> fixed-length packs.

A pack is `input_ids`, `labels`, `loss_mask`, `doc_ids` of one length L. Position p predicts
labels[p] from input_ids[..p] of the SAME document only: `attention_mask()` builds the
document-causal mask (True = masked, Megatron's convention). Positions need no reset: RoPE scores
depend only on the distance between two tokens, and no token sees another document, so a packed
document computes exactly what it computes alone (tests/test_packing.py checks the losses).
"""
from __future__ import annotations

from domains import chat
from model.masks import doc_causal_mask as attention_mask  # noqa: F401 - the packs' mask, shared with RL


def tokenize_conversation(tok, messages: list[dict]) -> tuple[list[int], list[int]]:
    """(token ids, trainable flag per token): assistant bodies and their <|im_end|> are trainable."""
    ids, mask = [], []
    for text, trainable in chat.render_segments(messages):
        t = tok(text, add_special_tokens=False)["input_ids"]
        ids += t
        mask += [int(trainable)] * len(t)
    return ids, mask


def to_example(ids: list[int], mask: list[int]) -> dict:
    """Shift by one: inputs t[:-1] predict labels t[1:], trained where the label token is trainable."""
    return {"input_ids": ids[:-1], "labels": ids[1:], "loss_mask": mask[1:]}


def pack(examples: list[dict], length: int, pad_id: int, strategy: str = "greedy") -> tuple[list[dict], dict]:
    """Examples -> packs of `length`; an example longer than `length` is dropped (counted).

    greedy: in the given order, a new pack when the next example does not fit (order kept, more padding);
    bfd: best-fit decreasing, longest first, each into the fullest pack it fits (ties: the earliest), fewer packs;
    packs keep their examples in insertion order. Both are deterministic functions of the examples."""
    if strategy not in ("greedy", "bfd"):
        raise ValueError(f"packing strategy {strategy!r}: expected greedy or bfd")
    fits = [ex for ex in examples if len(ex["input_ids"]) <= length]
    dropped = len(examples) - len(fits)
    groups: list[list[dict]] = []
    if strategy == "greedy":
        used = length + 1
        for ex in fits:
            if used + len(ex["input_ids"]) > length:
                groups.append([])
                used = 0
            groups[-1].append(ex)
            used += len(ex["input_ids"])
    else:
        import bisect

        free: list[tuple[int, int]] = []  # (free positions, pack index), sorted: the best fit is the first >= n
        for ex in sorted(fits, key=lambda e: -len(e["input_ids"])):  # stable: equal lengths keep their order
            n = len(ex["input_ids"])
            i = bisect.bisect_left(free, (n, -1))
            if i == len(free):
                groups.append([])
                room, k = length, len(groups) - 1
            else:
                room, k = free.pop(i)
            groups[k].append(ex)
            if room - n:
                bisect.insort(free, (room - n, k))
    packs = []
    for g in groups:
        p = {"input_ids": [], "labels": [], "loss_mask": [], "doc_ids": []}
        for doc, ex in enumerate(g):
            for key in ("input_ids", "labels", "loss_mask"):
                p[key] += ex[key]
            p["doc_ids"] += [doc] * len(ex["input_ids"])
        packs.append(p)
    real = sum(len(p["input_ids"]) for p in packs)
    for p in packs:  # pad: each pad position is its own document, so no row of the mask is empty
        n_pad = length - len(p["input_ids"])
        first = max(p["doc_ids"], default=-1) + 1
        p["input_ids"] += [pad_id] * n_pad
        p["labels"] += [pad_id] * n_pad
        p["loss_mask"] += [0] * n_pad
        p["doc_ids"] += list(range(first, first + n_pad))
    stats = {"packs": len(packs), "dropped_too_long": dropped,
             "packing_efficiency": real / max(1, len(packs) * length)}
    return packs, stats
