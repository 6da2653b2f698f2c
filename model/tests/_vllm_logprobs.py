"""Helper run in its own process (vLLM in-process mode changes threads and LD_PRELOAD of its process):
prompt logprobs of given token rows from vLLM, float32, as JSON {"logprobs": [[lp of token 1, ...], ...]}.

    python _vllm_logprobs.py --hf HF_DIR --tokens tokens.json --out out.json
"""
from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--hf", required=True)
    ap.add_argument("--tokens", required=True)
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from vllm import LLM, SamplingParams
    from vllm.inputs import TokensPrompt

    rows = json.loads(Path(args.tokens).read_text())
    llm = LLM(model=args.hf, dtype="float32", enforce_eager=True, max_model_len=128, seed=0,
              gpu_memory_utilization=0.5)
    outs = llm.generate([TokensPrompt(prompt_token_ids=r) for r in rows],
                        SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=0.0))
    result = []
    for row, o in zip(rows, outs):
        assert list(o.prompt_token_ids) == row
        plp = o.prompt_logprobs
        assert plp[0] is None and len(plp) == len(row)
        result.append([plp[i][row[i]].logprob for i in range(1, len(row))])
    Path(args.out).write_text(json.dumps({"logprobs": result}))


if __name__ == "__main__":
    main()
