"""Quick evaluation: pass rate per family on training and held-out domains, through vLLM.

    python -m sft.03_eval --in checkpoints/sft  --data data/domains --out results/sft/eval.json
    python -m sft.03_eval --in checkpoints/base --data data/domains --out results/base/eval.json

The project's one evaluation protocol (domains/evaluate.py) on an in-process vLLM engine, greedy: the first
--per-domain tasks of each domain in the datasets' eval split, multi-turn rollouts, each domain's verifier (code
and terminal tasks in the sandbox pool); pass rate (Wilson ci95), mean turns, retried tool calls per family and
split. Target and infra errors (verifier crashes, tools that still fail after their retries) are counted and
left out of the pass rates, never scored as fails. RL's periodic eval is the same function on the same items.
"""
from __future__ import annotations

import sys
import time

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m sft.03_eval ...")

from model import cli, manifest, results  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__, inp="checkpoint directory with hf/", data="domains datasets directory (has eval/)",
                    out="results JSON path")
    ap.add_argument("--per-domain", type=int, default=2, help="eval tasks per domain")
    ap.add_argument("--max-tokens", type=int, default=192, help="tokens per assistant turn")
    ap.add_argument("--max-model-len", type=int, default=None, help="vLLM context length (default: the model's)")
    ap.add_argument("--sandbox-slots", type=int, default=8,
                    help="sandbox pool size: tool rollouts holding a sandbox session run this many at a time")
    a = ap.parse_args(argv)
    with cli.input_errors():
        m = manifest.verify(a.inp)
        manifest.verify(a.data, stage="data")
    from domains import evaluate
    from domains.sandboxing import available, make_pool
    from model.vllm_engine import Engine

    items = evaluate.eval_items(a.data, a.per_domain)
    pool = make_pool(a.sandbox_slots) if available() else None
    t0 = time.perf_counter()
    try:
        target = evaluate.EngineTarget(Engine(a.inp / "hf", max_model_len=a.max_model_len), m["stage"])
        recs = evaluate.run(target, items, pool, max_tokens=a.max_tokens, slots=a.sandbox_slots,
                            verify={"sandbox_slots": a.sandbox_slots})
    finally:
        if pool is not None:
            pool.close()
    table = evaluate.summarize(recs)
    results.write(a.out, "eval.quick", {"stage": m["stage"], "per_family": table, "per_domain_tasks": a.per_domain,
                                        "protocol": {"n": 1, "temperature": 0.0, "max_tokens": a.max_tokens},
                                        "items": recs,
                                        "seconds": time.perf_counter() - t0}, measured=a.inp)
    print(f"{'family':<12} {'train':>14} {'heldout':>14}")
    for fam, sp in table.items():
        cell = {s: (f"{v['pass_rate']:.1%} ({v['tasks']})" if v["pass_rate"] is not None else "n/a") for s, v in sp.items()}
        print(f"{fam:<12} {cell.get('train', '-'):>14} {cell.get('heldout', '-'):>14}")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
