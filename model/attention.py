"""Causal attention of 16-bit training on the CPU as batched GEMMs around compiled softmaxes (`train.cpu_attention:
gemm`; model/layers.SDPAttention calls `causal()` where it would call the CPU flash kernel with autograd on).

Why: torch 2.13's CPU flash attention in bfloat16 runs at 60-100 GFLOP/s on these shapes, where a bf16 GEMM of them
reaches 300-430 (2 threads). In make bench-train (AMD EPYC, bf16, compiled pieces) attention was 34% of the tiny MoE's
step (0.207 of 0.612 s) and 30% of the 135M's (1.25 of 4.11 s). Here the scores, the probabilities' products and all
four gradients are bmm calls on the GEMM kernels; the softmax with its causal mask and the backward's
P * (dP - rowsum(dO * O)) are one compiled loop each (model/fused.py's Inductor; eager they are ~10 passes and
slower than the flash kernel). Long sequences are cut into query blocks that skip the keys after the block (causal).
One layer forward + backward, bf16, 2 threads, AMD EPYC (Zen 4): the tiny MoE's 4 x 512 positions (4/2 heads of 64)
12-14 ms against flash's 25-27; the 135M's 1 x 1,024 (9/3 heads) 24-32 ms against 41; 32 documents of 128 positions
17-19 ms against 47-64 (flash in float32, model/layers.FP32_BELOW) and 62-71 (bf16). make bench-train (tiny MoE,
bf16, compiled pieces, alternating runs in one noisy hour): 0.549-0.585 s a step against 0.674-0.764 s, MFU 34-37%
against 27-30%; alone in a quiet minute 0.498 s, 39.9%.

Precision is that of Megatron-Core's own unfused DotProductAttention in bf16: the scores QK^T and dP = dO V^T are
rounded to bf16 before the softmax in float32 (the flash kernel keeps them in float32), P is kept in bf16. Measured
against float64 on bf16 inputs (model/tests/test_attention.py bounds it): output 4e-3 relative (flash 2.4e-3) with
scores of std 1, 1.4e-2 (flash 2.2e-3) with std 4; the gradients 2e-3 to 2.5e-2 (flash 4e-3 to 1.4e-2).

Packed rows (SFT's and RL's document-causal masks) pass each row's document ids: the softmax masks the keys of other
documents too, and a query block reads the keys from its queries' earliest document start on. model/layers runs
them so where model/masks.segments does not group the documents (rows under MIN_ROW, long documents). The tiny SFT
recipe's 4 x 512 packs, 8 layers forward + backward, bf16, AMD EPYC: 142-160 ms against the dense mask's flash call
254-258 ms; its step 2,583 -> 2,989 tok/s (30 steps each, losses within 0.01). Where segments() groups (the 135M's
4 x 1,024 packs), grouping stays: 40 ms a layer against 50 for whole rows.

GQA: query head i reads key/value head i // (heads / kv heads), as scaled_dot_product_attention's enable_gqa, so
the queries of one key/value head are one GEMM's rows. No dropout: callers keep the flash kernel for dropout > 0.
"""
from __future__ import annotations

import functools

import torch

BLOCK = 128  # query rows per block: each block reads only the keys up to its last query (64-192 measured: 128 best)


def _probs(scores, scale: float, first: int, heads: int, qdoc=None, kdoc=None):
    """softmax over keys of scores [g, n * heads, keys] (row = position * heads + head, position = first + row //
    heads, counted from the first key; key j is visible to positions >= j), in float32 from bf16 scores, returned in
    the scores' dtype. With qdoc [g, n] and kdoc [g, keys], the document ids of the block's positions and of the keys,
    a key is visible only to the queries of its own document; every query sees itself, so no row is all -inf."""
    i = torch.arange(scores.shape[1], device=scores.device).div(heads, rounding_mode="floor")
    j = torch.arange(scores.shape[2], device=scores.device).unsqueeze(0)
    seen = j <= i.add(first).unsqueeze(1)
    if qdoc is not None:
        seen = seen & (qdoc[:, i].unsqueeze(2) == kdoc.unsqueeze(1))
    x = torch.where(seen, scores.float() * scale, float("-inf"))
    return torch.softmax(x, -1).to(scores.dtype)


def _dscores(p, dp, do, o, scale: float):
    """dS = P * (dP - rowsum(dO * O)) * scale, in float32, returned in P's dtype."""
    delta = (do.float() * o.float()).sum(-1, keepdim=True)
    return (p.float() * (dp.float() - delta) * scale).to(p.dtype)


@functools.cache
def _compiled(fn):
    return torch.compile(fn, dynamic=True)  # one graph for every (groups, rows, keys): documents vary in length


