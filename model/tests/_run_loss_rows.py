"""Helper run by test_loss_rows.py (plain python): `train.loss_rows_only` (the output layer and loss at the loss's
positions, model/logit_rows.py) against the full output layer, on the tiny dense model in float32, as JSON.

    python _run_loss_rows.py --out loss_rows.json

Two models with the same weights train 3 steps on the same batches, whose loss masks cover about a fifth of the
positions (as SFT's assistant tokens do); writes each side's losses, the held-out loss, the largest relative
difference of the gradients of the first step and of the weights after the last, and how many rows the output
layer computed on each side.
"""
from __future__ import annotations

import json
from functools import partial
from pathlib import Path

import torch

from model import hf_mapping, logit_rows, parallel, train
from model.build import build_model
from model.tests._run_fused import max_rel
from model.tests._run_layout import GBS, SEQ, start_tiny

STEPS = 3


def sample_fn(seed: int, n: int = 64):
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 512, (n, SEQ + 1), generator=g)
    masks = (torch.rand(n, SEQ, generator=g) < 0.2).float()

    def sample(i: int) -> dict:
        x = data[i % n]
        return {"tokens": x[:-1], "labels": x[1:], "loss_mask": masks[i % n], "position_ids": torch.arange(SEQ)}
    return sample


def run(cfg, par, rows_only: bool) -> dict:
    m = build_model(cfg, par)
    hf_mapping.load_hf_into(m, hf_mapping.init_hf_state(cfg, 3), cfg)
    ddp, opt, sch = train.setup(m, train.OptimConfig(lr=1e-3, warmup_steps=0), STEPS, GBS)
    rows_seen = []
    m.output_layer.register_forward_hook(lambda mod, args, out: rows_seen.append(out[0].shape[0] * out[0].shape[1]))
    sample, losses, grads = sample_fn(0), [], None
    for s in range(STEPS):
        losses.append(train.train_step(ddp, opt, sch, train.microbatches(sample, s, par), SEQ, GBS,
                                       rows_only)["loss"])
        if grads is None:
            grads = {n: p.main_grad.detach().clone() for n, p in ddp.named_parameters()}
    held_out = train.eval_loss(ddp, train.microbatches(sample_fn(7), 0, par), SEQ, rows_only)
    return {"losses": losses, "eval_loss": held_out, "grads": grads, "rows": sum(rows_seen[:1]),
            "weights": {n: p.detach().clone() for n, p in ddp.named_parameters()}}


def main() -> None:
    a, cfg, par = start_tiny(False)
    # rows in multiples of 8, not 64: a micro batch here has 64 positions, of which ~13 count
    logit_rows.rows_for = partial(logit_rows.rows_for, align=8)
    full, rows = run(cfg, par, False), run(cfg, par, True)
    Path(a.out).write_text(json.dumps({
        "losses_full": full["losses"], "losses_rows": rows["losses"],
        "eval_full": full["eval_loss"], "eval_rows": rows["eval_loss"],
        "grad_max_rel": max(max_rel(full["grads"][n], rows["grads"][n]) for n in full["grads"]),
        "weight_max_rel": max(max_rel(full["weights"][n], rows["weights"][n]) for n in full["weights"]),
        "rows_full": full["rows"], "rows_rows": rows["rows"]}))
    parallel.destroy()


if __name__ == "__main__":
    main()
