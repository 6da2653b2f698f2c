"""The resumable training run of every next-token-loss stage (base pretraining, SFT, the fast variant's draft).

A stage supplies its data as `sample(i) -> dict of tensors` (see model/train.py) and how to
initialise the model; `run` does the rest, identically for every stage, through the run skeleton
(model/driver.py, which RL's trainer plugs into too):
  resolve + validate the recipe -> process groups -> model -> resume from `<out>.run/` or init ->
  train with one log line per step, held-out loss, step checkpoints -> publish `<out>/` atomically
  with mcore/, hf/, tokenizer/, config.yaml, model_config.json, metrics.jsonl (every step's loss, grad norm
  and lr at full precision, and the held-out losses) and manifest.json (written last).
"""
from __future__ import annotations

import copy
import json
import os
import shutil
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch

from model import recipe
from model.config import ConfigError, ModelConfig, ParallelConfig
from model.driver import Hooks, drive
from model.sections import OptimConfig


@dataclass
class RunConfig:
    cfg: dict  # the whole resolved recipe (written beside the checkpoint)
    model: ModelConfig
    parallel: ParallelConfig
    optim: OptimConfig
    train: dict = field(default_factory=dict)


def resolve(stage_folder: str, recipe_name: str, overrides: list[str], model_dict: dict | None = None,
            loaded: dict | None = None) -> RunConfig:
    """Recipe + overrides -> validated configs. `model_dict` (from the parent checkpoint) wins over the recipe.
    `loaded`: the recipe already loaded by recipe.load_recipe (scripts load it before reading any input, so a
    mistyped key fails first). Keys, types and defaults of every section: model/sections.py."""
    cfg = copy.deepcopy(loaded) if loaded is not None else recipe.load_recipe(stage_folder, recipe_name, overrides)
    train = cfg["train"]
    if model_dict is not None:
        for k, v in (cfg.get("model") or {}).items():  # a recipe written for another model must not train this one
            if model_dict.get(k) != v:
                raise ConfigError(f"recipe model.{k}={v!r} but the input checkpoint has {model_dict.get(k)!r}: the recipe "
                                  "describes another model (choose the recipe made for this checkpoint, or import that model)")
        cfg["model"] = model_dict
    mcfg = ModelConfig.from_dict(cfg.get("model", {}))
    par = ParallelConfig.from_dict(cfg.get("parallel", {}))
    optim = OptimConfig(**cfg["optim"])
    if optim.warmup_steps >= train["steps"]:
        raise ConfigError(f"optim.warmup_steps={optim.warmup_steps} must be < train.steps={train['steps']}")
    par.validate(mcfg, int(os.environ.get("WORLD_SIZE", "1")), train["seq_length"])
    if train["seq_length"] > mcfg.max_position_embeddings:
        raise ConfigError(f"train.seq_length={train['seq_length']} > model.max_position_embeddings="
                          f"{mcfg.max_position_embeddings}")
    return RunConfig(cfg, mcfg, par, optim, train)


