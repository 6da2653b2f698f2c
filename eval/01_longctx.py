"""Long-context suite (RULER-style): exact-length tasks from 1K to 1M tokens, exact-match scores, effective length.

    # tiny CPU run on a checkpoint (in-process vLLM)
    python -m eval.01_longctx --in checkpoints/sft --out results/eval/longctx_sft.json --recipe tiny_cpu
    # micro, as the tests run it
    python -m eval.01_longctx --in /work/chain_micro/sft --out /tmp/lc.json --recipe micro_cpu
    # cluster: a served 1M-context model (see eval/recipes/longctx_1m_h200x8.yaml for the vLLM server settings)
    python -m eval.01_longctx --endpoint http://127.0.0.1:8000/v1 --tokenizer /models/qwen/ \
        --out results/eval/longctx_1m.json --recipe longctx_1m_h200x8
    # RoPE override on the fly (what 05_rope_study.py runs): yarn x4 relative to 256 trained tokens
    python -m eval.01_longctx --in checkpoints/base --rope yarn:4 --rope-original 256 --out /tmp/yarn4.json

Reports per task x length, a length x depth grid and the effective length (longest length whose mean score
>= 85.6, RULER's threshold). Target errors (timeouts, bad bodies, over-long prompts) are recorded per task.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.01_longctx ...")

from eval import cli  # noqa: E402
from model import results  # noqa: E402
from model.cli import input_errors  # noqa: E402
from model.config import ConfigError  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--rope", default=None, help="RoPE override for --in: none | linear:F | yarn:F")
    ap.add_argument("--rope-original", type=int, default=None,
                    help="training length the --rope factor is relative to (default: max_position_embeddings)")
    a = ap.parse_args(argv)
    with input_errors(ValueError, FileNotFoundError):
        cfg = cli.resolve(a, need_tokenizer=True)
        lc = cfg["longctx"]
        from eval import longctx, rope

        longctx.plan(lc)
        kind, factor = rope.parse(a.rope) if a.rope else (None, 1.0)
        if a.rope and not a.inp:
            raise ConfigError("--rope rewrites a checkpoint's config: use it with --in, not --endpoint")
        from eval.haystack import Tokens

        tok = Tokens.load(a.tokenizer)
    from eval import targets

    with tempfile.TemporaryDirectory(prefix="eval-rope-") as tmp:
        rope_info = None
        if kind is not None:
            import json

            conf = json.loads((a.inp / "hf" / "config.json").read_text())
            original = a.rope_original or conf["max_position_embeddings"]
            longest = max(int(n) for n in lc["lengths"])
            a.max_model_len = max(a.max_model_len or 0, longest + int(lc.get("max_tokens", 64)))
            variant = rope.make_variant(a.inp / "hf", Path(tmp) / "hf", kind, factor, original, a.max_model_len)
            limit = rope.supported_len(kind, factor, original)
            if limit is not None:  # longer prompts are recorded as errors (over max_model_len), never run past the cache
                a.max_model_len = min(a.max_model_len, limit)
            rope_info = {"type": kind, "factor": factor, "original_max_position_embeddings": original,
                         "supported_len": limit, "max_model_len": a.max_model_len}
            target = targets.VLLMTarget(variant, max_model_len=a.max_model_len, dtype=a.dtype,
                                        kv_cache_gib=a.kv_cache_gib, tensor_parallel_size=a.tp)
        else:
            target = targets.make(a)
        out = longctx.run(target, tok, lc)
    print(longctx.table(out["summary"]))
    results.write(a.out, "eval.longctx", {"target": target.name, "rope": rope_info, **out},
                  measured=a.inp if a.inp else None)
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
