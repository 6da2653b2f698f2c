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


def pack(examples: list[dict], length: int, pad_id: int) -> tuple[list[dict], dict]:
    """Greedy packing in the given order; an example longer than `length` is dropped (counted)."""
    packs, cur, dropped = [], None, 0

    def new():
        return {"input_ids": [], "labels": [], "loss_mask": [], "doc_ids": []}

    for ex in examples:
        n = len(ex["input_ids"])
        if n > length:
            dropped += 1
            continue
        if cur is None or len(cur["input_ids"]) + n > length:
            if cur is not None:
                packs.append(cur)
            cur = new()
        doc = len(set(cur["doc_ids"]))
        for k in ("input_ids", "labels", "loss_mask"):
            cur[k] += ex[k]
        cur["doc_ids"] += [doc] * n
    if cur is not None and cur["input_ids"]:
        packs.append(cur)
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
