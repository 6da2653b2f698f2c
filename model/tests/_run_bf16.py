"""Helper run by test_bf16_train.py (plain python): bf16 vs float32 training through the run skeleton, as JSON.

    python _run_bf16.py --run-dir DIR --out losses.json

A "parent" is first trained in float32 (weights loaded before the optimizer exists), so its loss is well
below the loss of a freshly built model. Then model/driver.py's Run trains from those weights in nine runs,
filling them in Hooks.setup as SFT and RL do (after the optimizer was built from the fresh model's weights):
bf16 with lr 1e-7 (2 steps), bf16 and float32 with lr 1e-3 (STEPS steps, the bf16 run saving a step checkpoint
at step 2), then a bf16 run resumed from that checkpoint (steps 3..STEPS); the same two bf16 runs with stochastic
rounding (optim.bf16_rounding); and float32, bf16 and bf16 with stochastic rounding at SMALL_LR, where rounding to
nearest drops most updates. Writes every run's losses.
"""
from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import torch

from model import hf_mapping, parallel, sections, train
from model.build import build_model
from model.driver import Hooks, Run
from model.loop import RunConfig
from model.tests._run_layout import GBS, SEQ, make_sample, start_tiny

STEPS = 4
PARENT_STEPS = 12
SMALL_LR, SMALL_STEPS = 2e-5, 6  # updates below half a bf16 step for most weights: nearest rounding keeps them


class _Hooks(Hooks):
    def __init__(self, parent_state: dict, sample):
        self.parent_state, self.sample, self.losses = parent_state, sample, []

    def setup(self, common):
        if common is None:  # a fresh start fills the weights here, after train.setup built the optimizer
            self.run.model.load_state_dict(self.parent_state, strict=False)

    def step(self, i):
        r = self.run
        m = train.train_step(r.ddp, r.opt, r.sched, train.microbatches(self.sample, i, r.rc.parallel), SEQ, GBS)
        self.losses.append(m["loss"])


def _rc(cfg, par, dtype: str, lr: float, steps: int, save_every: int = 0, rounding: str = "nearest") -> RunConfig:
    tr = {**dataclasses.asdict(sections.TrainConfig()),  # every key the driver reads, then this run's
          "steps": steps, "seed": 1, "seq_length": SEQ, "dtype": dtype, "save_every": save_every, "keep_steps": 1}
    return RunConfig({}, cfg, par, train.OptimConfig(lr=lr, min_lr=lr, warmup_steps=0, bf16_rounding=rounding), tr)


def main() -> None:
    a, cfg, par = start_tiny(False, "--run-dir")
    sample = make_sample(n=GBS)  # one batch, repeated: the parent memorises it quickly

    m = build_model(cfg, par)
    hf_mapping.load_hf_into(m, hf_mapping.init_hf_state(cfg, 3), cfg)
    ddp, opt, sch = train.setup(m, train.OptimConfig(lr=1e-2, min_lr=1e-2, warmup_steps=0), PARENT_STEPS, GBS)
    parent = [train.train_step(ddp, opt, sch, train.microbatches(sample, s, par), SEQ, GBS)["loss"]
              for s in range(PARENT_STEPS)]
    state = {k: v.detach().clone() for k, v in m.state_dict().items() if not k.endswith("_extra_state")}
    fresh = build_model(cfg, par)  # what the optimizer sees before the weights are filled
    fresh_loss = train.eval_loss(fresh, train.microbatches(sample, 0, par), SEQ)
    del m, ddp, opt, sch, fresh

    out = {"parent": parent, "fresh_model_loss": fresh_loss}
    nearest, sr = "nearest", "stochastic"
    for name, dtype, lr, steps, save, out_dir, rounding in [
            ("bf16_tiny_lr", "bfloat16", 1e-7, 2, 0, "bf16_tiny_lr", nearest),
            ("bf16", "bfloat16", 1e-3, STEPS, 2, "bf16", nearest), ("fp32", "float32", 1e-3, STEPS, 0, "fp32", nearest),
            ("bf16_resumed", "bfloat16", 1e-3, STEPS, 2, "bf16", nearest),
            ("bf16_sr", "bfloat16", 1e-3, STEPS, 2, "bf16_sr", sr),
            ("bf16_sr_resumed", "bfloat16", 1e-3, STEPS, 2, "bf16_sr", sr),
            ("fp32_small_lr", "float32", SMALL_LR, SMALL_STEPS, 0, "fp32_small", nearest),
            ("bf16_small_lr", "bfloat16", SMALL_LR, SMALL_STEPS, 0, "bf16_small", nearest),
            ("bf16_sr_small_lr", "bfloat16", SMALL_LR, SMALL_STEPS, 0, "bf16_sr_small", sr)]:
        h = _Hooks(state, sample)
        run = Run(_rc(cfg, par, dtype, lr, steps, save, rounding), Path(a.run_dir) / out_dir, h)  # *_resumed: the
        run.train()  # run dir before them, whose latest step checkpoint is step 2 (the last step saves none)
        if name.endswith("_resumed"):
            out[f"{name}_at"] = run.start
        assert next(run.model.parameters()).dtype == getattr(torch, dtype)
        out[name] = h.losses
    Path(a.out).write_text(json.dumps(out))
    parallel.destroy()


if __name__ == "__main__":
    main()
