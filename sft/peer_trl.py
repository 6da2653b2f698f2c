"""The peer arm of `make bench-peers` (SFT): TRL's SFTTrainer on an HF model and a dataset of documents.

    .venv-peers/bin/python sft/peer_trl.py --model checkpoints/base/hf --docs DIR --packing none --steps 20

Runs in TRL's own virtual environment (`make peers-venv`), never the project's: it imports only torch,
transformers, datasets and trl. DIR is an HF dataset of documents (input_ids, completion_mask), written by
sft/bench_peers.py from the project's SFT packs. Prints one line "PEER <json>" per optimizer step, flushed:
{"step": k, "real_tokens": n} (non-pad tokens the trainer consumed since the last line, its own count:
num_input_tokens_seen "non_padding"; the orchestrator timestamps the lines), then {"isolation": ...}: the largest logit difference between one collated batch and each of its
documents run alone (0 = documents never see each other), and {"done": ...} with the versions.
"""
from __future__ import annotations

import argparse
import json
import sys


MARK = "PEER "


def emit(obj: dict) -> None:
    print(MARK + json.dumps(obj), flush=True)  # marked: TRL prints dicts of its own


def isolation(model, batch: dict) -> float:
    """Max |logit(batch) - logit(document alone)| over the documents of row 0 of a collated batch, run with the
    trainer's model config (TRL sets use_cache=False, under which transformers 5.x reads documents from restarting
    position ids; with a cache it does not)."""
    import torch

    ids = batch["input_ids"][:1]
    pos = batch.get("position_ids")
    am = batch.get("attention_mask")
    with torch.no_grad():
        kw = {"position_ids": pos[:1]} if pos is not None else {}
        if am is not None:
            kw["attention_mask"] = am[:1]
        full = model(input_ids=ids, **kw).logits[0]
        # documents: runs of position ids restarting at 0 (padding-free) or, without position ids, the whole row
        p = pos[0].tolist() if pos is not None else list(range(ids.shape[1]))
        starts = [i for i, x in enumerate(p) if x == 0] + [len(p)]
        worst = 0.0
        n = int(am[0].sum()) if am is not None else len(p)  # right padding: real tokens first
        for s, e in zip(starts, starts[1:]):
            e = min(e, n)
            if e - s < 2:
                continue
            alone = model(input_ids=ids[:, s:e]).logits[0]
            worst = max(worst, (full[s:e] - alone).abs().max().item())
    return worst


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF model directory (config.json, safetensors, tokenizer)")
    ap.add_argument("--docs", required=True, help="HF dataset of documents: input_ids, completion_mask")
    ap.add_argument("--packing", choices=["none", "bfd", "wrapped"], default="none",
                    help="none: one document per row, padded; bfd/wrapped: TRL's packing strategies")
    ap.add_argument("--steps", type=int, default=20, help="optimizer steps")
    ap.add_argument("--max-length", type=int, default=512, help="tokens per row (the SFT recipe's seq_length)")
    ap.add_argument("--batch", type=int, default=2, help="rows per micro batch (per_device_train_batch_size)")
    ap.add_argument("--accum", type=int, default=2, help="micro batches per optimizer step")
    ap.add_argument("--lr", type=float, default=1e-3, help="peak learning rate")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="parameter and compute dtype")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the trainer")
    ap.add_argument("--out", default="/tmp/peer_trl_sft", help="TRL's output_dir (nothing is saved)")
    a = ap.parse_args(argv)

    import datasets
    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    torch.set_num_threads(a.threads)
    ds = datasets.load_from_disk(a.docs)
    tok = AutoTokenizer.from_pretrained(a.model)
    dtype = torch.bfloat16 if a.dtype == "bf16" else torch.float32
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=dtype, attn_implementation="sdpa")
    kw = dict(max_length=a.max_length, per_device_train_batch_size=a.batch, gradient_accumulation_steps=a.accum,
              max_steps=a.steps, learning_rate=a.lr, lr_scheduler_type="constant", logging_steps=10**9, report_to=[],
              use_cpu=True, save_strategy="no", completion_only_loss=True, dataloader_num_workers=0,
              output_dir=a.out, bf16=a.dtype == "bf16", seed=a.seed, disable_tqdm=True,
              include_num_input_tokens_seen="non_padding")
    kw.update(packing=False) if a.packing == "none" else kw.update(packing=True, packing_strategy=a.packing)
    seen = {"tokens": 0}

    class Lines(TrainerCallback):
        def on_step_end(self, args, state, control, **_):
            emit({"step": state.global_step, "real_tokens": state.num_input_tokens_seen - seen["tokens"]})
            seen["tokens"] = state.num_input_tokens_seen

    trainer = trl.SFTTrainer(model=model, args=trl.SFTConfig(**kw), train_dataset=ds, processing_class=tok,
                             callbacks=[Lines()])
    emit({"start": True})
    trainer.train()
    batch = trainer.data_collator([trainer.train_dataset[i] for i in range(a.batch)])
    emit({"isolation": {"max_abs_logit_difference": isolation(trainer.model.eval(), batch),
                        "position_ids": "position_ids" in batch, "attention_mask": "attention_mask" in batch}})
    emit({"done": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                   "datasets": datasets.__version__, "rows": len(trainer.train_dataset), "documents": len(ds),
                   "settings": {k: v for k, v in kw.items() if k not in ("output_dir", "report_to")}}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
