"""Benchmark: fast variant (quantized target + speculative decoding) vs the standard variant, same run.

    # tiny CPU (after `make fast`): standard = the fast variant's parent
    python -m serving.bench_fast --fast checkpoints/fast --data data/domains --out results/bench/fast.json
    # micro, quick (no pass-rate eval), with the quant-only and spec-only ablations
    python -m serving.bench_fast --fast /tmp/fast --data /tmp/domains --out /tmp/fast.json --reps 2 --no-quality --ablations
    # cluster: the same script on a GPU node (batches 1, 8, 64 by default)
    python -m serving.bench_fast --fast checkpoints/fast --data data/domains --out results/bench/fast.json --reps 5

Each variant runs in its own vLLM engine process (serving.server.engine_process), both alive at once, and the
measurements interleave: every repetition runs every batch size on both sides, alternating which side goes first, so
load from other processes hits both alike. Before the timed reps each side runs every batch once untimed (first-run
allocations excluded). Output tok/s is batch x tokens / wall time with ignore_eos (every side generates the same
tokens: --max-tokens at batch 1, --batched-max-tokens above). The ratio is fast / standard of the per-side medians,
with a 95% bootstrap interval that resamples reps in pairs (ratio_interval); a goal is "met" only when the whole
interval is above it, "not met" when below, else "unresolved" (verdict). Tokens per CPU-second of the engine process
(all its threads) are recorded too: less sensitive than wall time to other processes on a shared CPU. Also recorded:
mean acceptance length (1 + accepted / drafts, vLLM's counters), greedy token agreement of fast with standard on the
same prompts, the pass rate of both on the domains eval split (the one protocol, domains/evaluate.py), and the load
average (a shared CPU makes absolute numbers unreliable; the ratio is what is comparable).
"""
from __future__ import annotations

import json
import os
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m serving.bench_fast ...")

from model import cli, manifest, results  # noqa: E402


