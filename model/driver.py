"""The one resumable training-run skeleton; a stage plugs its step into it as `Hooks`.

    process groups -> model + optimizer -> hooks.prepare -> resume from `<out>.run/` latest step (or a fresh
    start) -> hooks.setup -> hooks.step per step, step checkpoints ({"step", **hooks.state()}) + pruning ->
    hooks.finish -> publish `<out>/` atomically: staging dir, mcore/, hooks.write_collective, config.yaml,
    model_config.json, tokenizer/, hooks.publish_extras, manifest.json last -> hooks.published -> run dir removed.

Used by model/loop.run (pretraining, SFT, the fast variant's draft: next-token loss) and rl/01_train.py (GRPO).
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from model import checkpoint, manifest, recipe


def truncate_metrics(path: Path, start: int) -> None:
    """After a resume from step `start`, drop the lines of later steps (written before the kill)."""
    if path.exists():
        keep = [ln for ln in path.read_text().splitlines() if ln.strip() and json.loads(ln)["step"] <= start]
        path.write_text("".join(x + "\n" for x in keep))


class Hooks:
    """A stage's part of a run. Every method runs on every rank unless it says rank 0; `self.run` is the `Run`."""
    stage = "train"  # the manifest's stage and the last line's prefix
    parent: Path | None = None  # the manifest's parent
    tokenizer_dir: Path  # published as <out>/tokenizer/
    metrics_path: Path | None = None  # rows of Run.record; truncated to the resumed step (kill -9 wrote later ones)
    metrics_json: dict = {}  # json.dumps options of those rows
    updates_per_step = 1  # optimizer updates per step: the LR schedule spans steps * this
    run: Run

    def prepare(self) -> None:
        """The model and optimizer exist, no weights are loaded yet: data, further models."""

    def setup(self, common: dict | None) -> None:
        """After resuming (`common`: the step checkpoint's common state) or on a fresh start (None: fill the weights;
        the driver then refreshes the optimizer's fp32 main params from them, train.sync_main_params):
        the stage's own state, its header line, any evaluation before step 1."""

    def step(self, i: int) -> None:
        """Step i + 1: its metrics rows, log line and any periodic evaluation."""

    def state(self) -> dict:
        """Rank 0: what a step checkpoint's common state holds beside "step" (restored through setup)."""
        return {}

    def finish(self) -> None:
        """After the last step: the final evaluation."""

    def write_collective(self, tmp: Path) -> None:
        """Before the process groups close: outputs all ranks write together into the staging dir."""

    def publish_extras(self, tmp: Path) -> tuple[dict, dict | None]:
        """Rank 0: the stage's files in the staging dir; returns the manifest's metrics and extra fields."""
        return {}, None

    def published(self) -> None:
        """Rank 0, once <out>/ exists: files that describe it."""

    def close(self) -> None:
        """Always, possibly twice: engines, pools, temporary dirs."""


class Run:
    """What hooks share with the driver: configs, rank, log, the trained model, its optimizer and schedule."""

    def __init__(self, rc, out: Path, hooks: Hooks):
        self.rc, self.out, self.hooks = rc, Path(out), hooks
        self.run_dir = self.out.with_name(self.out.name + ".run")
        self.total, self.start, self.rank0 = rc.train["steps"], 0, False
        hooks.run = self

    def log(self, *x) -> None:
        if self.rank0:
            print(*x, flush=True)

    def record(self, row: dict) -> None:
        """One JSON line per event at full precision (rank 0) in hooks.metrics_path."""
        if self.rank0:
            with open(self.hooks.metrics_path, "a") as f:
                f.write(json.dumps(row, **self.hooks.metrics_json) + "\n")

    def due(self, every: int, step: int) -> bool:
        """Every `every` steps (0: never), not at the last step (the end has its own evaluation and output)."""
        return bool(every) and step % every == 0 and step < self.total

    def train(self) -> None:
        from model import parallel, train
        from model.build import build_model

        rc, h = self.rc, self.hooks
        mcfg, par, tr = rc.model, rc.parallel, rc.train
        parallel.init(par, mcfg, seed=tr["seed"], seq_length=tr["seq_length"])
        self.rank0 = parallel.is_rank0()
        if self.rank0:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.distributed.barrier()
        self.model = build_model(mcfg, par, getattr(torch, tr["dtype"]), tr["fuse_elementwise"], tr["cpu_attention"])
        self.ddp, self.opt, self.sched = train.setup(self.model, rc.optim, self.total * h.updates_per_step,
                                                     par.global_batch_size, seed=tr["seed"])
        h.prepare()
        common, latest = None, checkpoint.latest_step(self.run_dir)
        if latest is not None:
            common = checkpoint.load_step(latest, self.ddp, self.opt, self.sched)
            self.start = common["step"]
            self.log(f"resumed from {latest} at step {self.start}")
        if self.rank0 and h.metrics_path is not None:
            truncate_metrics(h.metrics_path, self.start)
        h.setup(common)
        if common is None:  # setup filled the weights after the optimizer was built: its bf16 main copies are stale
            train.sync_main_params(self.opt)
        for i in range(self.start, self.total):
            h.step(i)
            if self.due(tr["save_every"], i + 1):
                self._save(i + 1)
        h.finish()

    def _save(self, step: int) -> None:
        """Step checkpoint, collectively; the common state is rank 0's (the stage's state may live there only)."""
        from model import parallel

        common = [{"step": step, **self.hooks.state()} if self.rank0 else None]
        if parallel.world_size() > 1:
            torch.distributed.broadcast_object_list(common, src=0)
        checkpoint.save_step(self.run_dir, step, self.ddp, self.opt, self.sched, common[0])
        checkpoint.prune_steps(self.run_dir, self.rc.train["keep_steps"])

    def publish(self) -> int:
        from model import parallel

        h, mcfg = self.hooks, self.rc.model
        name = [str(manifest.staging_dir(self.out)) if self.rank0 else None]
        torch.distributed.broadcast_object_list(name, src=0)
        tmp = Path(name[0])
        checkpoint.save_model_only(self.ddp, tmp / "mcore")
        h.write_collective(tmp)
        h.close()
        parallel.destroy()
        if not self.rank0:
            return 0
        recipe.dump(self.rc.cfg, tmp / "config.yaml")
        (tmp / "model_config.json").write_text(json.dumps(mcfg.to_dict(), indent=2))
        shutil.copytree(h.tokenizer_dir, tmp / "tokenizer", ignore=shutil.ignore_patterns("manifest.json"))
        metrics, extra = h.publish_extras(tmp)
        manifest.write_manifest(tmp, stage=h.stage, parent=h.parent, config=self.rc.cfg, seed=self.rc.train["seed"],
                                metrics=metrics, model_config=mcfg.to_dict(), extra=extra)
        manifest.publish(tmp, self.out)
        h.published()
        shutil.rmtree(self.run_dir, ignore_errors=True)
        print(f"{h.stage} checkpoint -> {self.out}", flush=True)
        return 0


def drive(rc, out: Path, hooks: Hooks) -> int:
    """Train (or resume) and publish `out` with the stage's hooks; 0 on success."""
    run = Run(rc, out, hooks)
    try:
        run.train()
        return run.publish()
    finally:
        hooks.close()
