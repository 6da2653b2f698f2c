"""Supervised fine-tuning on Megatron-Core (TP/PP/EP/DP/SP from the recipe), resumable after kill -9.

    # tiny CPU default
    python -m sft.02_train --in checkpoints/base --data data/sft --out checkpoints/sft
    # 2 processes on the CPU, expert parallel
    torchrun --nproc-per-node 2 -m sft.02_train --in checkpoints/base --data data/sft --out checkpoints/sft --set parallel.ep=2
    # cluster (one node of 8 H200; see sft/recipes/*_h200x8.yaml and `make plan`)
    torchrun --nproc-per-node 8 -m sft.02_train --in checkpoints/base --data data/sft --out checkpoints/sft --recipe qwen3_30b_a3b_h200x8

Loads the base's torch_dist weights at this run's layout (any TP/PP/EP), trains on packed
conversations (sft/01_data.py) with the loss on assistant tokens only and document-causal
attention, warmup + decay, gradient clipping, held-out loss, step checkpoints in `<out>.run/`.
"""
from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m sft.02_train ...")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from model import cli, loop, manifest, recipe, sections  # noqa: E402
from model.config import ConfigError  # noqa: E402
from sft.packing import attention_mask  # noqa: E402


class Packs:
    """Sample i of an HF dataset of packs: a seeded permutation per epoch (resumable by index alone)."""

    def __init__(self, ds, seed: int):
        self.ds, self.seed, self.n = ds, seed, len(ds)
        if self.n == 0:
            raise ConfigError("the SFT dataset has no packs: raise data.num_demos")
        self._perm: dict[int, np.ndarray] = {}

    def row(self, i: int) -> int:
        """The dataset row of sample i (sft/bench_peers.py counts the real tokens of each step with it)."""
        epoch, j = divmod(i, self.n)
        if epoch not in self._perm:
            self._perm = {epoch: np.random.RandomState((self.seed + epoch) % 2**32).permutation(self.n)}
        return int(self._perm[epoch][j])

    def __call__(self, i: int) -> dict:
        row = self.ds[self.row(i)]
        doc = torch.tensor(row["doc_ids"])
        return {"tokens": torch.tensor(row["input_ids"]), "labels": torch.tensor(row["labels"]),
                "loss_mask": torch.tensor(row["loss_mask"], dtype=torch.float32),
                "position_ids": torch.arange(len(doc)), "attention_mask": attention_mask(doc)[0]}


def main(argv=None) -> int:
    ap = cli.parser(__doc__, "sft", sections.LOOP, inp="parent checkpoint (checkpoints/base)",
                    data="packed SFT dataset (sft/01_data.py)", out="output checkpoint directory (checkpoints/sft)")
    cli.recipe_args(ap, "sft", "train.steps=20 --set parallel.tp=2")
    ap.add_argument("--deterministic", action="store_true", help="torch.use_deterministic_algorithms(True)")
    a = ap.parse_args(argv)
    with cli.input_errors():
        cfg = recipe.load_recipe("sft", a.recipe, a.overrides)  # a mistyped key fails before any input is read
        parent = manifest.verify(a.inp)
        data_m = manifest.verify(a.data, stage="sft_data")
        rc = loop.resolve("sft", a.recipe, a.overrides, model_dict=parent["model_config"], loaded=cfg)
        pack_len = data_m["config"]["pack_length"]
        if pack_len != rc.train["seq_length"]:
            raise ConfigError(f"train.seq_length={rc.train['seq_length']} != the data's pack_length={pack_len}: "
                              "rebuild the data or set train.seq_length to match")
    if a.deterministic:
        torch.use_deterministic_algorithms(True)

    def prepare(_run_dir: Path):
        import datasets

        return (Packs(datasets.load_from_disk(str(a.data / "train")), rc.train["seed"]),
                Packs(datasets.load_from_disk(str(a.data / "validation")), rc.train["seed"] + 1))

    def init(model):
        from model import checkpoint

        checkpoint.load_model_only(model, a.inp / "mcore")

    data = {"data": {"path": str(a.data), "manifest_sha256": manifest.manifest_hash(a.data)}}
    return loop.run(rc, stage="sft", out=a.out, tokenizer_dir=a.inp / "tokenizer", parent=a.inp,
                    prepare=prepare, init=init, extra_manifest=data)


if __name__ == "__main__":
    sys.exit(main())
