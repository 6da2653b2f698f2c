"""Packed rows attend within their documents: SDPAttention runs a document-causal mask as causal calls over the
documents grouped by length (model/masks.segments), and must compute what the dense mask computes."""
from __future__ import annotations

import random
from types import SimpleNamespace

import pytest
import torch
import torch.nn.functional as F

from model import masks


@pytest.fixture
def any_row(monkeypatch):
    """small rows keep the tests fast: let rows of any length take the grouped path"""
    monkeypatch.setattr(masks, "MIN_ROW", 0)


def _doc_ids(rows: int, width: int, lo: int, hi: int, seed: int, pad: int = 0) -> torch.Tensor:
    r, out = random.Random(seed), []
    for _ in range(rows):
        row, d = [], 1
        while len(row) < width - pad:
            row += [d] * min(r.randint(lo, hi), width - pad - len(row))
            d += 1
        out.append(row + [0] * pad)  # 0: the packer's padding, a segment of its own
    return torch.tensor(out)


def _attention():
    from model.layers import SDPAttention

    return SDPAttention(SimpleNamespace(context_parallel_size=1, attention_dropout=0.0, kv_channels=16), 1, None,
                        "self")


def _dense(q, k, v, mask, scale):
    qq, kk, vv = (t.permute(1, 2, 0, 3) for t in (q, k, v))
    out = F.scaled_dot_product_attention(qq, kk, vv, attn_mask=~mask, scale=scale, enable_gqa=True)
    return out.permute(2, 0, 1, 3).reshape(q.shape[0], q.shape[1], -1)


@pytest.mark.parametrize("rows,width,lo,hi,pad", [(3, 200, 5, 40, 7), (2, 128, 1, 30, 0), (1, 64, 3, 3, 1)])
def test_documents_grouped_by_length_give_the_dense_masks_outputs_and_gradients(any_row, rows, width, lo, hi, pad):
    torch.manual_seed(0)
    mask = masks.doc_causal_mask(_doc_ids(rows, width, lo, hi, seed=rows, pad=pad))
    assert masks.segments(mask) is not None  # the grouped path is taken
    attn = _attention()
    q, k, v = (torch.randn(width, rows, h, 16, requires_grad=True) for h in (4, 2, 2))
    ref = _dense(q, k, v, mask, attn.scale)
    got = attn(q, k, v, mask)
    assert got.shape == ref.shape and got.is_contiguous()
    torch.testing.assert_close(got, ref, atol=1e-5, rtol=1e-5)
    w = torch.randn_like(ref)
    for a, b in zip(torch.autograd.grad((ref * w).sum(), (q, k, v)), torch.autograd.grad((got * w).sum(), (q, k, v))):
        torch.testing.assert_close(b, a, atol=1e-5, rtol=1e-5)


def test_each_position_is_computed_once_and_read_back_from_its_own_document(any_row):
    ids = _doc_ids(2, 50, 2, 9, seed=3, pad=4)
    seg = masks.segments(masks.doc_causal_mask(ids))
    b, s = ids.shape
    assert torch.equal(seg.slots[seg.inverse], torch.arange(s * b))  # every (s-major) position has its own slot
    real = seg.real_or_n < s * b  # the slots whose outputs are read: one per position
    assert int(real.sum()) == s * b and torch.equal(seg.real_or_n[real], seg.slots[real])
    doc_sb, at = ids.t().flatten(), 0  # document id per s-major position
    for n, L in seg.shapes:  # a group's row holds one document, padded with its own last position
        rows = seg.slots[at:at + n * L].view(n, L)
        assert all(len(set(doc_sb[row].tolist())) == 1 for row in rows)
        at += n * L
    assert at == len(seg.slots)


def test_rows_shorter_than_min_row_keep_the_dense_call():
    short = masks.doc_causal_mask(_doc_ids(2, masks.MIN_ROW - 1, 5, 40, seed=0))
    long = masks.doc_causal_mask(_doc_ids(2, masks.MIN_ROW, 5, 40, seed=0))
    assert masks.segments(short) is None and masks.segments(long) is not None


@pytest.mark.parametrize("case", ["causal", "one_document_per_row", "not_document_causal", "not_bool",
                                  "long_documents"])
def test_masks_that_are_not_several_documents_per_row_keep_the_dense_call(any_row, case):
    ids = torch.tensor([[1] * 6 + [2] * 6 + [3] * 4])
    mask = masks.doc_causal_mask(ids)
    if case == "causal":
        mask = masks.doc_causal_mask(torch.ones(2, 16, dtype=torch.long))
    elif case == "one_document_per_row":
        mask = masks.doc_causal_mask(torch.tensor([[1] * 16, [2] * 16]))
    elif case == "not_document_causal":
        mask = mask.clone()
        mask[0, 0, 10, 2] = False  # position 10 (document 2) may see position 2 (document 1)
    elif case == "not_bool":
        mask = mask.float()
    elif case == "long_documents":  # the causal pairs exceed a quarter of the dense call's
        mask = masks.doc_causal_mask(torch.tensor([[1] * 12 + [2] * 4, [1] * 8 + [2] * 8]))
    assert masks.segments(mask) is None


