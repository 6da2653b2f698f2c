"""Helper run by the tests (plain python or torchrun): one Megatron job per call, results as JSON.

    python _run_layout.py train   --moe --tp 2 --pp 1 --ep 1 --sp --out losses.json
    python _run_layout.py train   --hf HF_DIR --tp 2 --out losses.json          (from that checkpoint's weights)
    python _run_layout.py save    --moe --tp 2 --sp --ckpt DIR --out eval.json   (2 train steps, save, eval)
    python _run_layout.py load    --moe --ckpt DIR --out eval.json               (load, eval)
    python _run_layout.py import  --hf HF_DIR --tp 2 [--sp] --ckpt DIR           (HF -> shard -> torch_dist)
    python _run_layout.py to_hf   --hf HF_DIR --ckpt DIR --hf-out OUT --direct-out OUT2
    python _run_layout.py forward --hf HF_DIR --tokens tokens.json --out logprobs.json   (.pt: torch.save, for big vocabs)

Every job starts from the same seeded HF-layout weights (model.hf_mapping.init_hf_state), so every
layout trains the same model; rank 0 writes the JSON.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from model import checkpoint, hf_io, hf_mapping, parallel, train
from model.build import build_model
from model.config import ModelConfig, ParallelConfig

SEQ = 32
GBS, MBS = 8, 2
STEPS = 3


def tiny_config(moe: bool) -> ModelConfig:
    return ModelConfig(num_layers=4, vocab_size=512, hidden_size=64, num_attention_heads=4, num_query_groups=2,
                       head_dim=16, ffn_hidden_size=128, moe_ffn_hidden_size=64, num_experts=8 if moe else 0,
                       moe_router_topk=2, max_position_embeddings=SEQ)


def start_tiny(moe: bool, *flags: str, micro_batch: int = MBS, global_batch: int = GBS):
    """The start of a single-process helper that writes JSON: its arguments (--out and `flags`, all required), the
    tiny model's config, and its ParallelConfig with the process groups initialised."""
    ap = argparse.ArgumentParser()
    for f in ("--out", *flags):
        ap.add_argument(f, required=True)
    args = ap.parse_args()
    cfg = tiny_config(moe)
    par = ParallelConfig(micro_batch_size=micro_batch, global_batch_size=global_batch)
    parallel.init(par, cfg, seed=1, seq_length=SEQ)
    return args, cfg, par


def make_sample(seed: int = 0, n: int = 64):
    g = torch.Generator().manual_seed(seed)
    data = torch.randint(0, 512, (n, SEQ + 1), generator=g)

    def sample(i: int) -> dict:
        x = data[i % n]
        return {"tokens": x[:-1], "labels": x[1:], "loss_mask": torch.ones(SEQ), "position_ids": torch.arange(SEQ)}

    return sample


def _write(out: str | None, obj) -> None:
    if out and parallel.is_rank0():
        if out.endswith(".pt"):
            torch.save(obj, out)
        else:
            Path(out).write_text(json.dumps(obj))


def _setup(args, cfg: ModelConfig):
    par = ParallelConfig(tp=args.tp, pp=args.pp, ep=args.ep, sp=args.sp, micro_batch_size=MBS, global_batch_size=GBS,
                         recompute=args.recompute)
    parallel.init(par, cfg, seed=1, seq_length=SEQ)
    m = build_model(cfg, par)
    return par, m


def cmd_train(args) -> None:
    if args.hf:  # a real checkpoint's weights (its own config), seq SEQ
        hf, cfg = hf_io.load_hf(Path(args.hf))
    else:
        cfg = tiny_config(args.moe)
        hf = hf_mapping.init_hf_state(cfg, 3)
    par, m = _setup(args, cfg)
    hf_mapping.load_hf_into(m, hf, cfg)
    ddp, opt, sch = train.setup(m, train.OptimConfig(lr=1e-3, warmup_steps=0), STEPS, GBS)
    sample = make_sample()
    losses = [train.train_step(ddp, opt, sch, train.microbatches(sample, s, par), SEQ, GBS)["loss"]
              for s in range(STEPS)]
    _write(args.out, {"losses": losses})


def _eval_batches(par: ParallelConfig):
    sample = make_sample(seed=7)
    return train.microbatches(sample, 0, par)


