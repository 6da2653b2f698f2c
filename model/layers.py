"""Local (non-TransformerEngine) modules plugged into Megatron-Core's layer spec.

- `RMSNorm`: torch's RMSNorm that also works under sequence parallel (its weight is tagged
  `sequence_parallel`, so Megatron all-reduces its grads over the TP group), with a backward of its own
  (_RMSNormFn): torch 2.13's CPU backward runs the decomposition. Forward and backward of a [3264, 256] fp32
  norm (an RL update's micro batch) 3.8 ms against 6.7; the tiny bf16 SFT step 0.80-0.84 s against 0.89-0.92, the
  fp32 RL update 1.16-1.24 s against 1.27-1.33 (two runs each, alternating).
- `SDPAttention`: core attention on torch's scaled_dot_product_attention (fused kernels on CPU and
  GPU, native GQA) with either the causal mask or an explicit [b, 1, s, s] mask in Megatron's
  convention (True = masked out), which SFT and RL packing use for document-aware attention
  (model/masks.py). A document-causal mask runs as causal calls over the documents grouped by length
  (model/masks.segments): the dense mask would make the kernel compute all s^2 pairs of every row.
  Causal calls shorter than FP32_BELOW positions that autograd records in a 16-bit dtype on the CPU run in float32
  (`_sdpa`): torch 2.13's CPU flash backward in bfloat16 is 2-7x slower than its float32 one on short sequences.
  With `train.cpu_attention: gemm` those calls, of any length, run as GEMMs instead (model/attention.py), and so do
  document-causal masks that segments() leaves whole (the softmax masks other documents' keys).
- `GroupedSequentialMLP`: Megatron's SequentialMLP whose experts run on the CPU as one grouped GEMM per linear,
  each expert's rows padded to a multiple of 64 in every dtype but float32 (bf16 in practice), so oneDNN reuses
  its GEMM primitives across steps.
With `train.fuse_elementwise` (the TransformerConfig's `fuse_elementwise`, set by model/build.py) the norms and the
experts' activation run compiled (model/fused.py).
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from megatron.core.transformer.module import MegatronModule
from megatron.core.transformer.moe.experts import SequentialMLP

from model import attention, fused, masks


class _RMSNormFn(torch.autograd.Function):
    """y = x * rsqrt(mean(x^2) + eps) * w in float32 (what torch's rms_norm computes for bf16 too), with a backward
    of a few passes: torch 2.13's rms_norm backward on the CPU goes through its decomposition (pow, mean, mul...).
    It keeps the normalised input in float32 for the backward: for bf16 inputs one float32 copy per norm, twice the
    activation memory of keeping x, for one pass less."""

    @staticmethod
    def forward(ctx, x, weight, eps: float):
        xf = x.float()
        rstd = torch.rsqrt(xf.pow(2).mean(-1, keepdim=True).add_(eps))
        xhat = xf * rstd
        ctx.save_for_backward(xhat, rstd, weight)
        return (xhat * weight.float()).to(x.dtype)

    @staticmethod
    def backward(ctx, grad):
        xhat, rstd, weight = ctx.saved_tensors
        g = grad.float()
        grad_w = (g * xhat).sum(tuple(range(g.dim() - 1))).to(weight.dtype)
        gy = g * weight.float()
        grad_x = (gy - xhat * (gy * xhat).mean(-1, keepdim=True)).mul_(rstd)
        return grad_x.to(grad.dtype), grad_w, None


class _FastRMSNorm(torch.nn.RMSNorm):
    def __init__(self, config, hidden_size: int, eps: float = 1e-6, **_unused):
        super().__init__(normalized_shape=hidden_size, eps=eps, device="cpu" if config.use_cpu_initialization else None,
                         dtype=config.params_dtype)
        # train.fuse_elementwise: the compiled norm (model/fused.py) instead of _RMSNormFn
        self.fused = getattr(config, "fuse_elementwise", False)

    def forward(self, x):
        if self.fused:
            return fused.rms_norm(x, self.weight, self.eps)
        return _RMSNormFn.apply(x, self.weight, self.eps)


class RMSNorm(_FastRMSNorm):
    def __init__(self, config, hidden_size: int, eps: float = 1e-6, **_unused):
        super().__init__(config, hidden_size, eps)
        if config.sequence_parallel:
            self.weight.sequence_parallel = True


class QKRMSNorm(_FastRMSNorm):
    """Per-head q/k norm (Qwen3): grads are summed over TP by Megatron (matched by name)."""


# Causal calls shorter than this (positions per sequence) run in float32 when autograd records them in a 16-bit dtype
# on the CPU. Forward + backward of one causal call over 2,048 positions, 4 query / 2 key-value heads of 64, 2 Xeon
# cores (AMX), bf16 against bf16 inputs cast to float32: 128 x 16 positions 33.4 -> 6.4 ms, 32 x 64 17.8 -> 5.7,
# 16 x 128 17.4 -> 8.9, 8 x 256 13.3 -> 16.2, 2 x 1024 21.8 -> 30.4 (9 / 3 heads: 68 -> 9, 39 -> 14, 40 -> 22,
# 31 -> 30, 46 -> 70). The backward is what differs (n=12 L=80: 21.6 against 4.4 ms; forwards 1.1 and 1.5 ms), so
# calls without autograd stay in their dtype. On the real base's packed SFT batches (documents grouped by length)
# one layer's attention took 38 -> 20 ms per micro batch with the cut at 256 (192: 21.6, 384: 21.1).
FP32_BELOW = 256


def _sdpa(q, k, v, causal: bool, scale: float, dropout: float, mask=None, gemm: bool = False):
    """scaled_dot_product_attention in [b, heads, s, dim]. Causal calls that autograd records in a 16-bit dtype on the
    CPU run as GEMMs with `gemm` (model/attention.py), else in float32 when shorter than FP32_BELOW; the output comes
    back in the inputs' dtype."""
    dt = q.dtype
    trained = mask is None and _trained(q, k, v)
    if trained and gemm and causal and not dropout:
        return attention.causal(q, k, v, scale)
    up = trained and q.shape[2] < FP32_BELOW
    if up:
        q, k, v = q.float(), k.float(), v.float()
    out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, is_causal=causal, scale=scale, dropout_p=dropout,
                                         enable_gqa=q.shape[1] != k.shape[1])
    return out.to(dt) if up else out


