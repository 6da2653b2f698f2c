"""Benchmark: seconds to generate each long-context task at 1M tokens, against tokenizing its prompt once.

    python -m eval.bench_longctx --tokenizer checkpoints/base/hf --out results/bench/longctx_gen.json
    python -m eval.bench_longctx --tokenizer /work/chain_micro/base/hf --length 131072 --out /tmp/lcb.json

Baseline (same run, same prompt): one full tokenization of the generated prompt, the least a generator that
re-tokenizes to hit its length would pay per attempt. The tokenization also gives the real token count, so
the file records requested vs real length at 1M for every task. `pools_s` is the one-off, per-tokenizer cost of
tokenizing the filler pools (paid by the first task of a process).
"""
from __future__ import annotations

import sys
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.bench_longctx ...")

from model import cli  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__, tokenizer="directory with tokenizer.json")
    ap.add_argument("--length", type=int, default=1_000_000, help="requested prompt tokens")
    ap.add_argument("--tasks", default="", help="comma list (default: all)")
    ap.add_argument("--out", type=Path, required=True, help="results JSON path")
    a = ap.parse_args(argv)
    from eval import ruler
    from eval.haystack import Pools, Tokens
    from model import results

    with cli.input_errors(FileNotFoundError):
        tok = Tokens.load(a.tokenizer)
    t0 = time.perf_counter()
    Pools.get(tok)
    pools_s = time.perf_counter() - t0
    rows = {}
    for name in [t for t in a.tasks.split(",") if t] or sorted(ruler.TASKS):
        t0 = time.perf_counter()
        t = ruler.build(name, a.length, 0.5, 0, tok, verify_max=0)
        gen_s = time.perf_counter() - t0
        text = t.prompt()
        t0 = time.perf_counter()
        real = tok.count(text)
        tok_s = time.perf_counter() - t0
        rows[name] = {"generate_s": round(gen_s, 3), "tokenize_once_s": round(tok_s, 3),
                      "ratio_vs_tokenize_once": round(gen_s / tok_s, 4), "requested": a.length,
                      "counted": t.prompt_tokens, "real": real, "rel_error": (real - a.length) / a.length}
        print(f"{name:<16} generate {gen_s:6.2f}s  tokenize once {tok_s:6.2f}s  real {real} "
              f"({rows[name]['rel_error']:+.5f})")
    worst = max(r["generate_s"] for r in rows.values())
    results.write(a.out, "bench.longctx_gen", {"length": a.length, "pools_s": round(pools_s, 3),
                                               "worst_generate_s": worst, "worst_first_task_s": round(worst + pools_s, 3),
                                               "baseline": "one full tokenization of the same prompt",
                                               "tasks": rows, "note": "shared 2-core machine: absolute times are noisy"})
    print(f"pools {pools_s:.2f}s (once per tokenizer); worst task {worst:.2f}s -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