def _grouped(x, hk: int):
    """[b, h, s, d] -> [b * hk, s * r, d] contiguous (r = h / hk), row = position * r + head: the queries of one
    key/value head as one GEMM's rows, so that a block of positions is a contiguous slice."""
    b, h, s, d = x.shape
    return x.reshape(b, hk, h // hk, s, d).transpose(2, 3).reshape(b * hk, s * (h // hk), d)


class _Causal(torch.autograd.Function):
    """Causal attention of q [b, h, s, d] over k, v [b, hk, s, d] in query blocks of `block` positions; with docs
    [b, s] (contiguous runs of document ids per row) a query sees only the keys of its own document, and each block
    reads only the keys from the earliest start of its queries' documents."""

    @staticmethod
    def forward(ctx, q, k, v, scale: float, block: int, docs):
        b, h, s, d = q.shape
        hk = k.shape[1]
        r = h // hk
        qg = _grouped(q, hk)
        kg, vg = k.reshape(b * hk, s, d), v.reshape(b * hk, s, d)
        dg = None if docs is None else docs.repeat_interleave(hk, 0)  # [b * hk, s]: the GEMMs' batch order
        spans = _spans(docs, s, block)
        o = torch.empty_like(qg)
        ps = []
        for f, t, lo in spans:
            sc = torch.bmm(qg[:, f * r:t * r], kg[:, lo:t].transpose(1, 2))
            p = _compiled(_probs)(sc, scale, f - lo, r, *(() if dg is None else (dg[:, f:t], dg[:, lo:t])))
            torch.bmm(p, vg[:, lo:t], out=o[:, f * r:t * r])
            ps.append(p)
        ctx.save_for_backward(qg, kg, vg, o, *ps)
        ctx.scale, ctx.spans, ctx.shape = scale, spans, (b, h, s, d, hk)
        return o.view(b, hk, s, r, d).transpose(2, 3).reshape(b, h, s, d)

    @staticmethod
    def backward(ctx, do):
        qg, kg, vg, o, *ps = ctx.saved_tensors
        b, h, s, d, hk = ctx.shape
        r = h // hk
        dog = _grouped(do, hk)
        dq = torch.empty_like(qg)
        one = len(ps) == 1 and ctx.spans[0][2] == 0
        dk = None if one else torch.zeros(kg.shape, dtype=torch.float32, device=kg.device)  # blocks add up in fp32
        dv = None if one else torch.zeros_like(dk)
        for p, (f, t, lo) in zip(ps, ctx.spans):
            rows = slice(f * r, t * r)
            ds = _compiled(_dscores)(p, torch.bmm(dog[:, rows], vg[:, lo:t].transpose(1, 2)), dog[:, rows],
                                     o[:, rows], ctx.scale)
            torch.bmm(ds, kg[:, lo:t], out=dq[:, rows])
            gk, gv = torch.bmm(ds.transpose(1, 2), qg[:, rows]), torch.bmm(p.transpose(1, 2), dog[:, rows])
            if one:
                dk, dv = gk, gv
            else:
                dk[:, lo:t] += gk
                dv[:, lo:t] += gv
        dq = dq.view(b, hk, s, r, d).transpose(2, 3).reshape(b, h, s, d)
        return dq, dk.to(kg.dtype).view(b, hk, s, d), dv.to(vg.dtype).view(b, hk, s, d), None, None, None


def _spans(docs, s: int, block: int) -> list[tuple[int, int, int]]:
    """(first query, end, first key) of each query block: causal, the keys end with the block; with docs they start
    at the earliest document start among the block's queries (over the batch), as no query sees an earlier key."""
    blocks = [(f, min(s, f + block)) for f in range(0, s, block)]
    if docs is None:
        return [(f, t, 0) for f, t in blocks]
    new = torch.ones_like(docs, dtype=torch.bool)
    new[:, 1:] = docs[:, 1:] != docs[:, :-1]
    pos = torch.arange(s, device=docs.device).expand_as(docs)
    start = torch.where(new, pos, 0).cummax(1).values  # each position's document start
    lows = start[:, [f for f, _ in blocks]].amin(0).tolist()
    return [(f, t, lo) for (f, t), lo in zip(blocks, lows)]


def causal(q, k, v, scale: float, block: int = BLOCK, docs=None):
    """Causal attention of q [b, h, s, d] over k, v [b, hk, s, d] (hk divides h), in q's dtype; with docs [b, s]
    (each row's document ids in contiguous runs, as packing makes them) document-causal: a query sees the earlier
    keys of its own document only."""
    return _Causal.apply(q, k, v, scale, block, docs)