# ablations: the quantized target alone, the draft on the unquantized target, prompt-lookup (ngram) proposals instead
ABLATIONS = ["quant_only", "spec_only", "fast_ngram"]
EXTRA_SIDES = ABLATIONS + ["standard_bf16"]  # standard_bf16: the standard variant in bfloat16 (--sides only)
NGRAM = {"method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 4, "prompt_lookup_min": 1}


def eval_prompts(data_dir: Path) -> list[str]:
    """Every chat-rendered eval-split prompt, in the split's order."""
    import datasets

    from domains import chat

    rows = datasets.load_from_disk(str(data_dir / "eval"))
    return [chat.render(json.loads(r["prompt"]), add_generation_prompt=True) for r in rows]


def acceptance_length(spec: dict) -> float | None:
    """Mean tokens per speculative step: 1 + accepted / drafts of vLLM's counters (None without drafts)."""
    drafts = spec.get("spec_decode_num_drafts")
    return 1 + spec["spec_decode_num_accepted_tokens"] / drafts if drafts else None


def add_counters(total: dict, spec: dict) -> None:
    for k, v in spec.items():
        total[k] = total.get(k, 0) + v


def agreement(a: list[list[int]], b: list[list[int]]) -> dict:
    """Greedy agreement of two runs on the same prompts: identical sequences, and tokens before the first divergence."""
    same = sum(x == y for x, y in zip(a, b))
    prefix = 0
    for x, y in zip(a, b):
        k = 0
        while k < min(len(x), len(y)) and x[k] == y[k]:
            k += 1
        prefix += k
    total = sum(len(x) for x in a)
    return {"identical_sequences": same, "sequences": len(a), "prefix_tokens_equal": prefix, "tokens": total,
            "prefix_agreement": prefix / total if total else None}


def natural_rep(worker, prompts: list[str], max_tokens: int) -> dict:
    """One request at a time, each stopping at its end of turn: generated tokens / summed seconds, and the
    speculative counters. Sides answer the same requests; their answers may differ in length (a quantized target)."""
    tokens, secs, spec = 0, 0.0, {}
    for p in prompts:
        r = worker.timed_generate([p], max_tokens=max_tokens)
        tokens, secs = tokens + len(r["token_ids"][0]), secs + r["seconds"]
        add_counters(spec, r["spec"])
    return {"tok_s": tokens / secs, "tokens": tokens, "seconds": secs, "spec": spec,
            "acceptance_length": acceptance_length(spec)}


def ratio_interval(fast_runs: list[float], std_runs: list[float], n_boot: int = 4000, seed: int = 0,
                   level: float = 0.95) -> dict:
    """median(fast) / median(standard) over reps, with a percentile bootstrap interval (None under 2 reps).

    The resampling is paired: rep i of both sides ran back to back under the same load, so a load swing that
    scales a pair cancels in its ratio instead of widening the interval (resampling each side alone would not).
    """
    import numpy as np

    f, s = np.asarray(fast_runs, dtype=float), np.asarray(std_runs, dtype=float)
    if len(f) != len(s) or not len(f):
        raise ValueError(f"paired runs need equal, nonzero counts: {len(f)} fast, {len(s)} standard")
    out = {"ratio": float(np.median(f) / np.median(s)), "low": None, "high": None, "n_boot": n_boot,
           "level": level, "reps": len(f)}
    if len(f) > 1:  # one pair resamples to itself: a zero-width interval that would claim certainty
        idx = np.random.default_rng(seed).integers(0, len(f), size=(n_boot, len(f)))
        boot = np.median(f[idx], axis=1) / np.median(s[idx], axis=1)
        out["low"], out["high"] = (float(q) for q in np.quantile(boot, [(1 - level) / 2, (1 + level) / 2]))
    return out


def verdict(interval: dict, goal: float = 2.0) -> str:
    """Whether a ratio reaches `goal`, claimed only when the whole interval is on one side of it."""
    lo, hi = interval["low"], interval["high"]
    if lo is None:
        return f"unresolved ({interval['reps']} rep: no interval)"
    if lo > goal:
        return "met"
    if hi < goal:
        return "not met"
    return f"unresolved (the {interval['level']:.0%} interval [{lo:.2f}, {hi:.2f}] includes {goal:g})"


def fmt_interval(iv: dict) -> str:
    return f"{iv['ratio']:.2f} " + ("[no interval]" if iv["low"] is None else f"[{iv['low']:.2f}, {iv['high']:.2f}]")


def main(argv=None) -> int:
    ap = cli.parser(__doc__, fast="fast variant directory (serving/02_fast.py)",
                    data="domains datasets (eval split: prompts and pass rate)", out="results JSON path")
    ap.add_argument("--standard", type=Path, default=None, help="standard variant (default: the fast variant's parent)")
    ap.add_argument("--batches", default="1,8,64", help="comma-separated batch sizes")
    ap.add_argument("--max-tokens", type=int, default=512, help="generated tokens per sequence at batch 1 (ignore_eos)")
    ap.add_argument("--batched-max-tokens", type=int, default=128,
                    help="generated tokens per sequence at batch > 1 (a batch-64 rep at 512 takes minutes on a CPU)")
    ap.add_argument("--reps", type=int, default=6, help="interleaved repetitions per batch size and side")
    ap.add_argument("--goal", type=float, default=2.0, help="fast/standard tok/s ratio goal at batch 1")
    ap.add_argument("--natural-requests", type=int, default=0,
                    help="also time batch-1 answers that stop at their end: this many requests per rep (0 = off)")
    ap.add_argument("--per-domain", type=int, default=1, help="eval tasks per domain for the pass rates")
    ap.add_argument("--families", default="", help="comma-separated families for the pass rates (default: all)")
    ap.add_argument("--quality-max-tokens", type=int, default=128, help="tokens per assistant turn in the pass-rate eval")
    ap.add_argument("--no-quality", action="store_true", help="skip the pass-rate eval")
    ap.add_argument("--ablations", action="store_true", help="also time " + ", ".join(ABLATIONS))
    ap.add_argument("--sides", default="", help="explicit sides, e.g. standard,fast,spec_only (default: standard,fast "
                                                  "[+ quant_only,spec_only with --ablations])")
    a = ap.parse_args(argv)
    with cli.input_errors(ValueError, TypeError, KeyError):
        fm = manifest.verify(a.fast, stage="fast")
        std = a.standard or Path(fm["parent"]["path"])
        manifest.verify(std)
        manifest.verify(a.data, stage="data")
        batches = [int(x) for x in a.batches.split(",") if x]
        wanted = a.sides.split(",") if a.sides else []
        if wanted and (not {"standard", "fast"} <= set(wanted) or set(wanted) - {"standard", "fast", *EXTRA_SIDES}):
            raise ValueError(f"--sides {a.sides}: must include standard and fast, others from {EXTRA_SIDES}")
        if not batches or min(batches) < 1 or a.reps < 1 or min(a.max_tokens, a.batched_max_tokens) < 1:
            raise ValueError(f"--batches {a.batches}, --reps {a.reps}, --max-tokens {a.max_tokens}, "
                             f"--batched-max-tokens {a.batched_max_tokens} must be positive")
        tokens = {b: a.max_tokens if b == 1 else a.batched_max_tokens for b in batches}
    from domains import evaluate
    from serving.server import engine_process, serving_config

    # the warm-up runs prompts [0, b) and rep r at batch b prompts [(r+1)*b, (r+2)*b), cycling over the split: each rep
    # a different request (the same on every side), so a ratio is not the speed of one prompt's continuation
    every = eval_prompts(a.data)
    n_prompts = max(batches) * (a.reps + 1)
    prompts = (every * (n_prompts // len(every) + 1))[:n_prompts]
    # natural answers: reps x requests prompts spaced evenly over the whole eval split (every family in every rep)
    spread = [every[int(i * len(every) / (a.reps * a.natural_requests))] for i in range(a.reps * a.natural_requests)]
    load_before = os.getloadavg()
    std_dtype = serving_config(std).get("dtype", "float32")
    known = {"standard": dict(ckpt=std), "fast": dict(ckpt=a.fast), "quant_only": dict(ckpt=a.fast, speculative=False),
             "standard_bf16": dict(ckpt=std, dtype="bfloat16"),  # how much of a ratio the dtype alone gives
             "spec_only": dict(ckpt=a.fast, model=std / "hf", dtype=std_dtype),  # no int8: the target's own dtype
             "fast_ngram": dict(ckpt=a.fast, speculative=NGRAM)}
    sides = {n: known[n] for n in (a.sides.split(",") if a.sides else
                                   ["standard", "fast"] + (ABLATIONS if a.ablations else []))}
    # the dtype each side runs in: a side on the fast variant's directory takes its serving.json's (bfloat16 on AMX
    # CPUs, where vLLM's int8 GEMM takes no float32), so there a ratio includes the dtype change: recorded per side
    dtypes = {n: kw.get("dtype") or serving_config(kw["ckpt"]).get("dtype", "float32") for n, kw in sides.items()}
    workers = {}
    t_start = time.perf_counter()
    try:
        for name, kw in sides.items():
            workers[name] = engine_process(kw.pop("ckpt"), **kw)
            workers[name].timed_generate(prompts[:2], max_tokens=8, ignore_eos=True)  # warm-up
        for name in sides:  # one untimed run per batch as timed: the first at a batch size pays its allocations
            for b in batches:
                workers[name].timed_generate(prompts[:b], max_tokens=tokens[b], ignore_eos=True)
        runs: dict = {n: {b: [] for b in batches} for n in sides}
        cpu_runs: dict = {n: {b: [] for b in batches} for n in sides}
        spec: dict = {n: {b: {} for b in batches} for n in sides}
        natural: dict = {n: [] for n in sides}
        ids: dict = {}  # every rep's greedy ids per side and batch: agreement over all of them
        names = list(sides)
        for rep in range(a.reps):
            order = names if rep % 2 == 0 else names[::-1]
            for b in batches:
                for n in order:
                    r = workers[n].timed_generate(prompts[(rep + 1) * b:(rep + 2) * b], max_tokens=tokens[b],
                                                  ignore_eos=True)
                    runs[n][b].append(b * tokens[b] / r["seconds"])
                    cpu_runs[n][b].append(b * tokens[b] / max(r["cpu_seconds"], 1e-9))
                    add_counters(spec[n][b], r["spec"])
                    ids.setdefault((n, b), []).extend(r["token_ids"])
                    print(f"rep {rep} batch {b:>3} {n:<10} {runs[n][b][-1]:9.1f} tok/s", flush=True)
            if a.natural_requests:  # ignore_eos times mostly text past the answer; real answers end (and are short)
                chunk = spread[rep::a.reps]
                for n in order:
                    r = natural_rep(workers[n], chunk, a.quality_max_tokens)
                    natural[n].append(r)
                    print(f"rep {rep} natural  {n:<10} {r['tok_s']:9.1f} tok/s ({r['tokens']} tokens)", flush=True)
        pass_rates, recs = {}, {}
        if not a.no_quality:
            from domains.sandboxing import available, make_pool

            items = evaluate.eval_items(a.data, a.per_domain, families=[f for f in a.families.split(",") if f] or None)
            pool = make_pool(2) if available() else None
            try:
                for n in ("standard", "fast"):  # the one evaluation protocol, greedy, on each side's engine
                    t0 = time.perf_counter()
                    recs[n] = evaluate.run(evaluate.EngineTarget(workers[n], n), items, pool,
                                           max_tokens=a.quality_max_tokens, slots=2)
                    by_fam = evaluate.summarize(recs[n], by=("family",))
                    pass_rates[n] = {**by_fam["all"], "per_family": {f: c["pass_rate"] for f, c in by_fam.items()
                                                                     if f != "all"},
                                     "per_split": {sp: c["pass_rate"] for sp, c in
                                                   evaluate.summarize(recs[n], by=("split",)).items() if sp != "all"},
                                     "seconds": time.perf_counter() - t0}
                    print(f"pass rate {n}: {pass_rates[n]['pass_rate']} on {pass_rates[n]['tasks']} tasks", flush=True)
            finally:
                if pool is not None:
                    pool.close()
    finally:
        for w in workers.values():
            w.close()
    tok_s = {n: {str(b): {"median": statistics.median(v), "runs": v} for b, v in per.items()} for n, per in runs.items()}
    interval = {n: {str(b): ratio_interval(runs[n][b], runs["standard"][b]) for b in batches}
                for n in sides if n != "standard"}
    ratio = {n: {b: iv["ratio"] for b, iv in per.items()} for n, per in interval.items()}  # of the medians
    tok_cpu = {n: {str(b): {"median": statistics.median(v), "runs": v} for b, v in per.items()} for n, per in cpu_runs.items()}
    ratio_cpu = {n: {str(b): tok_cpu[n][str(b)]["median"] / tok_cpu["standard"][str(b)]["median"] for b in batches}
                 for n in sides if n != "standard"}
    acc = {n: {str(b): acceptance_length(c) for b, c in per.items()} for n, per in spec.items() if any(per.values())}
    agree = {n: {str(b): agreement(ids[("standard", b)], ids[(n, b)]) for b in batches}
             for n in sides if n != "standard"}
    delta, paired = None, None
    if pass_rates and None not in (pass_rates["standard"]["pass_rate"], pass_rates["fast"]["pass_rate"]):
        delta = 100 * (pass_rates["fast"]["pass_rate"] - pass_rates["standard"]["pass_rate"])
        # task by task, per split (train domains / held-out domains), with bootstrap intervals over tasks and domains
        paired = evaluate.paired_delta(recs["standard"], recs["fast"])["all"]
    spec_same = agree.get("spec_only")  # the draft verified by the unquantized target: greedy output must not move
    numbers = {
        "baseline": {"name": "standard", "path": str(std), "manifest_sha256": manifest.manifest_hash(std)},
        "fast_config": json.loads((a.fast / "serving.json").read_text()), "fast_quant": fm["metrics"].get("quant"),
        "dtype_per_side": dtypes,
        "settings": {"batches": batches, "max_tokens": a.max_tokens, "batched_max_tokens": a.batched_max_tokens,
                     "reps": a.reps, "ignore_eos": True,
                     "per_domain": a.per_domain, "quality_max_tokens": a.quality_max_tokens},
        "output_tok_per_s": tok_s, "ratio_vs_standard": ratio, "ratio_interval_vs_standard": interval,
        "output_tok_per_cpu_s": tok_cpu, "ratio_vs_standard_per_cpu_s": ratio_cpu, "mean_acceptance_length": acc,
        "greedy_agreement_vs_standard": agree, "pass_rate": pass_rates, "pass_rate_delta_points": delta,
        "pass_rate_paired_delta": paired,
        "goal": {"ratio_batch1_ge_2": verdict(interval["fast"]["1"], a.goal) if 1 in batches else None,
                 "ratio_batch1_interval": interval["fast"].get("1"), "ratio_goal": a.goal,
                 "pass_rate_delta_le_1_point": None if delta is None else abs(delta) <= 1.0,
                 "pass_rate_both_sides_pass": None if not pass_rates else min(
                     pass_rates[n]["passed"] for n in ("standard", "fast")) > 0,  # a delta on two zeros proves nothing
                 "spec_only_identical_sequences": None if spec_same is None else {
                     b: f"{v['identical_sequences']}/{v['sequences']}" for b, v in spec_same.items()}},
        "load_average": {"before": load_before, "after": os.getloadavg(), "cores": os.cpu_count()},
        "natural_batch1": None if not a.natural_requests else {
            "requests_per_rep": a.natural_requests, "max_tokens": a.quality_max_tokens, "runs": natural,
            "ratio_interval_vs_standard": {n: ratio_interval([r["tok_s"] for r in natural[n]],
                                                             [r["tok_s"] for r in natural["standard"]])
                                           for n in sides if n != "standard"}},
        "wall_s": time.perf_counter() - t_start,
    }
    results.write(a.out, "bench.fast", numbers, measured=a.fast)
    print(f"{'batch':>5} " + " ".join(f"{n:>12}" for n in sides)
          + "   fast/std wall [95% interval]    cpu   accept len")
    for b in batches:
        print(f"{b:>5} " + " ".join(f"{tok_s[n][str(b)]['median']:12.1f}" for n in sides)
              + f"   {fmt_interval(interval['fast'][str(b)]):>24} {ratio_cpu['fast'][str(b)]:6.2f}"
              + f"   {acc.get('fast', {}).get(str(b))}")
    if a.natural_requests:
        for n, iv in numbers["natural_batch1"]["ratio_interval_vs_standard"].items():
            total: dict = {}
            for r in natural[n]:
                add_counters(total, r["spec"])
            acc_n = acceptance_length(total)
            print(f"natural answers at batch 1, {n}/standard: {fmt_interval(iv)}"
                  + (f", acceptance length {acc_n:.2f}" if acc_n else ""))
    if 1 in batches:
        print(f"goal fast/standard >= {a.goal:g}x at batch 1: {numbers['goal']['ratio_batch1_ge_2']}")
    if pass_rates:
        print(f"pass rate standard {pass_rates['standard']['pass_rate']}, fast {pass_rates['fast']['pass_rate']}, "
              f"delta {delta} points")
        for sp, d in (paired or {}).items():
            print(f"  paired delta on {sp} tasks: {100 * d['delta']:+.2f} points, 95% [{100 * d['ci95'][0]:+.2f}, "
                  f"{100 * d['ci95'][1]:+.2f}] over {d['tasks']} tasks ({d['better']} better, {d['worse']} worse)")
    if spec_same:
        print(f"spec-only greedy sequences identical to standard's: {numbers['goal']['spec_only_identical_sequences']}")
    if len(set(dtypes.values())) > 1:
        print(f"note: the sides run in different dtypes {dtypes}: the ratios include that change", flush=True)
    print(f"load average before {load_before[0]:.1f}, after {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores -> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
