"""Quick evaluation: pass rate per family on training and held-out domains, through vLLM.

    python sft/03_eval.py --in checkpoints/sft  --data data/domains --out results/sft/eval.json
    python sft/03_eval.py --in checkpoints/base --data data/domains --out results/base/eval.json

Runs every task of the domains export's eval split (at most --per-domain per domain) as a multi-turn
rollout on an in-process vLLM engine (greedy), verifies it with the domain's verifier (code and
terminal tasks in the sandbox pool) and reports pass rate and mean turns per family and split.
Infra errors (verifier crashes, tools that still fail after their retries) are counted and excluded from the
pass rates, never scored as fails; retried tool calls are counted per family.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from model import manifest, results  # noqa: E402


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="inp", type=Path, required=True, help="checkpoint directory with hf/")
    ap.add_argument("--data", type=Path, required=True, help="domains export directory (has eval/)")
    ap.add_argument("--out", type=Path, required=True, help="results JSON path")
    ap.add_argument("--per-domain", type=int, default=2, help="eval tasks per domain")
    ap.add_argument("--max-tokens", type=int, default=192, help="tokens per assistant turn")
    ap.add_argument("--max-model-len", type=int, default=None, help="vLLM context length (default: the model's)")
    ap.add_argument("--sandbox-slots", type=int, default=8,
                    help="sandbox pool size: terminal tool rollouts run in waves of this size (8 shells are cheap)")
    a = ap.parse_args(argv)
    try:
        m = manifest.verify(a.inp)
        manifest.verify(a.data, stage="data")
    except manifest.CheckpointError as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    import datasets

    import domains
    from domains import chat
    from domains.rollout import stats as rollout_stats
    from domains.sandboxing import available, make_pool
    from model.vllm_engine import Engine

    rows = datasets.load_from_disk(str(a.data / "eval"))
    seen: dict[str, int] = defaultdict(int)
    items = []
    for r in rows:
        if seen[r["domain"]] < a.per_domain:
            seen[r["domain"]] += 1
            items.append((domains.get(r["domain"]), domains.Task.from_dict(json.loads(r["task"]))))
    pool = make_pool(a.sandbox_slots) if available() else None
    t0 = time.perf_counter()
    eng = Engine(a.inp / "hf", max_model_len=a.max_model_len)

    def generate_batch(convs):
        prompts = [chat.render(c, add_generation_prompt=True) for c in convs]
        return [o[0].text for o in eng.generate(prompts, max_tokens=a.max_tokens)]

    try:
        # tool environments in the sandbox hold a pool slot each: run those in waves of the pool size
        holds = [i for i, (d, t) in enumerate(items) if d.needs_sandbox and t.tools]
        waves = [[i for i in range(len(items)) if i not in set(holds)]]
        waves += [holds[k:k + a.sandbox_slots] for k in range(0, len(holds), a.sandbox_slots)]
        trajs: list = [None] * len(items)
        for wave in waves:
            for i, tr in zip(wave, domains.rollout_batch([items[i] for i in wave], generate_batch, pool)):
                trajs[i] = tr
        rewards = [d.verify(t, tr, pool=pool) for (d, t), tr in zip(items, trajs)]
    finally:
        if pool is not None:
            pool.close()
    agg: dict[tuple[str, str], dict] = defaultdict(lambda: {"tasks": 0, "passed": 0, "infra_errors": 0, "turns": 0,
                                                            "tool_retries": 0})
    for (d, t), tr, rw in zip(items, trajs, rewards):
        for key in ((t.family, d.split), ("all", d.split)):
            g = agg[key]
            g["tasks"] += 1
            g["tool_retries"] += rollout_stats(tr)["tool_retries"]  # sandbox failures retried (ToolEnv)
            g["turns"] += sum(1 for x in tr if x["role"] == "assistant")
            if rw.infra_error:
                g["infra_errors"] += 1
            elif rw.passed:
                g["passed"] += 1
    table = {}
    for (fam, split), g in sorted(agg.items()):
        scored = g["tasks"] - g["infra_errors"]
        table.setdefault(fam, {})[split] = {"tasks": g["tasks"], "passed": g["passed"], "infra_errors": g["infra_errors"],
                                            "tool_retries": g["tool_retries"],
                                            "pass_rate": g["passed"] / scored if scored else None,
                                            "mean_turns": g["turns"] / g["tasks"]}
    results.write(a.out, "eval.quick", {"stage": m["stage"], "per_family": table, "per_domain_tasks": a.per_domain,
                                        "seconds": time.perf_counter() - t0}, measured=a.inp)
    print(f"{'family':<12} {'train':>14} {'heldout':>14}")
    for fam, sp in table.items():
        cell = {s: (f"{v['pass_rate']:.1%} ({v['tasks']})" if v["pass_rate"] is not None else "n/a") for s, v in sp.items()}
        print(f"{fam:<12} {cell.get('train', '-'):>14} {cell.get('heldout', '-'):>14}")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
