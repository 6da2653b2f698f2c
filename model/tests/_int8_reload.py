"""Helper run in its own process: an int8 (W8A8) vLLM engine reloaded in place against a fresh one.

    python _int8_reload.py ROOT --out out.json

Writes two tiny dense checkpoints A and B (different weights), W8A8-quantized as the RL int8 engine's syncs are
(model/quantize.py, this machine's int8 range and activation dtype). Scores fixed token rows with a fresh engine on
B, and with an engine started on A then given B in place: in memory (SharedTensors, RL's sync) and from B's
directory; then A again in memory. JSON: {"fresh_a", "fresh_b", "mem_b", "dir_b", "back_a"} logprob rows.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("root")
    ap.add_argument("--out", required=True)
    args = ap.parse_args()
    from model import hf_io, quantize
    from model.tests._hf_fixtures import VOCAB, make_tokenizer, nontrivial_weights, tiny_hf_config
    from model.vllm_engine import EngineProcess, SharedTensors

    root, cfg = Path(args.root), tiny_hf_config(moe=False)
    tok = make_tokenizer(root / "tokenizer")
    quant = {"scheme": "w8a8_int8", "experts": False, "int_max": quantize.int8_weight_max()[0]}
    dirs, qt = {}, {}
    for name, seed in (("a", 5), ("b", 6)):
        src = root / f"hf_{name}"
        hf_io.save_hf(src, nontrivial_weights(cfg, seed), cfg, tok)
        qt[name] = quantize.quantize_tensors(hf_io.load_hf(src)[0], **quant)[0]
        dirs[name] = root / f"q_{name}"
        quantize.save_quantized(qt[name], src, dirs[name], "w8a8_int8", False)
    g = torch.Generator().manual_seed(0)
    rows = [torch.randint(3, VOCAB, (40,), generator=g).tolist() for _ in range(3)]
    kw = {"dtype": quantize.serve_dtype()[0], "max_model_len": 128, "kv_cache_gib": 1}
    res = {}
    with EngineProcess(dirs["b"], **kw) as eng:
        res["fresh_b"] = eng.score(rows)
    with EngineProcess(dirs["a"], **kw) as eng:
        res["fresh_a"] = eng.score(rows)
        eng.load_weights(SharedTensors(qt["b"]).fill(qt["b"]))
        res["mem_b"] = eng.score(rows)
        eng.reload_weights(dirs["b"])
        res["dir_b"] = eng.score(rows)
        eng.load_weights(SharedTensors(qt["a"]).fill(qt["a"]))
        res["back_a"] = eng.score(rows)
    Path(args.out).write_text(json.dumps(res))


if __name__ == "__main__":
    main()
