"""Pretrain the tiny MoE base on Megatron-Core (CPU: gloo; GPU: nccl), resumable after kill -9.

    # tiny CPU default (one process, ~8 min on 2 cores)
    python -m pretrain_ckpt.03_pretrain --corpus data/corpus --tokenizer checkpoints/tokenizer --out checkpoints/base
    # same run split over 2 processes (TP=2 / PP=2 / EP=2)
    torchrun --nproc-per-node 2 -m pretrain_ckpt.03_pretrain ... --set parallel.ep=2
    # cluster: a recipe for the hardware, launched by torchrun on every node
    torchrun --nnodes 4 --nproc-per-node 8 -m pretrain_ckpt.03_pretrain ... --recipe <name>_h200x8

Step checkpoints (model, optimizer, scheduler, RNG, step) go to `<out>.run/` every `train.save_every`
steps; rerunning the same command resumes from the newest complete one. The output directory
(`mcore/`, `hf/`, `config.yaml`, `manifest.json`) appears atomically when training is done.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m pretrain_ckpt.03_pretrain ...")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from model import cli, loop, manifest, sections  # noqa: E402
from model.config import ConfigError  # noqa: E402


def parse(argv=None):
    ap = cli.parser(__doc__, "pretrain_ckpt", sections.LOOP, corpus="corpus dataset (pretrain_ckpt/01_corpus.py)",
                    tokenizer="tokenizer dir (pretrain_ckpt/02_tokenizer.py)",
                    out="output checkpoint directory (e.g. checkpoints/base)")
    cli.recipe_args(ap, "pretrain_ckpt", "train.steps=20 --set parallel.tp=2")
    ap.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    return ap.parse_args(argv)


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
    with cli.input_errors():
        rc = loop.resolve("pretrain_ckpt", args.recipe, args.overrides)
        for d, stage in ((args.corpus, "corpus"), (args.tokenizer, "tokenizer")):
            manifest.verify(d, stage=stage)
    if args.deterministic:
        torch.use_deterministic_algorithms(True)
    seq, seed = rc.train["seq_length"], rc.train["seed"]

    def prepare(run_dir: Path):
        paths = tokenize_corpus(args.corpus, args.tokenizer, run_dir)
        return (Stream(np.load(paths["train"], mmap_mode="r"), seq, seed),
                Stream(np.load(paths["validation"], mmap_mode="r"), seq, seed + 1))

    def init(model):
        from model import hf_mapping

        hf_mapping.load_hf_into(model, hf_mapping.init_hf_state(rc.model, seed), rc.model)

    corpus = {"corpus": {"path": str(args.corpus), "manifest_sha256": manifest.manifest_hash(args.corpus)}}
    return loop.run(rc, stage="base", out=args.out, tokenizer_dir=args.tokenizer, parent=args.tokenizer,
                    prepare=prepare, init=init, extra_manifest=corpus)


if __name__ == "__main__":
    sys.exit(main())