def _trained(q, k, v) -> bool:
    """A 16-bit CPU call that autograd records: the calls that FP32_BELOW and train.cpu_attention=gemm are for."""
    return (q.dtype in (torch.bfloat16, torch.float16) and q.device.type == "cpu" and torch.is_grad_enabled()
            and (q.requires_grad or k.requires_grad or v.requires_grad))


class SDPAttention(MegatronModule):
    def __init__(self, config, layer_number: int, attn_mask_type, attention_type: str,
                 attention_dropout: float | None = None, softmax_scale: float | None = None,
                 cp_comm_type: str | None = None, pg_collection=None):
        super().__init__(config=config)
        if config.context_parallel_size != 1:
            raise ValueError("SDPAttention has no context parallelism: use the TransformerEngine spec for CP > 1")
        self.attn_mask_type = attn_mask_type
        self.dropout = config.attention_dropout if attention_dropout is None else attention_dropout
        self.scale = softmax_scale if softmax_scale is not None else 1.0 / math.sqrt(config.kv_channels)
        self.gemm = getattr(config, "cpu_attention", "flash") == "gemm"  # train.cpu_attention (model/attention.py)

    def forward(self, query, key, value, attention_mask, attn_mask_type=None, attention_bias=None,
                packed_seq_params=None):
        if packed_seq_params is not None or attention_bias is not None:
            raise ValueError("SDPAttention takes an explicit attention_mask, not packed_seq_params/attention_bias")
        seg = masks.segments(attention_mask) if attention_mask is not None else None
        if seg is not None:
            return self._by_document(query, key, value, seg)
        # Megatron layout [s, b, heads, dim] -> SDPA layout [b, heads, s, dim]
        q, k, v = (t.permute(1, 2, 0, 3) for t in (query, key, value))
        docs = None
        if self.gemm and attention_mask is not None and not (self.training and self.dropout) and _trained(q, k, v):
            docs = masks.doc_ids(attention_mask)  # document-causal rows that grouping left: GEMMs over whole rows
        if docs is not None:
            out = attention.causal(q, k, v, self.scale, docs=docs)
        else:
            mask, causal = (None, q.shape[2] > 1) if attention_mask is None else (~attention_mask, False)
            out = _sdpa(q, k, v, causal, self.scale, self.dropout if self.training else 0.0, mask, self.gemm)
        s, b = query.shape[0], query.shape[1]
        return out.permute(2, 0, 1, 3).reshape(s, b, -1)

    def _by_document(self, query, key, value, seg: masks.Segments):
        """Each group of documents as one padded causal call; outputs back to the packed positions."""
        s, b = query.shape[0], query.shape[1]
        q, k, v = (_Gather.apply(t.reshape(s * b, -1), seg.slots, seg.inverse, False) for t in (query, key, value))
        outs, at = [], 0
        for n, L in seg.shapes:
            qg, kg, vg = (t[at:at + n * L].view(n, L, x.shape[2], x.shape[3]).transpose(1, 2)
                          for t, x in ((q, query), (k, key), (v, value)))
            o = _sdpa(qg, kg, vg, L > 1, self.scale, self.dropout if self.training else 0.0, gemm=self.gemm)
            outs.append(o.transpose(1, 2).reshape(n * L, -1))
            at += n * L
        out = torch.cat(outs) if len(outs) > 1 else outs[0]
        return _Gather.apply(out, seg.inverse, seg.real_or_n, True).view(s, b, -1)


GROUPED_DTYPES = (torch.float32, torch.bfloat16, torch.float16)  # what torch._grouped_mm takes on the CPU


