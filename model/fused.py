"""Element-wise pieces of the layer compiled with torch.compile (Inductor), for `train.fuse_elementwise: true`.

The tiny model's step is thousands of small operations (make bench-train: 20,234 a step, a third of its time
outside matmuls and attention). In eager mode each RMSNorm is ~6 passes forward and ~10 backward over the
activations, the experts' silu(gate) * up * prob 4 forward and 6 backward, and the loss's cross entropy over the
vocabulary ~8 passes over [tokens, vocab] float32 logits; compiled, each direction is one generated C++ loop over
the rows (a Triton kernel on a GPU). Same formulas as model/layers.py's eager versions, in
the same dtypes (float32 inside the norm), so they differ from them by rounding only (model/tests/test_fused.py).

Measured on the tiny bf16 SFT step (4 x 512 tokens, 2 threads, medians of 12 steps): 0.72 s eager; the norms
compiled 0.66 s, the experts' activation 0.69 s, both 0.62-0.63 s; the cross entropy compiled as well, 0.65-0.67
against 0.68-0.70 s (another hour, alternating). Compiling costs time once per process and
shape (Inductor's cache in /tmp makes later processes faster), so it is a recipe switch, on where a run is long.
On the CPU Inductor needs a C++ compiler; `check()` says so before any work.

The switch also turns on Megatron's own compiled SwiGLU for dense MLPs (its `bias_activation_fusion`, model/build.py):
one layer of the 135M's MLP activation (4 x 1024 rows, bf16, forward + backward) 17.8 ms eager against 11.1, about
0.2 s of its 12 s SFT step. Compiling Megatron's rotary embedding as well did not pay: one layer's queries took 6.6
ms compiled against 6.3 eager.
"""
from __future__ import annotations

import functools

import torch
import torch.nn.functional as F

from model.config import ConfigError


def check(on: str = "train.fuse_elementwise=true", off: str = "train.fuse_elementwise=false") -> None:
    """Raise a one-line ConfigError when this machine cannot compile (no C++ compiler for Inductor on the CPU), naming
    the recipe setting that asked for it (`on`) and the one that does without (`off`)."""
    if torch.cuda.is_available():
        return
    from torch._inductor import cpp_builder

    try:
        cpp_builder.get_cpp_compiler()  # the search torch.compile itself does (config.cpp.cxx, then g++)
    except Exception as e:
        raise ConfigError(f"{on} needs a C++ compiler for torch.compile on the CPU "
                          f"({type(e).__name__}: {str(e).splitlines()[0] if str(e) else 'none found'}): install one "
                          f"(apt-get install g++) or set {off}") from None


def _rms_norm(x, weight, eps: float):
    xf = x.float()
    return (xf * torch.rsqrt(xf.pow(2).mean(-1, keepdim=True) + eps) * weight.float()).to(x.dtype)


def swiglu_probs_eager(y, probs):
    """silu(gate) * up * prob per row, where y = [gate | up] (fc1's output); returned in y's dtype. The experts'
    activation (model/layers.GroupedSequentialMLP), eager; `swiglu_probs` is it compiled."""
    gate, up = y.chunk(2, dim=-1)
    return (F.silu(gate) * up * probs.unsqueeze(-1)).to(y.dtype)


def _cross_entropy(logits, labels):
    s, b, v = logits.shape
    return F.cross_entropy(logits.float().view(s * b, v), labels.reshape(s * b), reduction="none").view(s, b)


@functools.cache
def _compiled(fn):
    return torch.compile(fn)  # automatic dynamic shapes: one recompile when a shape first changes, then symbolic


def rms_norm(x, weight, eps: float):
    """y = x * rsqrt(mean(x^2) + eps) * w, computed in float32, returned in x's dtype."""
    return _compiled(_rms_norm)(x, weight, eps)


def swiglu_probs(y, probs):
    """swiglu_probs_eager, compiled."""
    return _compiled(swiglu_probs_eager)(y, probs)


def language_model_loss(labels, logits):
    """GPTModel.compute_language_model_loss without tensor parallelism: per-token cross entropy in float32, [b, s]
    from labels [b, s] and logits [s, b, vocab] (Megatron's vocab_parallel_cross_entropy, whose labels are always
    token ids here: padding positions carry the pad id and a zero loss mask)."""
    return _compiled(_cross_entropy)(logits, labels.transpose(0, 1)).transpose(0, 1).contiguous()