def test_a_mask_changed_in_place_is_looked_at_again(any_row):
    mask = masks.doc_causal_mask(torch.tensor([[1] * 4 + [2] * 4 + [3] * 4 + [4] * 4]))
    assert masks.segments(mask) is not None
    mask[0, 0, 10, 2] = False
    assert masks.segments(mask) is None


def _calls(monkeypatch):
    """the dtypes scaled_dot_product_attention sees, per call"""
    from model import layers

    seen, sdpa = [], F.scaled_dot_product_attention
    monkeypatch.setattr(layers.F, "scaled_dot_product_attention",
                        lambda q, *a, **kw: seen.append(q.dtype) or sdpa(q, *a, **kw))
    return seen


@pytest.mark.parametrize("width,grad,dtype,expect", [
    (64, True, torch.bfloat16, torch.float32),     # short, recorded by autograd: the float32 backward
    (256, True, torch.bfloat16, torch.bfloat16),   # at FP32_BELOW: bf16's own kernel is as fast or faster
    (64, False, torch.bfloat16, torch.bfloat16),   # no backward: bf16's forward is the faster one
    (64, True, torch.float32, torch.float32)])
def test_short_causal_calls_with_a_backward_run_in_float32(monkeypatch, width, grad, dtype, expect):
    from model import layers

    assert layers.FP32_BELOW == 256
    seen = _calls(monkeypatch)
    q, k, v = (torch.randn(width, 2, h, 16, dtype=dtype, requires_grad=grad) for h in (4, 2, 2))
    out = _attention()(q, k, v, None)
    assert seen == [expect] and out.dtype == dtype


def test_grouped_documents_in_bf16_compute_the_float32_attention_and_its_gradients(monkeypatch, any_row):
    """short documents' calls run in float32, so bf16 inputs get the float32 attention of the same (bf16) values:
    its outputs and gradients rounded once to bf16, where the bf16 kernel's differ by ~0.3-0.5% (measured)"""
    torch.manual_seed(0)
    mask = masks.doc_causal_mask(_doc_ids(2, 300, 5, 60, seed=1, pad=3))
    seen = _calls(monkeypatch)
    q, k, v = (torch.randn(300, 2, h, 16, dtype=torch.bfloat16, requires_grad=True) for h in (4, 2, 2))
    got = _attention()(q, k, v, mask)
    assert got.dtype == torch.bfloat16 and set(seen) == {torch.float32}
    q32, k32, v32 = (t.detach().float().requires_grad_() for t in (q, k, v))
    ref = _dense(q32, k32, v32, mask, _attention().scale)
    torch.testing.assert_close(got.float(), ref.to(torch.bfloat16).float(), atol=0, rtol=0.01)
    w = torch.randn_like(ref).to(torch.bfloat16)
    for a, b in zip(torch.autograd.grad((ref * w.float()).sum(), (q32, k32, v32)),
                    torch.autograd.grad((got * w).sum(), (q, k, v))):
        assert b.dtype == torch.bfloat16
        assert ((b.float() - a).norm() / a.norm()).item() < 0.01


def test_gemm_attention_runs_a_document_mask_as_document_causal_gemms(monkeypatch):
    """train.cpu_attention=gemm: a bf16 document-causal mask goes to model/attention.causal with the rows' document
    ids (no grouping, no dense mask) and gives the dense mask's outputs and gradients to bf16 rounding"""
    from model import attention

    torch.manual_seed(0)
    ids = _doc_ids(2, 300, 5, 60, seed=1, pad=3)
    mask = masks.doc_causal_mask(ids)
    docs, causal = [], attention.causal
    monkeypatch.setattr(attention, "causal", lambda *a, **kw: docs.append(kw.get("docs")) or causal(*a, **kw))
    seen = _calls(monkeypatch)
    attn = _attention()
    attn.gemm = True
    q, k, v = (torch.randn(300, 2, h, 16, dtype=torch.bfloat16, requires_grad=True) for h in (4, 2, 2))
    got = attn(q, k, v, mask)
    assert seen == [] and len(docs) == 1 and torch.equal(masks.doc_causal_mask(docs[0]), mask)
    q64, k64, v64 = (t.detach().double().requires_grad_() for t in (q, k, v))
    ref = _dense(q64, k64, v64, mask, attn.scale)
    assert ((got.double() - ref).abs().max() / ref.abs().max()).item() < 2e-2
    w = torch.randn_like(ref)
    for a, b in zip(torch.autograd.grad((ref * w).sum(), (q64, k64, v64)),
                    torch.autograd.grad((got * w.to(torch.bfloat16)).sum(), (q, k, v))):
        assert ((b.double() - a).abs().max() / a.abs().max()).item() < 2e-2
