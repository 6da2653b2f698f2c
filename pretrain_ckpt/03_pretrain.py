"""Pretrain the tiny MoE base on Megatron-Core (CPU: gloo; GPU: nccl), resumable after kill -9.

    # tiny CPU default (one process, ~8 min on 2 cores)
    python pretrain_ckpt/03_pretrain.py --corpus data/corpus --tokenizer checkpoints/tokenizer --out checkpoints/base
    # same run split over 2 processes (TP=2 / PP=2 / EP=2)
    torchrun --nproc-per-node 2 pretrain_ckpt/03_pretrain.py ... --set parallel.ep=2
    # cluster: a recipe for the hardware, launched by torchrun on every node
    torchrun --nnodes 4 --nproc-per-node 8 pretrain_ckpt/03_pretrain.py ... --recipe <name>_h200x8

Step checkpoints (model, optimizer, scheduler, RNG, step) go to `<out>.run/` every `train.save_every`
steps; rerunning the same command resumes from the newest complete one. The output directory
(`mcore/`, `hf/`, `config.yaml`, `manifest.json`) appears atomically when training is done.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import numpy as np  # noqa: E402
import torch  # noqa: E402

from model import checkpoint, manifest, recipe  # noqa: E402
from model.config import ConfigError, ModelConfig, ParallelConfig  # noqa: E402
from model.export import export_in_subprocess  # noqa: E402
from model.train import OptimConfig  # noqa: E402

TRAIN_DEFAULTS = {
    "steps": 300,  # optimizer steps
    "seq_length": 256,  # tokens per sequence
    "seed": 1234,  # seeds init, data order and RNG
    "save_every": 50,  # step checkpoint interval
    "keep_steps": 2,  # step checkpoints kept in <out>.run
    "eval_every": 100,  # held-out loss interval (0 = only at the end)
    "eval_batches": 4,  # global batches of held-out data per evaluation
    "dtype": "float32",  # float32 | bfloat16 (bf16 on GPU)
}


def parse(argv=None):
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--corpus", type=Path, required=True, help="corpus dataset (pretrain_ckpt/01_corpus.py)")
    ap.add_argument("--tokenizer", type=Path, required=True, help="tokenizer dir (pretrain_ckpt/02_tokenizer.py)")
    ap.add_argument("--out", type=Path, required=True, help="output checkpoint directory (e.g. checkpoints/base)")
    ap.add_argument("--recipe", default="tiny_cpu", help="pretrain_ckpt/recipes/<name>.yaml or a path")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe value, e.g. --set train.steps=20 --set parallel.tp=2")
    ap.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    return ap.parse_args(argv)


def resolve(args) -> tuple[dict, ModelConfig, ParallelConfig, OptimConfig, dict]:
    cfg = recipe.load_recipe("pretrain_ckpt", args.recipe, args.overrides)
    train = TRAIN_DEFAULTS | cfg.get("train", {})
    unknown = set(train) - set(TRAIN_DEFAULTS)
    if unknown:
        raise ConfigError(f"unknown train keys {sorted(unknown)}: valid keys are {sorted(TRAIN_DEFAULTS)}")
    cfg["train"] = train
    mcfg = ModelConfig.from_dict(cfg.get("model", {}))
    par = ParallelConfig.from_dict(cfg.get("parallel", {}))
    try:
        optim = OptimConfig(**cfg.get("optim", {}))
    except TypeError as e:
        raise ConfigError(f"optim section: {e} (see model/train.py:OptimConfig for the fields)") from None
    par.validate(mcfg, int(os.environ.get("WORLD_SIZE", "1")), train["seq_length"])
    if train["seq_length"] > mcfg.max_position_embeddings:
        raise ConfigError(f"train.seq_length={train['seq_length']} > model.max_position_embeddings="
                          f"{mcfg.max_position_embeddings}")
    return cfg, mcfg, par, optim, train


def tokenize_corpus(corpus: Path, tokenizer: Path, run_dir: Path) -> dict[str, Path]:
    """Token streams as .npy in the run dir (rank 0 writes atomically; others wait at a barrier)."""
    out = {s: run_dir / f"tokens_{s}.npy" for s in ("train", "validation")}
    if torch.distributed.get_rank() == 0 and not all(p.exists() for p in out.values()):
        import datasets
        from transformers import PreTrainedTokenizerFast

        tok = PreTrainedTokenizerFast.from_pretrained(str(tokenizer))
        for split, path in out.items():
            texts = list(datasets.load_from_disk(str(corpus / split))["text"])
            ids = tok(texts, add_special_tokens=False)["input_ids"]
            flat = np.fromiter((t for doc in ids for t in (*doc, tok.eos_token_id)), dtype=np.uint16)
            tmp = path.with_suffix(".tmp.npy")
            np.save(tmp, flat)
            os.replace(tmp, path)
    torch.distributed.barrier()
    return out


class Stream:
    """Sequence i of a flat token stream: a seeded permutation of fixed chunks, reshuffled per epoch."""

    def __init__(self, tokens: np.ndarray, seq: int, seed: int):
        self.tokens, self.seq, self.seed = tokens, seq, seed
        self.n = (len(tokens) - 1) // seq
        if self.n < 1:
            raise ConfigError(f"corpus has {len(tokens)} tokens, fewer than one sequence of {seq}")
        self._perm: dict[int, np.ndarray] = {}

    def __call__(self, i: int) -> dict:
        epoch, j = divmod(i, self.n)
        if epoch not in self._perm:
            self._perm = {epoch: np.random.RandomState((self.seed + epoch) % 2**32).permutation(self.n)}
        start = int(self._perm[epoch][j]) * self.seq
        x = torch.from_numpy(self.tokens[start:start + self.seq + 1].astype(np.int64))
        return {"tokens": x[:-1], "labels": x[1:], "loss_mask": torch.ones(self.seq),
                "position_ids": torch.arange(self.seq)}


def main(argv=None) -> int:
    args = parse(argv)
    try:
        cfg, mcfg, par, optim, tr = resolve(args)
        for d, stage in ((args.corpus, "corpus"), (args.tokenizer, "tokenizer")):
            manifest.verify(d, stage=stage)
    except (ConfigError, manifest.CheckpointError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    if args.deterministic:
        torch.use_deterministic_algorithms(True)

    from model import hf_mapping, parallel, train
    from model.build import build_model

    parallel.init(par, mcfg, seed=tr["seed"], seq_length=tr["seq_length"])
    rank0 = parallel.is_rank0()
    log = print if rank0 else (lambda *a, **k: None)
    run_dir = args.out.with_name(args.out.name + ".run")
    if rank0:
        run_dir.mkdir(parents=True, exist_ok=True)
    torch.distributed.barrier()
    paths = tokenize_corpus(args.corpus, args.tokenizer, run_dir)
    seq, gbs = tr["seq_length"], par.global_batch_size
    train_data = Stream(np.load(paths["train"], mmap_mode="r"), seq, tr["seed"])
    val_data = Stream(np.load(paths["validation"], mmap_mode="r"), seq, tr["seed"] + 1)

    dtype = getattr(torch, tr["dtype"])
    model = build_model(mcfg, par, dtype)
    ddp, opt, sched = train.setup(model, optim, tr["steps"], gbs)
    start = 0
    latest = checkpoint.latest_step(run_dir)
    if latest is not None:
        common = checkpoint.load_step(latest, ddp, opt, sched)
        start = common["step"]
        log(f"resumed from {latest} at step {start}", flush=True)
    else:
        hf_mapping.load_hf_into(model, hf_mapping.init_hf_state(mcfg, tr["seed"]), mcfg)
        log(f"model: {mcfg.num_parameters() / 1e6:.2f}M parameters ({mcfg.num_parameters(True) / 1e6:.2f}M active), "
            f"TP={par.tp} PP={par.pp} EP={par.ep} DP={par.data_parallel_size(parallel.world_size())}", flush=True)

    def evaluate() -> float:
        n = tr["eval_batches"]
        return float(np.mean([train.eval_loss(ddp, train.microbatches(val_data, k, par), seq) for k in range(n)]))

    total, t0, losses, val = tr["steps"], time.perf_counter(), [], None
    for step in range(start, total):
        m = train.train_step(ddp, opt, sched, train.microbatches(train_data, step, par), seq, gbs)
        losses.append(m["loss"])
        log(train.log_line(step + 1, total, m, seq * gbs, time.perf_counter() - t0, step + 1 - start), flush=True)
        if tr["eval_every"] and (step + 1) % tr["eval_every"] == 0 and step + 1 < total:
            val = evaluate()
            log(f"eval step {step + 1}/{total} | val_loss {val:.5f}", flush=True)
        if (step + 1) % tr["save_every"] == 0 and step + 1 < total:
            checkpoint.save_step(run_dir, step + 1, ddp, opt, sched, {"step": step + 1})
            checkpoint.prune_steps(run_dir, tr["keep_steps"])
    val = evaluate()
    wall = time.perf_counter() - t0
    final_loss = losses[-1] if losses else None
    log(f"done: final train loss {final_loss}, val_loss {val:.5f}, {fmt(wall)}", flush=True)

    tmp = manifest.staging_dir(args.out) if rank0 else None
    tmp_name = [str(tmp)] if rank0 else [None]
    torch.distributed.broadcast_object_list(tmp_name, src=0)
    tmp = Path(tmp_name[0])
    checkpoint.save_model_only(ddp, tmp / "mcore")
    parallel.destroy()
    if not rank0:
        return 0
    recipe.dump(cfg, tmp / "config.yaml")
    (tmp / "model_config.json").write_text(json.dumps(mcfg.to_dict(), indent=2))
    export_in_subprocess(tmp / "mcore", tmp / "model_config.json", tmp / "hf", args.tokenizer)
    shutil.copytree(args.tokenizer, tmp / "tokenizer", ignore=shutil.ignore_patterns("manifest.json"))
    metrics = {"final_train_loss": final_loss, "val_loss": val, "steps": total, "resumed_at": start,
               "tokens": total * gbs * seq, "wall_s_this_run": wall,
               "tok_per_s_this_run": (total - start) * gbs * seq / max(wall, 1e-9)}
    manifest.write_manifest(tmp, stage="base", parent=args.tokenizer, config=cfg, seed=tr["seed"], metrics=metrics,
                            model_config=mcfg.to_dict(), extra={"corpus": {"path": str(args.corpus),
                                                                           "manifest_sha256": manifest.manifest_hash(args.corpus)}})
    manifest.publish(tmp, args.out)
    shutil.rmtree(run_dir, ignore_errors=True)
    print(f"base checkpoint -> {args.out}", flush=True)
    return 0


def fmt(s: float) -> str:
    from model.train import fmt_time

    return fmt_time(s)


if __name__ == "__main__":
    sys.exit(main())
