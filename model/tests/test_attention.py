"""`train.cpu_attention: gemm` (model/attention.py): causal attention of bf16 training on the CPU as GEMMs around
compiled softmaxes, in query blocks. Its output and all three gradients must match float64 attention on the same
inputs: to float32 rounding in float32 (where any mistake in the formulas or the blocks shows), to bf16 rounding in
bfloat16, for grouped-query heads, one block and several (a partial last block included). model/tests/test_fused.py
checks it inside the model."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model import attention

# largest |diff| / largest |value| of the output and each gradient
TOL = {torch.float32: 1e-4,  # measured up to 6.5e-7
       torch.bfloat16: 2e-2}  # measured 2.3e-3 to 8.9e-3 (bf16 scores, as Megatron's unfused attention)
SHAPES = [((2, 4, 2, 300, 16), 128),  # 3 blocks, the last one partial
          ((2, 4, 2, 300, 16), 1024),  # one block
          ((5, 6, 3, 37, 16), 128)]  # many short documents, 2 queries per key/value head


def run(fn, shape, dtype):
    b, h, hk, s, d = shape
    g = torch.Generator().manual_seed(0)
    q, k, v = (torch.randn(b, n, s, d, generator=g).to(torch.bfloat16).to(dtype).requires_grad_() for n in (h, hk, hk))
    o = fn(q, k, v)
    o.backward(torch.randn(b, h, s, d, generator=g).to(torch.bfloat16).to(dtype))
    return [o.detach(), q.grad, k.grad, v.grad]


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape,block", SHAPES)
def test_output_and_gradients_match_float64(shape, block, dtype):
    scale = shape[-1] ** -0.5
    ref = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, is_causal=True, scale=scale, enable_gqa=True),
              shape, torch.float64)
    got = run(lambda q, k, v: attention.causal(q, k, v, scale, block), shape, dtype)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, ref):
        assert a.dtype == dtype and a.shape == b.shape, name
        worst = ((a.double() - b).abs().max() / b.abs().max()).item()
        assert worst <= TOL[dtype], (name, worst)


def _docs(rows: int, width: int, lengths: list[int]) -> torch.Tensor:
    """each row cut into documents of the given lengths in turn, starting at a different one per row"""
    out = []
    for r in range(rows):
        row, i = [], r
        while len(row) < width:
            row += [len(row) + 1] * lengths[i % len(lengths)]
            i += 1
        out.append(row[:width])
    return torch.tensor(out)


DOC_SHAPES = [((3, 4, 2, 300, 16), 128, [5, 150, 40, 90]),  # documents across blocks, starting late in some
              ((2, 6, 3, 64, 16), 16, [1, 7, 20])]  # one-token documents, 4 blocks, 2 queries per key/value head


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["float32", "bfloat16"])
@pytest.mark.parametrize("shape,block,lengths", DOC_SHAPES)
def test_document_causal_matches_float64_with_the_document_mask(shape, block, lengths, dtype):
    from model.masks import doc_causal_mask

    docs = _docs(shape[0], shape[3], lengths)
    mask = ~doc_causal_mask(docs)  # True = may attend
    scale = shape[-1] ** -0.5
    ref = run(lambda q, k, v: F.scaled_dot_product_attention(q, k, v, attn_mask=mask, scale=scale, enable_gqa=True),
              shape, torch.float64)
    got = run(lambda q, k, v: attention.causal(q, k, v, scale, block, docs=docs), shape, dtype)
    for name, a, b in zip(("output", "dq", "dk", "dv"), got, ref):
        assert a.dtype == dtype and a.shape == b.shape, name
        worst = ((a.double() - b).abs().max() / b.abs().max()).item()
        assert worst <= TOL[dtype], (name, worst)


def test_a_block_reads_keys_from_its_queries_earliest_document_start():
    docs = torch.tensor([[1] * 100 + [2] * 156, [1] * 120 + [2] * 136])
    assert attention._spans(docs, 256, 128) == [(0, 128, 0), (128, 256, 100)]  # row 0's document 2 begins at 100
    assert attention._spans(None, 256, 128) == [(0, 128, 0), (128, 256, 0)]


def test_unknown_choice_is_a_config_error():
    from model.config import ConfigError
    from model.sections import TrainConfig

    with pytest.raises(ConfigError, match=r"train.cpu_attention='fast': choose flash or gemm"):
        TrainConfig(cpu_attention="fast")


def test_no_compiler_names_this_setting_in_one_line():
    from torch._inductor import config

    from model.build import transformer_config
    from model.config import ConfigError, ModelConfig, ParallelConfig

    cfg = ModelConfig(num_layers=1, vocab_size=64, hidden_size=32, num_attention_heads=2, num_query_groups=1,
                      head_dim=16, ffn_hidden_size=64)
    with config.patch({"cpp.cxx": ("no-such-c++-compiler",)}), pytest.raises(ConfigError) as e:
        transformer_config(cfg, ParallelConfig(), torch.bfloat16, cpu_attention="gemm")
    assert str(e.value).startswith("train.cpu_attention=gemm needs a C++ compiler"), e.value
    assert str(e.value).endswith("or set train.cpu_attention=flash") and "\n" not in str(e.value), e.value
