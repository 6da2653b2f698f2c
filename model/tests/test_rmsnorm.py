"""model.layers' RMSNorm (its own backward) computes what torch's rms_norm computes, forward and backward."""
from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F

from model.layers import _RMSNormFn

# forward: the same float32 operations (seen: equal in both dtypes); backward: another summation order, so float32
# within 1e-5 of the largest gradient (seen: 5e-6 / 5.7e3 for the weight) and bf16 within one bf16 step (2^-7 relative)
TOL = {torch.float32: 1e-5, torch.bfloat16: 2 ** -7}


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16], ids=["fp32", "bf16"])
@pytest.mark.parametrize("shape", [(96, 64), (12, 2, 64), (12, 2, 4, 16)], ids=["2d", "sbh", "qk_heads"])
def test_forward_and_gradients_match_torch_rms_norm(shape, dtype):
    g = torch.Generator().manual_seed(0)
    x0 = (torch.randn(*shape, generator=g) * 3).to(dtype)
    w0 = (torch.rand(shape[-1], generator=g) + 0.5).to(dtype)
    gy = torch.randn(*shape, generator=g).to(dtype)
    out = {}
    for name in ("torch", "ours"):
        x, w = x0.clone().requires_grad_(True), w0.clone().requires_grad_(True)
        y = F.rms_norm(x, (shape[-1],), w, 1e-6) if name == "torch" else _RMSNormFn.apply(x, w, 1e-6)
        y.backward(gy)
        out[name] = (y.detach().float(), x.grad.float(), w.grad.float())
    for a, b, what in zip(out["torch"], out["ours"], ("y", "grad_x", "grad_w")):
        assert a.dtype == b.dtype and a.shape == b.shape
        scale = a.abs().max().clamp(min=1.0)
        assert float((a - b).abs().max()) <= TOL[dtype] * scale, (what, dtype)
