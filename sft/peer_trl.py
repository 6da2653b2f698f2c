"""The peer arm of `make bench-peers` (SFT): TRL's SFTTrainer on an HF model and a dataset of documents.

    .venv-peers/bin/python sft/peer_trl.py --model checkpoints/base/hf --docs DIR --packing none --steps 20

Runs in TRL's own virtual environment (`make peers-venv`), never the project's: it imports only torch,
transformers, datasets and trl. DIR is an HF dataset of documents (input_ids, completion_mask), written by
sft/bench_peers.py from the project's SFT packs. Prints one line "PEER <json>" per optimizer step, flushed:
{"step": k, "real_tokens": n} (non-pad tokens the trainer consumed since the last line, its own count:
num_input_tokens_seen "non_padding"; the orchestrator timestamps the lines), then {"isolation": ...}: the largest
logit difference between two documents as this setting packs and collates them and each run alone, the trained
weights in float32 (0 = documents never see each other), and {"done": ...} with the versions.
"""
from __future__ import annotations

import argparse
import json
import sys


MARK = "PEER "


def emit(obj: dict) -> None:
    print(MARK + json.dumps(obj), flush=True)  # marked: TRL prints dicts of its own


def isolation(model, batch: dict, docs: list[list[int]]) -> float:
    """Max |logit in the collated batch - logit of the document run alone| over `docs`, each found by its token ids
    in the batch's rows (0 = documents never see each other). Run with the trainer's model config: TRL sets
    use_cache=False, under which transformers 5.x reads documents from restarting position ids."""
    import torch

    kw = {k: batch[k] for k in ("position_ids", "attention_mask") if k in batch}
    worst = 0.0
    with torch.no_grad():
        full = model(input_ids=batch["input_ids"], **kw).logits
        rows = batch["input_ids"].tolist()
        for doc in docs:
            n = len(doc)
            at = next(((r, s) for r, row in enumerate(rows) for s in range(len(row) - n + 1) if row[s:s + n] == doc),
                      None)
            if at is None:
                raise RuntimeError(f"a probe document of {n} tokens is not in the collated batch")
            alone = model(input_ids=torch.tensor([doc])).logits[0]
            worst = max(worst, (full[at[0], at[1]:at[1] + n] - alone).abs().max().item())
    return worst


def probe(trl, model, tok, kw: dict, ds) -> float:
    """Isolation of this setting, measured: the two shortest of the first 100 documents (they fit one row
    together), prepared and collated by a trainer of the same config, then `isolation`."""
    import datasets

    head = ds.select(range(min(len(ds), 100)))
    docs = [head[i] for i in sorted(range(len(head)), key=lambda i: len(head[i]["input_ids"]))[:2]]
    two = datasets.Dataset.from_list(docs)
    t = trl.SFTTrainer(model=model, args=trl.SFTConfig(**kw), train_dataset=two, processing_class=tok)
    batch = t.data_collator([t.train_dataset[i] for i in range(len(t.train_dataset))])
    return isolation(model.eval(), batch, [d["input_ids"] for d in docs])


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
    ap.add_argument("--dtype", choices=["fp32", "bf16"], default="fp32", help="compute dtype (bf16: autocast over fp32 weights)")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the trainer")
    ap.add_argument("--compile", action="store_true", help="torch_compile=True: the Trainer compiles the model (Inductor)")
    ap.add_argument("--out", default="/tmp/peer_trl_sft", help="TRL's output_dir (nothing is saved)")
    ap.add_argument("--log-loss", action="store_true",
                    help="log the training loss of every step ({\"step\", \"loss\"} lines; off in timed arms)")
    a = ap.parse_args(argv)

    import datasets
    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    torch.set_num_threads(a.threads)
    ds = datasets.load_from_disk(a.docs)
    tok = AutoTokenizer.from_pretrained(a.model)
    # fp32 weights either way; bf16 = the Trainer's bf16 autocast, as ours keeps fp32 main params under bf16 compute
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="sdpa")
    kw = dict(max_length=a.max_length, per_device_train_batch_size=a.batch, gradient_accumulation_steps=a.accum,
              max_steps=a.steps, learning_rate=a.lr, lr_scheduler_type="constant",
              logging_steps=1 if a.log_loss else 10**9, report_to=[],
              use_cpu=True, save_strategy="no", completion_only_loss=True, dataloader_num_workers=0,
              output_dir=a.out, bf16=a.dtype == "bf16", seed=a.seed, disable_tqdm=True,
              include_num_input_tokens_seen="non_padding", torch_compile=a.compile)
    kw.update(packing=False) if a.packing == "none" else kw.update(packing=True, packing_strategy=a.packing)
    seen = {"tokens": 0}

    class Lines(TrainerCallback):
        def on_step_end(self, args, state, control, **_):
            emit({"step": state.global_step, "real_tokens": state.num_input_tokens_seen - seen["tokens"]})
            seen["tokens"] = state.num_input_tokens_seen

        def on_log(self, args, state, control, logs=None, **_):
            if a.log_loss and logs and "loss" in logs:
                emit({"step": state.global_step, "loss": logs["loss"]})

    trainer = trl.SFTTrainer(model=model, args=trl.SFTConfig(**kw), train_dataset=ds, processing_class=tok,
                             callbacks=[Lines()])
    emit({"start": True})
    trainer.train()
    # in float32 whatever the arm's dtype: accelerate's bf16 wraps the trained model's forward in autocast, whose
    # rounding (0.25-0.7 logits on the 135M) would read as leakage; a float32 copy judges the packing alone
    plain = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="sdpa")
    plain.load_state_dict(trainer.model.state_dict())
    emit({"isolation": {"max_abs_logit_difference": probe(trl, plain, tok, kw, ds), "dtype": "float32",
                        "how": "two documents packed by this setting vs each alone, the trained weights in float32"}})
    emit({"done": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                   "datasets": datasets.__version__, "rows": len(trainer.train_dataset), "documents": len(ds),
                   "settings": {k: v for k, v in kw.items() if k not in ("output_dir", "report_to")}}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
