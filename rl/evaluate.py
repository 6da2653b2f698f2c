"""Pass rate per family and split (train / held-out domains) of the engine's current weights.

Used for the periodic evaluation of rl/02_train.py and by the experiments: tasks come from the domains
export's eval split (seeds disjoint from RL's), at most `per_domain` per domain, optionally only some families.
Two protocols: greedy (`samples: 0`, one completion per task) or sampled (`samples: n` completions per task at
`temperature`, with a fixed seed so two evaluations of different weights see the same items and seeds). The
sampled pass rate is the mean over scored samples, i.e. pass@1 estimated from n samples per task: RL moves
per-task success probabilities that greedy decoding of ~100 tasks cannot resolve. Infra errors are counted and
left out of the pass rates.

Intervals: `ci95` is a Wilson interval with the number of TASKS as n (samples of one task are correlated, so
counting tasks rather than samples keeps it conservative; for greedy it is the ordinary Wilson interval).
`paired_delta` compares two evaluations of the same items: mean per-task difference of pass rates with a
bootstrap interval over tasks (pairing removes the between-task variance that dominates each single interval)
and a wider, more honest one resampling whole domains (`ci95_domains`: tasks of one domain are correlated).
"""
from __future__ import annotations

import json
import math
import random
from collections import defaultdict
from typing import Any

from rl import rewards, trajectory


def eval_items(data_dir, per_domain: int, splits: list[str], families: list[str] | None = None) -> list:
    import datasets

    import domains

    rows = datasets.load_from_disk(str(data_dir / "eval"))
    seen: dict[str, int] = defaultdict(int)
    items = []
    for r in rows:
        if r["split"] not in splits or seen[r["domain"]] >= per_domain:
            continue
        if families and r["family"] not in families:
            continue
        seen[r["domain"]] += 1
        items.append((domains.get(r["domain"]), domains.Task.from_dict(json.loads(r["task"]))))
    return items


def wilson(passed: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (passed may be fractional: a rate times a count)."""
    if n <= 0:
        return (0.0, 1.0)
    p = min(max(passed / n, 0.0), 1.0)
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, min(c - h, p)), min(1.0, max(c + h, p)))  # float error must not put p outside


def run(engine, renderer, items: list, pool: Any, reward_cfg, max_tokens: int, rollout_cfg=None, *,
        samples: int = 0, temperature: float = 1.0, seed: int = 0) -> list[dict]:
    """One record per item: family, split, domain, index, and counts over its samples (1 if greedy)."""
    lane = {} if rollout_cfg is None else dict(long_timeout_s=rollout_cfg.long_timeout_s,
                                                tool_retries=rollout_cfg.tool_retries,
                                                retry_backoff_s=rollout_cfg.tool_retry_backoff_s)
    n = max(samples, 1)
    rolls = trajectory.rollout(engine, renderer, items, n=n, temperature=temperature if samples else 0.0,
                               top_p=1.0, max_tokens=max_tokens, seed=seed, pool=pool,
                               sandbox_slots=reward_cfg.sandbox_slots, **lane)
    rs = rewards.score_all(rolls, pool, reward_cfg)
    recs = []
    for i, (d, t) in enumerate(items):
        rec = {"item": i, "domain": d.name, "family": t.family, "split": d.split, "samples": 0, "passed": 0,
               "infra_errors": 0, "tool_retries": 0, "cut": 0}
        for r, rw in zip(rolls[i * n:(i + 1) * n], rs[i * n:(i + 1) * n]):
            rec["samples"] += 1
            rec["tool_retries"] += r.tool_retries
            rec["cut"] += int(r.cut)
            rec["infra_errors"] += int(rw.infra_error is not None)
            rec["passed"] += int(rw.infra_error is None and rw.passed)
        recs.append(rec)
    return recs


def _rate(rec: dict) -> float | None:
    scored = rec["samples"] - rec["infra_errors"]
    return rec["passed"] / scored if scored else None


def summarize(records: list[dict]) -> dict:
    """{family | "all": {split: counts, pass_rate (mean over scored samples), ci95}}."""
    agg: dict[tuple[str, str], dict] = defaultdict(lambda: {"tasks": 0, "samples": 0, "passed": 0, "infra_errors": 0,
                                                            "tool_retries": 0, "cut": 0, "_scored_tasks": 0})
    for rec in records:
        scored = _rate(rec) is not None  # a task with every sample an infra error has no rate
        for key in ((rec["family"], rec["split"]), ("all", rec["split"])):
            g = agg[key]
            g["tasks"] += 1
            for k in ("samples", "passed", "infra_errors", "tool_retries", "cut"):
                g[k] += rec[k]
            g["_scored_tasks"] += scored
    table: dict[str, dict] = {}
    for (fam, split), g in sorted(agg.items()):
        n = g.pop("_scored_tasks")
        pr = _rate(g)
        ci = list(wilson(pr * n, n)) if pr is not None else None
        table.setdefault(fam, {})[split] = {**g, "pass_rate": pr, "ci95": ci}
    return table


def paired_delta(before: list[dict], after: list[dict], n_boot: int = 2000, seed: int = 0) -> dict:
    """{family | "all": {split: mean per-task (after - before) pass rate, bootstrap 95% interval over tasks,
    tasks better / worse}} over tasks scored in both evaluations; records are matched by item index."""
    prev = {r["item"]: r for r in before}
    diffs: dict[tuple[str, str], list[float]] = defaultdict(list)
    doms: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in after:
        b = prev.get(r["item"])
        if b is None or b["domain"] != r["domain"]:
            raise ValueError(f"item {r['item']} ({r['domain']}) is not in the baseline: the two evaluations "
                             "must use the same eval items (same data, per_domain, splits, families)")
        ra, rb = _rate(r), _rate(b)
        if ra is None or rb is None:
            continue
        for key in ((r["family"], r["split"]), ("all", r["split"])):
            diffs[key].append(ra - rb)
            doms[key].append(r["domain"])
    rng = random.Random(seed)
    lo, hi = int(0.025 * n_boot), int(0.975 * n_boot) - 1
    out: dict[str, dict] = {}
    for (fam, split), d in sorted(diffs.items()):
        boots = sorted(sum(rng.choices(d, k=len(d))) / len(d) for _ in range(n_boot))
        by_dom: dict[str, list[float]] = defaultdict(list)
        for name, x in zip(doms[(fam, split)], d):
            by_dom[name].append(x)
        groups = list(by_dom.values())
        dboots = []
        for _ in range(n_boot):  # whole domains resampled: their tasks share a generator, so they are correlated
            pick = rng.choices(groups, k=len(groups))
            dboots.append(sum(map(sum, pick)) / sum(map(len, pick)))
        dboots.sort()
        out.setdefault(fam, {})[split] = {
            "tasks": len(d), "delta": sum(d) / len(d), "ci95": [boots[lo], boots[hi]],
            "ci95_domains": [dboots[lo], dboots[hi]], "domains": len(groups),
            "better": sum(x > 0 for x in d), "worse": sum(x < 0 for x in d),
            "domains_better": sum(sum(g) > 0 for g in groups), "domains_worse": sum(sum(g) < 0 for g in groups)}
    return out

