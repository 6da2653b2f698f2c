"""Load a torch_dist checkpoint into models of another architecture; write each outcome as JSON.

    python _load_mismatch.py --ckpt DIR --out outcomes.json

The checkpoint is saved from an untied dense model; it is then loaded into the same architecture, a model with
tied embeddings (no output layer: the checkpoint holds a tensor it has no place for) and a MoE model.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from model import checkpoint, parallel
from model.build import build_model
from model.config import ModelConfig, ParallelConfig
from model.manifest import CheckpointError


def config(**kw) -> ModelConfig:
    return ModelConfig(**{**dict(num_layers=2, vocab_size=256, hidden_size=64, num_attention_heads=4,
                                 num_query_groups=2, head_dim=16, ffn_hidden_size=96, moe_ffn_hidden_size=32,
                                 max_position_embeddings=32), **kw})


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--ckpt", required=True)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
    parallel.init(par, config(), seed=0, seq_length=32)
    try:
        checkpoint.save_model_only(build_model(config(), par), Path(a.ckpt))
        outcomes = {}
        for name, cfg in {"same": config(), "tied": config(tie_word_embeddings=True), "moe": config(num_experts=4)}.items():
            try:
                checkpoint.load_model_only(build_model(cfg, par), Path(a.ckpt))
                outcomes[name] = "loaded"
            except CheckpointError as e:
                outcomes[name] = f"CheckpointError: {e}"
        Path(a.out).write_text(json.dumps(outcomes))
    finally:
        parallel.destroy()


if __name__ == "__main__":
    main()
