"""Per-document loss of a real SFT pack vs each document alone, through the trainer's own data and loss path.

    python sft/tests/_packed_step_check.py BASE_CKPT SFT_DATA     (prints one JSON line)

Samples come from sft/02_train.py's `Packs` (which builds the document mask), batches from
model/train.microbatches and losses from model/train.run_batches (the forward and loss of train_step). For
each document of a multi-document pack the loss mask keeps only that document's tokens; the same document
packed alone (sft/packing.pack) must give the same loss. Dropping the document mask anywhere on that path
lets later documents attend to earlier ones and changes their losses.
"""
from __future__ import annotations

import importlib
import json
import sys
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[2]


def main(base: Path, data: Path) -> None:
    import datasets

    from model import checkpoint, parallel, train
    from model.build import build_model
    from model.config import ModelConfig, ParallelConfig
    from sft.packing import pack

    sft_train = importlib.import_module("sft.02_train")

    ds = datasets.load_from_disk(str(data / "train"))
    row = max(ds, key=lambda r: len({d for d, m in zip(r["doc_ids"], r["loss_mask"]) if m}))  # most trained docs
    seq = len(row["input_ids"])
    mcfg = ModelConfig.from_dict(json.loads((base / "model_config.json").read_text()))
    par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
    parallel.init(par, mcfg, seed=0, seq_length=seq)
    model = build_model(mcfg, par)
    ddp, _, _ = train.setup(model, train.OptimConfig(warmup_steps=0), 1, 1)
    checkpoint.load_model_only(model, base / "mcore")

    def loss(r: dict) -> float:
        sample = sft_train.Packs(datasets.Dataset.from_list([r]), seed=0)
        with torch.no_grad():
            return train.run_batches(ddp, train.microbatches(sample, 0, par), seq, forward_only=True)

    docs = sorted({d for d, m in zip(row["doc_ids"], row["loss_mask"]) if m})
    packed, alone = [], []
    for d in docs:
        at = [i for i, x in enumerate(row["doc_ids"]) if x == d]
        packed.append(loss({**row, "loss_mask": [m if x == d else 0 for m, x in zip(row["loss_mask"], row["doc_ids"])]}))
        doc = {k: [row[k][i] for i in at] for k in ("input_ids", "labels", "loss_mask")}
        (single,), _ = pack([doc], seq, pad_id=0)  # pads after the document: causal attention never sees them
        alone.append(loss(single))
    parallel.destroy()
    print(json.dumps({"docs": len(docs), "first_token": [min(i for i, x in enumerate(row["doc_ids"]) if x == d)
                                                         for d in docs], "packed": packed, "alone": alone}))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]))