def cmd_save(args) -> None:
    cfg = tiny_config(args.moe)
    par, m = _setup(args, cfg)
    hf_mapping.load_hf_into(m, hf_mapping.init_hf_state(cfg, 3), cfg)
    ddp, opt, sch = train.setup(m, train.OptimConfig(lr=1e-2, warmup_steps=0), 2, GBS)
    sample = make_sample()
    for s in range(2):  # move the weights away from the seeded init, so loading the init would not pass
        train.train_step(ddp, opt, sch, train.microbatches(sample, s, par), SEQ, GBS)
    checkpoint.save_model_only(ddp, Path(args.ckpt))
    _write(args.out, {"eval_loss": train.eval_loss(ddp, _eval_batches(par), SEQ)})


def cmd_load(args) -> None:
    cfg = tiny_config(args.moe)
    par, m = _setup(args, cfg)
    hf_mapping.load_hf_into(m, hf_mapping.init_hf_state(cfg, 3), cfg)
    ddp, _, _ = train.setup(m, train.OptimConfig(warmup_steps=0), 1, GBS)
    init_loss = train.eval_loss(ddp, _eval_batches(par), SEQ)
    checkpoint.load_model_only(ddp, Path(args.ckpt))
    _write(args.out, {"eval_loss": train.eval_loss(ddp, _eval_batches(par), SEQ), "init_eval_loss": init_loss})


def cmd_import(args) -> None:
    hf, cfg = hf_io.load_hf(Path(args.hf))
    par = ParallelConfig(tp=args.tp, pp=args.pp, ep=args.ep, sp=args.sp, micro_batch_size=1, global_batch_size=1 * (
        parallel.world_size() // (args.tp * args.pp)))
    parallel.init(par, cfg, seed=1)
    m = build_model(cfg, par)
    hf_mapping.load_hf_into(m, hf, cfg)
    checkpoint.save_model_only(m, Path(args.ckpt))


def cmd_to_hf(args) -> None:
    """Single process: HF -> TP1 model -> HF (direct), and torch_dist checkpoint -> TP1 model -> HF."""
    hf, cfg = hf_io.load_hf(Path(args.hf))
    par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
    parallel.init(par, cfg, seed=1)
    m = build_model(cfg, par)
    hf_mapping.load_hf_into(m, hf, cfg)
    hf_io.save_hf(Path(args.direct_out), hf_mapping.to_hf(checkpoint.full_state_dict(m), cfg), cfg, None)
    with torch.no_grad():  # wipe the weights so only the checkpoint can restore them
        for p in m.parameters():
            p.zero_()
    checkpoint.load_model_only(m, Path(args.ckpt))
    hf_io.save_hf(Path(args.hf_out), hf_mapping.to_hf(checkpoint.full_state_dict(m), cfg), cfg, None)


def cmd_forward(args) -> None:
    """Megatron logits on the given token rows -> full log-softmax rows (as lists)."""
    hf, cfg = hf_io.load_hf(Path(args.hf))
    par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
    parallel.init(par, cfg, seed=1)
    m = build_model(cfg, par).eval()
    hf_mapping.load_hf_into(m, hf, cfg)
    rows = json.loads(Path(args.tokens).read_text())
    out = []
    with torch.no_grad():
        for row in rows:
            ids = torch.tensor([row])
            logits = m(ids, torch.arange(len(row)).unsqueeze(0), None)  # [1, s, v]
            lp = torch.log_softmax(logits[0].double(), -1)
            out.append(lp if args.out.endswith(".pt") else lp.tolist())
    _write(args.out, {"logprobs": out})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("cmd", choices=["train", "save", "load", "import", "to_hf", "forward"])
    ap.add_argument("--moe", action="store_true")
    ap.add_argument("--tp", type=int, default=1)
    ap.add_argument("--pp", type=int, default=1)
    ap.add_argument("--ep", type=int, default=1)
    ap.add_argument("--sp", action="store_true")
    ap.add_argument("--recompute", default="none", choices=["none", "selective", "full"])
    ap.add_argument("--out")
    ap.add_argument("--ckpt")
    ap.add_argument("--hf")
    ap.add_argument("--hf-out")
    ap.add_argument("--direct-out")
    ap.add_argument("--tokens")
    args = ap.parse_args()
    try:
        globals()[f"cmd_{args.cmd}"](args)
    finally:
        parallel.destroy()


if __name__ == "__main__":
    main()
