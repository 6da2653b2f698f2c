"""Attention masks for packed sequences, in Megatron's convention (True = masked out): SFT packs conversations and
RL packs trajectories into rows, and each token must see only its own document (model/layers.SDPAttention).

A dense [b, 1, s, s] mask makes the attention kernel compute every (query, key) pair of a row, s^2 of them, and
the CPU flash kernel then cannot skip the blocks above the diagonal as it does for a causal call. `segments()`
recognises a document-causal mask and gives the index maps to run each document as its own causal sequence
instead: the documents, grouped by length, are gathered into padded batches (one causal call per group), and the
outputs gathered back. Padding slots sit after a document's last token, so causal attention hides them from its
real queries; their outputs are never read.

Measured (one attention layer, forward + backward, 4 query and 2 key/value heads of 64, 2 idle Xeon cores, at
46ad958): rows of 3 x 896 with documents of 40-150 tokens (the tiny RL update's rows) 40.1 -> 16.3 ms, where a
causal call over the whole rows takes 27.6; 2 x 512 with 60-300: 8.6 -> 8.6 ms; 4 x 256 with 20-120: 4.9 -> 5.6 ms,
slower: on short rows the dense call costs about what a causal one does, and the gathers and extra calls cost more
than they save. The tiny SFT recipe's 2 x 512 packs (often one long document and padding) ran 2-3% slower grouped
(1,418 and 1,458 against 1,461 and 1,491 tok/s, 16 steps each, alternating). Hence MIN_ROW, and grouping only where
it cuts the pairs at least 4x. The tiny RL update (profiled, same batch): 1.105 -> 1.005 s.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch


def doc_causal_mask(doc_ids: torch.Tensor) -> torch.Tensor:
    """[s] or [b, s] document ids -> [b, 1, s, s] bool, True where attention is NOT allowed: each position sees the
    earlier positions of its own document only."""
    d = doc_ids if doc_ids.dim() == 2 else doc_ids.unsqueeze(0)
    s = d.shape[-1]
    same = d.unsqueeze(-1) == d.unsqueeze(-2)
    causal = torch.ones(s, s, dtype=torch.bool, device=d.device).tril()
    return ~(same & causal).unsqueeze(1)


@dataclass
class Segments:
    """Index maps of a document-causal mask over the positions of Megatron's [s, b] layout, flattened (s-major) to
    N = s * b. The groups' slots, concatenated, are T = sum of documents x length over the groups."""
    slots: torch.Tensor  # [T]: the position each slot reads (a padding slot repeats its document's last position)
    shapes: list[tuple[int, int]]  # per length group: (documents, length), in slot order
    inverse: torch.Tensor  # [N]: the slot that computes each position
    real_or_n: torch.Tensor  # [T]: slots' positions, N for padding slots (a zero row: their outputs are never read)


MIN_ROW = 768  # shorter rows keep the dense call (measured above), or with train.cpu_attention=gemm the doc_ids()
# of the mask: document-causal GEMMs over whole rows (model/attention.py)
_LAST: list = [None, -1, None]  # (mask, its version, {what of it was asked}): every layer of a forward shares one mask


def _cached(mask: torch.Tensor, key: str, fn):
    if not (_LAST[0] is mask and _LAST[1] == mask._version):
        _LAST[:] = [mask, mask._version, {}]
    if key not in _LAST[2]:
        _LAST[2][key] = fn(mask)
    return _LAST[2][key]


def doc_ids(mask: torch.Tensor) -> torch.Tensor | None:
    """[b, s] document ids (contiguous runs, 1-based per row) of a [b, 1, s, s] mask that is exactly doc_causal_mask
    of some document ids, else None."""
    return _cached(mask, "ids", _doc_ids)


def segments(mask: torch.Tensor) -> Segments | None:
    """The Segments of a [b, 1, s, s] mask that is exactly doc_causal_mask of some document ids, else None; None
    too where grouping would not pay: rows shorter than MIN_ROW, one document per row, or documents so long that
    the groups' causal pairs exceed a quarter of the dense call's."""
    return _cached(mask, "segments", _segments)


def _doc_ids(mask: torch.Tensor) -> torch.Tensor | None:
    if mask.dim() != 4 or mask.shape[1] != 1 or mask.shape[2] != mask.shape[3] or mask.dtype != torch.bool:
        return None
    b, s = mask.shape[0], mask.shape[-1]
    starts = torch.ones(b, s, dtype=torch.long, device=mask.device)
    starts[:, 1:] = mask[:, 0, 1:, :-1].diagonal(dim1=1, dim2=2).long()  # i starts a document: it cannot see i - 1
    ids = starts.cumsum(1)
    return ids if torch.equal(doc_causal_mask(ids), mask) else None


def _segments(mask: torch.Tensor) -> Segments | None:
    if mask.dim() != 4 or mask.shape[-1] < MIN_ROW:
        return None
    ids = doc_ids(mask)
    if ids is None:
        return None
    b, s = ids.shape
    starts = torch.ones_like(ids)
    starts[:, 1:] = (ids[:, 1:] != ids[:, :-1]).long()
    begin = starts.flatten().nonzero().squeeze(1)  # [documents] first position of each (row starts included)
    if len(begin) == b:  # one document per row: the plain causal mask, nothing to save
        return None
    length = torch.diff(begin, append=torch.tensor([b * s], device=mask.device))
    order = torch.argsort(length, descending=True, stable=True)
    lens = length[order].tolist()
    cuts = [0]  # groups order[cuts[g]:cuts[g + 1]]: documents longer than half the group's longest (padding <= 2x)
    while cuts[-1] < len(lens):
        j = cuts[-1]
        while j < len(lens) and 2 * lens[j] > lens[cuts[-1]]:
            j += 1
        cuts.append(j)
    pairs = sum((j - i) * lens[i] * (lens[i] + 1) // 2 for i, j in zip(cuts, cuts[1:]))  # causal, per group
    if 4 * pairs > b * s * s:  # per pair, grouped calls cost ~4x a dense one (3 x 896: 16.3 ms for 231k, 40.1 for 2.4M)
        return None
    groups, reals, shapes, inverse = [], [], [], torch.empty(b * s, dtype=torch.long, device=mask.device)
    done = 0  # slots of the groups before this one
    for i, j in zip(cuts, cuts[1:]):
        docs, L = order[i:j], lens[i]
        off = torch.arange(L, device=mask.device)
        idx = (begin[docs, None] + torch.minimum(off, length[docs, None] - 1)).flatten()  # pad: the last position
        real = (off < length[docs, None]).flatten()
        inverse[idx[real]] = done + real.nonzero().squeeze(1)
        done += len(idx)
        groups.append(idx)
        reals.append(real)
        shapes.append((j - i, L))
    slots = torch.cat(groups)
    slots = (slots % s) * b + slots // s  # row-major [b, s] positions -> Megatron's s-major [s, b] ones
    return Segments(slots, shapes, inverse.view(b, s).t().flatten(), torch.where(torch.cat(reals), slots, b * s))