class GroupedSequentialMLP(SequentialMLP):
    """Megatron's SequentialMLP (same parameters, names and checkpoints) whose experts run on the CPU as one grouped
    GEMM per linear (torch._grouped_mm over the experts' stacked weights) instead of a Python loop over expert
    modules: the tiny model's step is thousands of small operations, and the loop runs ~10 of them per expert and
    layer, twice (forward and backward). Layer 0's experts on 2,048 routed rows, forward and backward: bf16 17.3 ms
    against 26.5 for the padded loop, fp32 21.1 against 28.0; the bf16 SFT step ~1,630 -> 1,740-1,970 tok/s, the
    fp32 RL update 1.55-1.74 s -> 1.38-1.45 s (two runs each, alternating, identical losses). The math is
    SequentialMLP's gated MLP: fc1, silu(gate) * up, times the token's prob, cast back to the input dtype, fc2.
    In 16-bit dtypes (bf16 in practice) each expert's rows are padded with zero rows (zero probs) to a multiple of
    ALIGN: oneDNN creates a GEMM primitive for every new shape (~2 ms each, measured for 256x512 bf16), and an
    expert's row count changes every step (unpadded, the grouped bf16 forward and backward above took 23.5 ms on
    average against 17.7). Zero rows add nothing to the real rows' outputs nor to the weight gradients (grad_W =
    grad_Y^T X). fp32 (MKL, no per-shape set-up) runs unpadded. GPUs, float64 (which torch._grouped_mm lacks),
    biases, other activations and probs applied on the input take SequentialMLP's own loop."""

    ALIGN = 64

    def _grouped(self) -> bool:
        c, e = self.config, self.local_experts[0]
        return (c.gated_linear_unit and c.activation_func is F.silu and not c.moe_apply_probs_on_input
                and c.activation_func_clamp_value is None and c.glu_linear_offset == 0
                and e.linear_fc1.bias is None and e.linear_fc2.bias is None and not (c.fp8 or c.fp4))

    def forward(self, permuted_local_hidden_states, tokens_per_expert, permuted_probs):
        x = permuted_local_hidden_states
        if x.device.type != "cpu" or x.dtype not in GROUPED_DTYPES or not self._grouped():
            return super().forward(x, tokens_per_expert, permuted_probs)
        return self.grouped_forward(x, tokens_per_expert.tolist(), permuted_probs,
                                    1 if x.dtype == torch.float32 else self.ALIGN)

    def grouped_forward(self, x, counts: list[int], probs, align: int):
        """The experts on rows `x` grouped by expert (`counts` rows each), every group padded to a multiple of
        `align` rows."""
        sizes = [n + (-n % align) for n in counts]
        pos = None
        if sizes != counts:  # slot of every real row in the padded layout: its row + the padding of earlier experts
            shift = torch.tensor([a - b for a, b in zip(_starts(sizes), _starts(counts))])
            pos = torch.arange(x.shape[0]) + shift.repeat_interleave(torch.tensor(counts), output_size=x.shape[0])
            x = x.new_zeros(sum(sizes), x.shape[1]).index_copy(0, pos, x)
            probs = probs.new_zeros(sum(sizes)).index_copy(0, pos, probs)
        offs = torch.tensor(sizes, dtype=torch.int32).cumsum(0, dtype=torch.int32)
        w1 = torch.stack([e.linear_fc1.weight for e in self.local_experts]).transpose(1, 2)
        w2 = torch.stack([e.linear_fc2.weight for e in self.local_experts]).transpose(1, 2)
        act = fused.swiglu_probs if getattr(self.config, "fuse_elementwise", False) else fused.swiglu_probs_eager
        h = act(torch._grouped_mm(x, w1, offs=offs), probs)
        out = torch._grouped_mm(h, w2, offs=offs)
        return (out if pos is None else out.index_select(0, pos)), None


def _starts(sizes: list[int]) -> list[int]:
    out, at = [], 0
    for n in sizes:
        out.append(at)
        at += n
    return out


class _Gather(torch.autograd.Function):
    """rows = x[index], whose backward is a gather too, grad_x = grad_rows[back], because every row of x that gets a
    gradient is read by exactly one output row that gets one: `back` names that row. The positions -> slots gather
    has back = the inverse (a padding slot also reads its document's last position, but its gradient is zero); the
    slots -> positions gather has back = each slot's position, or with `pad` a zero row past the end for padding
    slots, whose outputs are never read. index_select's own backward would scatter-add into a zeroed tensor
    instead: 65 ms of the tiny RL update's ~950 ms, profiled."""

    @staticmethod
    def forward(ctx, x, index, back, pad: bool):
        ctx.back, ctx.pad = back, pad
        return x.index_select(0, index)

    @staticmethod
    def backward(ctx, grad):
        if ctx.pad:
            grad = torch.cat([grad, grad.new_zeros(1, *grad.shape[1:])])
        return grad.index_select(0, ctx.back), None, None, None