class LossHooks(Hooks):
    """Next-token loss training on `sample(i)` data (model/train.py): the hooks of `run`."""

    def __init__(self, stage, tokenizer_dir, parent, prepare, init, extra_manifest):
        self.stage, self.tokenizer_dir, self.parent = stage, tokenizer_dir, parent
        self._prepare, self._init, self.extra_manifest = prepare, init, extra_manifest
        self.losses: list[float] = []

    def prepare(self) -> None:
        self.metrics_path = self.run.run_dir / "metrics.jsonl"  # published as <out>/metrics.jsonl
        self.train_sample, self.val_sample = self._prepare(self.run.run_dir)

    def setup(self, common: dict | None) -> None:
        from model import parallel

        r = self.run
        mcfg, par, tr = r.rc.model, r.rc.parallel, r.rc.train
        if common is None:
            self._init(r.model)
        r.log(f"{self.stage}: {mcfg.num_parameters() / 1e6:.2f}M parameters ({mcfg.num_parameters(True) / 1e6:.2f}M "
              f"active), TP={par.tp} PP={par.pp} EP={par.ep} DP={par.data_parallel_size(parallel.world_size())}, "
              f"{r.total} steps x {par.global_batch_size} x {tr['seq_length']} tokens")
        if r.start == 0:  # the held-out loss before any update: what the run's final val_loss is measured against
            self._eval(0)
        self.t0 = time.perf_counter()

    def evaluate(self) -> float:
        from model import train

        r = self.run
        return float(np.mean([train.eval_loss(r.ddp, train.microbatches(self.val_sample, k, r.rc.parallel),
                                              r.rc.train["seq_length"], r.rc.train["loss_rows_only"])
                              for k in range(r.rc.train["eval_batches"])]))

    def _eval(self, step: int) -> None:
        v = self.evaluate()
        self.run.record({"step": step, "val_loss": v})
        self.run.log(f"eval step {step}/{self.run.total} | val_loss {v:.5f}")

    def step(self, i: int) -> None:
        from model import train

        r = self.run
        seq, gbs = r.rc.train["seq_length"], r.rc.parallel.global_batch_size
        m = train.train_step(r.ddp, r.opt, r.sched, train.microbatches(self.train_sample, i, r.rc.parallel), seq, gbs,
                             r.rc.train["loss_rows_only"])
        self.losses.append(m["loss"])
        r.record({"step": i + 1, **{k: m[k] for k in ("loss", "grad_norm", "lr", "skipped")}})  # no timings:
        # the same run must give the same bytes (step times are in the log line and the manifest's metrics)
        r.log(train.log_line(i + 1, r.total, m, seq * gbs, time.perf_counter() - self.t0, i + 1 - r.start))
        if r.due(r.rc.train["eval_every"], i + 1):
            self._eval(i + 1)

    def finish(self) -> None:
        from model.train import fmt_time

        self.val = self.evaluate()
        self.run.record({"step": self.run.total, "val_loss": self.val})
        self.wall = time.perf_counter() - self.t0
        self.final_loss = self.losses[-1] if self.losses else None
        self.run.log(f"done: final train loss {self.final_loss}, val_loss {self.val:.5f}, {fmt_time(self.wall)}")

    def publish_extras(self, tmp: Path) -> tuple[dict, dict | None]:
        from model.to_hf import convert_in_subprocess

        r = self.run
        total, start = r.total, r.start
        tokens_per_step = r.rc.parallel.global_batch_size * r.rc.train["seq_length"]
        convert_in_subprocess(tmp / "mcore", tmp / "model_config.json", tmp / "hf", self.tokenizer_dir)
        shutil.copy(self.metrics_path, tmp / "metrics.jsonl")
        rows = [json.loads(x) for x in self.metrics_path.read_text().splitlines()]
        val_at_start = next((x["val_loss"] for x in rows if x["step"] == 0 and "val_loss" in x), None)
        metrics = {"final_train_loss": self.final_loss, "val_loss": self.val, "val_loss_at_start": val_at_start,
                   "steps": total, "resumed_at": start, "tokens": total * tokens_per_step,
                   "wall_s_this_run": self.wall,
                   "tok_per_s_this_run": (total - start) * tokens_per_step / max(self.wall, 1e-9)}
        return metrics, self.extra_manifest


def run(rc: RunConfig, *, stage: str, out: Path, tokenizer_dir: Path, parent: Path | None,
        prepare: Callable[[Path], tuple[Callable[[int], dict], Callable[[int], dict]]],
        init: Callable[[torch.nn.Module], None], extra_manifest: dict | None = None) -> int:
    """Train (or resume) and publish `out`. `prepare(run_dir)` returns (train_sample, val_sample) and may
    cache data in run_dir (all ranks call it; write on rank 0, then barrier). `init(model)` fills a fresh
    model (seeded init or the parent's weights); it is skipped when resuming."""
    return drive(rc, out, LossHooks(stage, tokenizer_dir, parent, prepare, init, extra_manifest))
