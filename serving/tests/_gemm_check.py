"""Run in a subprocess by test_quantize: vLLM-CPU's int8 GEMM on weights written by serving/quantize.py vs the
W8A8 reference (dequantized weights x per-token int8 activations), as vLLM's CPU linear kernel calls it."""
import json
import sys

import torch
from vllm import _custom_ops as ops

from serving.quantize import dequantize, int8_weight_max, quantize_weight

int_max = int(sys.argv[1]) if len(sys.argv) > 1 else int8_weight_max()[0]
torch.manual_seed(0)
worst = 0.0
for n, k in [(256, 64), (64, 128), (1024, 256)]:
    for m in (1, 7, 64):
        w = torch.randn(n, k) * 0.2
        q, s = quantize_weight(w, "w8a8_int8", int_max)
        wt = q.t()
        h = ops.create_onednn_scaled_mm(wt, s, torch.float32, True, False, 32)
        x = torch.randn(m, k)
        x_q, x_s, x_zp = ops.onednn_scaled_int8_quant(x, None, None, True)
        out = torch.empty(m, n)
        ops.onednn_scaled_mm(h, x_q, out, x_s, x_zp, wt.sum(dim=0, keepdim=True, dtype=torch.float32) * s.squeeze(), None)
        xs = x.abs().amax(-1, keepdim=True) / 127
        ref = (torch.round(x / xs) * xs) @ dequantize(q, s).T
        worst = max(worst, float((out - ref).norm() / ref.norm()))
print(json.dumps({"int_max": int_max, "worst_rel_error": worst}))
