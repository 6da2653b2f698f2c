"""Helper run in its own process (vLLM in-process mode changes threads and LD_PRELOAD of its process):
prompt logprobs of given token rows from vLLM (model/vllm_engine.Engine.score), float32, as JSON
{"logprobs": [[lp of token 1, ...], ...]}.

    python _vllm_logprobs.py --hf HF_DIR --tokens tokens.json --out out.json
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path



def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from model.vllm_engine import Engine

    rows = json.loads(Path(args.tokens).read_text())
    result = Engine(Path(args.hf), max_model_len=128, kv_cache_gib=1).score(rows)  # T=1: the model's own logprobs
    assert [len(r) for r in result] == [len(r) - 1 for r in rows]
    Path(args.out).write_text(json.dumps({"logprobs": result}))


if __name__ == "__main__":
    main()
