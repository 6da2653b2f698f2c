"""The resumable training run every training stage shares (base pretraining, SFT, ...).

A stage supplies its data as `sample(i) -> dict of tensors` (see model/train.py) and how to
initialise the model; this module does the rest, identically for every stage:
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

from model import checkpoint, manifest, recipe
from model.config import ConfigError, ModelConfig, ParallelConfig
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


def truncate_metrics(path: Path, start: int) -> None:
    """After a resume from step `start`, drop the lines of later steps (written before the kill)."""
    if path.exists():
        keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= start]
        path.write_text("".join(x + "\n" for x in keep))


def run(rc: RunConfig, *, stage: str, out: Path, tokenizer_dir: Path, parent: Path | None,
        prepare: Callable[[Path], tuple[Callable[[int], dict], Callable[[int], dict]]],
        init: Callable[[torch.nn.Module], None], extra_manifest: dict | None = None,
        extra_metrics: Callable[[], dict] | None = None) -> int:
    """Train (or resume) and publish `out`. `prepare(run_dir)` returns (train_sample, val_sample) and may
    cache data in run_dir (all ranks call it; write on rank 0, then barrier). `init(model)` fills a fresh
    model (seeded init or the parent's weights); it is skipped when resuming."""
    from model import parallel, train
    from model.build import build_model
    from model.to_hf import convert_in_subprocess as export_in_subprocess

    mcfg, par, optim, tr = rc.model, rc.parallel, rc.optim, rc.train
    parallel.init(par, mcfg, seed=tr["seed"], seq_length=tr["seq_length"])
    rank0 = parallel.is_rank0()
    log = print if rank0 else (lambda *a, **k: None)
    run_dir = out.with_name(out.name + ".run")
    if rank0:
        run_dir.mkdir(parents=True, exist_ok=True)
    torch.distributed.barrier()
    train_sample, val_sample = prepare(run_dir)
    seq, gbs = tr["seq_length"], par.global_batch_size

    model = build_model(mcfg, par, getattr(torch, tr["dtype"]))
    ddp, opt, sched = train.setup(model, optim, tr["steps"], gbs)
    start = 0
    latest = checkpoint.latest_step(run_dir)
    if latest is not None:
        start = checkpoint.load_step(latest, ddp, opt, sched)["step"]
        log(f"resumed from {latest} at step {start}", flush=True)
    else:
        init(model)
    log(f"{stage}: {mcfg.num_parameters() / 1e6:.2f}M parameters ({mcfg.num_parameters(True) / 1e6:.2f}M active), "
        f"TP={par.tp} PP={par.pp} EP={par.ep} DP={par.data_parallel_size(parallel.world_size())}, "
        f"{tr['steps']} steps x {gbs} x {seq} tokens", flush=True)

    def evaluate() -> float:
        return float(np.mean([train.eval_loss(ddp, train.microbatches(val_sample, k, par), seq)
                              for k in range(tr["eval_batches"])]))

    metrics_path = run_dir / "metrics.jsonl"
    if rank0:
        truncate_metrics(metrics_path, start)

    def record(row: dict) -> None:  # full precision, one JSON line per event; published as <out>/metrics.jsonl
        if rank0:
            with open(metrics_path, "a") as f:
                f.write(json.dumps(row) + "\n")

    if start == 0:  # the held-out loss before any update: what the run's final val_loss is measured against
        v = evaluate()
        record({"step": 0, "val_loss": v})
        log(f"eval step 0/{tr['steps']} | val_loss {v:.5f}", flush=True)
    total, t0, losses = tr["steps"], time.perf_counter(), []
    for step in range(start, total):
        m = train.train_step(ddp, opt, sched, train.microbatches(train_sample, step, par), seq, gbs)
        losses.append(m["loss"])
        record({"step": step + 1, **{k: m[k] for k in ("loss", "grad_norm", "lr", "skipped")}})  # no timings:
        # the same run must give the same bytes (step times are in the log line and the manifest's metrics)
        log(train.log_line(step + 1, total, m, seq * gbs, time.perf_counter() - t0, step + 1 - start), flush=True)
        if tr["eval_every"] and (step + 1) % tr["eval_every"] == 0 and step + 1 < total:
            v = evaluate()
            record({"step": step + 1, "val_loss": v})
            log(f"eval step {step + 1}/{total} | val_loss {v:.5f}", flush=True)
        if (step + 1) % tr["save_every"] == 0 and step + 1 < total:
            checkpoint.save_step(run_dir, step + 1, ddp, opt, sched, {"step": step + 1})
            checkpoint.prune_steps(run_dir, tr["keep_steps"])
    val = evaluate()
    record({"step": total, "val_loss": val})
    wall = time.perf_counter() - t0
    final_loss = losses[-1] if losses else None
    log(f"done: final train loss {final_loss}, val_loss {val:.5f}, {train.fmt_time(wall)}", flush=True)

    name = [str(manifest.staging_dir(out)) if rank0 else None]
    torch.distributed.broadcast_object_list(name, src=0)
    tmp = Path(name[0])
    checkpoint.save_model_only(ddp, tmp / "mcore")
    parallel.destroy()
    if not rank0:
        return 0
    recipe.dump(rc.cfg, tmp / "config.yaml")
    (tmp / "model_config.json").write_text(json.dumps(mcfg.to_dict(), indent=2))
    export_in_subprocess(tmp / "mcore", tmp / "model_config.json", tmp / "hf", tokenizer_dir)
    shutil.copytree(tokenizer_dir, tmp / "tokenizer", ignore=shutil.ignore_patterns("manifest.json"))
    shutil.copy(metrics_path, tmp / "metrics.jsonl")
    rows = [json.loads(x) for x in metrics_path.read_text().splitlines()]
    val_at_start = next((r["val_loss"] for r in rows if r["step"] == 0 and "val_loss" in r), None)
    metrics = {"final_train_loss": final_loss, "val_loss": val, "val_loss_at_start": val_at_start, "steps": total, "resumed_at": start,
               "tokens": total * gbs * seq, "wall_s_this_run": wall,
               "tok_per_s_this_run": (total - start) * gbs * seq / max(wall, 1e-9), **(extra_metrics() if extra_metrics else {})}
    manifest.write_manifest(tmp, stage=stage, parent=parent, config=rc.cfg, seed=tr["seed"], metrics=metrics,
                            model_config=mcfg.to_dict(), extra=extra_manifest)
    manifest.publish(tmp, out)
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"{stage} checkpoint -> {out}", flush=True)
    return 0
