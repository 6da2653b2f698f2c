"""Helper run by test_logit_rows.py (plain python): a forward and backward with the output layer at chosen rows
only (model/logit_rows.py) against the same with logits at every position, from the same weights, as JSON.

    python _run_logit_rows.py --out rows.json
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from model import hf_mapping, logit_rows, parallel
from model.build import build_model
from model.tests._run_layout import SEQ, start_tiny

B = 4  # 128 positions; a quarter of them in the loss -> 32 rows, aligned to 64


def main() -> None:
    a, cfg, par = start_tiny(True, micro_batch=B, global_batch=B)
    m = build_model(cfg, par)
    hf_mapping.load_hf_into(m, hf_mapping.init_hf_state(cfg, 3), cfg)
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 512, (B, SEQ), generator=g)
    pos = torch.arange(SEQ).expand(B, SEQ)
    mask = torch.zeros(B, SEQ)
    mask[:, SEQ - SEQ // 4:] = 1.0  # the answer at the end of each row, as in SFT
    seen = []
    m.output_layer.register_forward_hook(lambda mod, args, out: seen.append(list(args[0].shape)))
    res = {}
    for mode in ("full", "rows"):
        m.zero_grad(set_to_none=True)
        rows = logit_rows.select(m, mask) if mode == "rows" else None
        logits = m(tokens, pos, None)  # [b, s, v] or [1, n, v]
        picked = logits[0] if rows is not None else logits[mask > 0]
        if rows is not None:
            picked = picked[mask[rows] > 0]
        (picked.float().logsumexp(-1).sum()).backward()
        res[mode] = {"shape": list(logits.shape), "logits": picked.detach(),
                     "grad": torch.cat([p.grad.flatten() for p in m.parameters() if p.grad is not None])}
    full, sel = res["full"], res["rows"]
    out = {"output_inputs": seen, "shapes": [full["shape"], sel["shape"]],
           "logits_max_diff": float((full["logits"] - sel["logits"]).abs().max()),
           "grad_max_diff": float((full["grad"] - sel["grad"]).abs().max()),
           "grad_max": float(full["grad"].abs().max()), "grad_numel": [full["grad"].numel(), sel["grad"].numel()]}
    parallel.destroy()
    Path(a.out).write_text(json.dumps(out))


if __name__ == "__main__":
    main()
