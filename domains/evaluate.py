"""The evaluation protocol: every stage's evaluation is this one function over a target.

    items = eval_items(Path("data/domains"), per_domain=2)            # the datasets' eval split, or any (Domain, Task)s
    recs = run(target, items, pool, n=1, temperature=0.0, max_tokens=192)   # one record per item
    table = summarize(recs)                 # {family | "all": {split: counts, pass_rate, ci95, mean_turns}}
    pass_at_k(recs, [1, 4]); paired_delta(before_recs, after_recs); wilson(passed, n)

A *target* is anything with `generate(convs, *, n, temperature, max_tokens, seed) -> [Gen]` (conversations in
domains.chat format; `Gen.error` set when nothing usable came back). EngineTarget makes one of a vLLM engine
(model.vllm_engine.Engine in-process or EngineProcess), eval's EndpointTarget of an OpenAI-compatible server.

The protocol, the same wherever it runs (sft/03_eval.py, rl's periodic eval, eval's suites, serving's quality):
- `n` independent multi-turn rollouts per task (domains.rollout.rollout_lanes: lockstep lane + sandbox lane of
  `slots` sessions), greedy when temperature is 0, else sampled with a seed per engine call drawn from `seed`,
  the lane and the call count, so two evaluations of different weights see the same items and seeds;
- each sample verified by its domain's verifier (domains.scoring.verify_all: lanes, deadlines, never raising);
- target errors (`errors`: timeouts, prompts over the context) and verifier infra errors (`infra_errors`) are
  counted and left out of every rate, never scored as fails;
- pass_rate = passed / scored samples (pass@1 estimated from n samples); ci95 = Wilson with the number of scored
  TASKS as n (samples of one task are correlated: conservative); pass@k = the unbiased estimator of Chen et al.
  (2021) over tasks with >= k scored samples; paired_delta = mean per-task difference of two evaluations of the
  same items with bootstrap intervals over tasks and over whole domains.
"""
from __future__ import annotations

import copy
import json
import math
import random
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from domains import chat
from domains.rollout import rollout_lanes, stats
from domains.scoring import verify_all

LANE_SEEDS = (0, 500_009)  # seed offsets of the lockstep lane and the sandbox lane


@dataclass
class Gen:
    texts: list[str] = field(default_factory=list)  # n samples; empty when error is set
    error: str | None = None  # one line: why nothing usable came back (never raised)


class EngineTarget:
    """A vLLM engine as a target: each conversation rendered with domains.chat, sampled with per-request seeds.

    `engine.generate(prompts, n=, temperature=, max_tokens=, seed=)` -> per prompt a list of completions with
    .text and .finish_reason ("prompt_too_long" when the prompt leaves no room to answer: a target error)."""

    def __init__(self, engine, name: str = "engine"):
        self.engine, self.name = engine, name
        self.max_model_len = getattr(engine, "max_model_len", None)

    def generate(self, convs: list[list[dict]], *, n: int = 1, temperature: float = 0.0, max_tokens: int = 64,
                 seed: int | None = None) -> list[Gen]:
        prompts = [chat.render(c, add_generation_prompt=True) for c in convs]
        try:
            res = self.engine.generate(prompts, n=n, temperature=temperature, max_tokens=max_tokens,
                                       seed=seed if temperature > 0 else None)  # greedy: one batch, no seed waves
        except Exception as e:  # noqa: BLE001 - an engine failure is recorded per prompt, the run goes on
            return [Gen(error=f"engine: {type(e).__name__}: {str(e)[:300]}") for _ in convs]
        return [Gen(error=f"prompt leaves no room to answer in max_model_len={self.max_model_len}")
                if cs and cs[0].finish_reason == "prompt_too_long" else Gen([c.text for c in cs]) for cs in res]


def eval_items(data_dir: Path, per_domain: int, splits: list[str] | tuple = ("train", "heldout"),
               families: list[str] | None = None) -> list[tuple]:
    """The first `per_domain` tasks of each domain in the domains datasets' eval split (in their order)."""
    import datasets

    import domains

    rows = datasets.load_from_disk(str(Path(data_dir) / "eval"))
    seen: dict[str, int] = defaultdict(int)
    items = []
    for r in rows:
        if r["split"] not in splits or seen[r["domain"]] >= per_domain or (families and r["family"] not in families):
            continue
        seen[r["domain"]] += 1
        items.append((domains.get(r["domain"]), domains.Task.from_dict(json.loads(r["task"]))))
    return items


def run(target, items: list[tuple], pool: Any = None, *, n: int = 1, temperature: float = 0.0, seed: int = 0,
        max_tokens: int = 192, slots: int = 2, max_turns: int = 0, budget_s: float | None = None,
        tool_retries: int | None = None, retry_backoff_s: float | None = None, verify: dict | None = None) -> list[dict]:
    """One record per item: item, domain, family, split, seed, difficulty, samples, passed, errors (target),
    infra_errors (verifier/tools), tool_retries, cut, turns (summed over samples), and `outcomes` per sample
    (passed True/False/None, score, turns, error, infra_error, reason). verify: verify_all's lane options."""
    if n < 1:
        raise ValueError(f"n={n}: at least one rollout per task")
    reps = [(d, copy.deepcopy(t)) for d, t in items for _ in range(n)]  # own copies: the first message is the key
    for _, t in reps:
        if max_turns:  # a turn cap makes a task stricter, never easier: the verifier checks the same copy
            t.max_turns = min(t.max_turns, max_turns)
    index = {id(t.messages[0]): j for j, (_, t) in enumerate(reps)}
    errors: list[str | None] = [None] * len(reps)

    def lane_generate(lane: int):
        calls = [0]

        def generate_batch(convs: list[list[dict]]) -> list[str]:
            s = seed + LANE_SEEDS[lane] + 7919 * calls[0]  # fresh per call, reproducible
            calls[0] += 1
            texts = []
            for c, g in zip(convs, target.generate(convs, n=1, temperature=temperature, max_tokens=max_tokens, seed=s)):
                j = index[id(c[0])]
                if g.error and errors[j] is None:
                    errors[j] = g.error
                texts.append("" if g.error else g.texts[0])  # an empty turn ends the rollout; the sample is an error
            return texts
        return generate_batch

    trajs = rollout_lanes(reps, lane_generate, pool, slots=slots, budget_s=budget_s, tool_retries=tool_retries,
                          retry_backoff_s=retry_backoff_s)
    todo = [j for j in range(len(reps)) if errors[j] is None]
    got = verify_all([(reps[j][0], reps[j][1], trajs[j]) for j in todo], pool, **(verify or {}))
    rewards: list = [None] * len(reps)
    for j, rw in zip(todo, got):
        rewards[j] = rw
    recs = []
    for i, (d, t) in enumerate(items):
        rec = {"item": i, "domain": d.name, "family": t.family, "split": d.split, "seed": t.seed,
               "difficulty": t.difficulty, "samples": 0, "passed": 0, "errors": 0, "infra_errors": 0,
               "tool_retries": 0, "cut": 0, "turns": 0, "outcomes": []}
        for j in range(i * n, (i + 1) * n):
            st, rw, turns = stats(trajs[j]), rewards[j], sum(1 for m in trajs[j] if m.get("role") == "assistant")
            bad = errors[j] is not None or rw.infra_error is not None
            rec["samples"] += 1
            rec["errors"] += errors[j] is not None
            rec["infra_errors"] += errors[j] is None and rw.infra_error is not None
            rec["passed"] += not bad and bool(rw.passed)
            rec["tool_retries"] += st["tool_retries"]
            rec["cut"] += bool(st["cut"])
            rec["turns"] += turns
            rec["outcomes"].append({"passed": None if bad else bool(rw.passed), "score": None if bad else rw.score,
                                    "turns": turns, "error": errors[j], "infra_error": None if rw is None else rw.infra_error,
                                    "reason": None if rw is None else (rw.details or {}).get("reason")})
        recs.append(rec)
    return recs


def scored(rec: dict) -> int:
    return rec["samples"] - rec["errors"] - rec["infra_errors"]


def rate(rec: dict) -> float | None:
    return rec["passed"] / scored(rec) if scored(rec) else None


def wilson(passed: float, n: float, z: float = 1.96) -> tuple[float, float]:
    """95% Wilson score interval of a proportion (passed may be fractional: a rate times a count)."""
    if n <= 0:
        return (0.0, 1.0)
    p = min(max(passed / n, 0.0), 1.0)
    d = 1 + z * z / n
    c = (p + z * z / (2 * n)) / d
    h = z * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / d
    return (max(0.0, min(c - h, p)), min(1.0, max(c + h, p)))  # float error must not put p outside


COUNTS = ("samples", "passed", "errors", "infra_errors", "tool_retries", "cut", "turns")


def summarize(records: list[dict], by: tuple[str, ...] = ("family", "split")) -> dict:
    """Counts per group, nested by the record fields `by`, plus "all" in place of the first field:
    {tasks, samples, scored, passed, errors, infra_errors, tool_retries, cut, mean_turns, pass_rate, ci95}."""
    agg: dict[tuple, dict] = defaultdict(lambda: {"tasks": 0, "_scored_tasks": 0, **{k: 0 for k in COUNTS}})
    for rec in records:
        key = tuple(rec[b] for b in by)
        for k in (key, ("all",) + key[1:]):
            g = agg[k]
            g["tasks"] += 1
            g["_scored_tasks"] += rate(rec) is not None  # a task with every sample an error has no rate
            for c in COUNTS:
                g[c] += rec[c]
    table: dict = {}
    for key, g in sorted(agg.items(), key=lambda kv: tuple(map(str, kv[0]))):
        n_tasks, turns = g.pop("_scored_tasks"), g.pop("turns")
        sc = g["samples"] - g["errors"] - g["infra_errors"]
        pr = g["passed"] / sc if sc else None
        cell = {**g, "scored": sc, "mean_turns": turns / g["samples"] if g["samples"] else None, "pass_rate": pr,
                "ci95": list(wilson(pr * n_tasks, n_tasks)) if pr is not None else None}
        node = table
        for k in key[:-1]:
            node = node.setdefault(k, {})
        node[key[-1]] = cell
    return table


def pass_at_k_one(n: int, c: int, k: int) -> float:
    """Chen et al. (2021): 1 - C(n-c, k) / C(n, k), the chance that k of n samples hold a pass."""
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def pass_at_k(records: list[dict], ks: list[int], by: str = "family") -> dict:
    """{group | "all": {pass@k, tasks_scored@k}} over tasks with at least k scored samples."""
    groups: dict[str, list[dict]] = defaultdict(list)
    for r in records:
        groups[r[by]].append(r)
        groups["all"].append(r)
    out = {}
    for g, rs in sorted(groups.items()):
        out[g] = {}
        for k in ks:
            ok = [pass_at_k_one(scored(r), r["passed"], k) for r in rs if scored(r) >= k]
            out[g][f"pass@{k}"] = sum(ok) / len(ok) if ok else None
            out[g][f"tasks_scored@{k}"] = len(ok)
    return out


def paired_delta(before: list[dict], after: list[dict], n_boot: int = 2000, seed: int = 0) -> dict:
    """{family | "all": {split: mean per-task (after - before) pass rate, bootstrap 95% interval over tasks and
    over whole domains (`ci95_domains`: tasks of one domain share a generator, so they are correlated), tasks
    and domains better / worse}} over tasks scored in both evaluations; records are matched by item index."""
    prev = {r["item"]: r for r in before}
    diffs: dict[tuple[str, str], list[float]] = defaultdict(list)
    doms: dict[tuple[str, str], list[str]] = defaultdict(list)
    for r in after:
        b = prev.get(r["item"])
        if b is None or b["domain"] != r["domain"]:
            raise ValueError(f"item {r['item']} ({r['domain']}) is not in the baseline: the two evaluations "
                             "must use the same eval items (same data, per_domain, splits, families)")
        ra, rb = rate(r), rate(b)
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
        for _ in range(n_boot):
            pick = rng.choices(groups, k=len(groups))
            dboots.append(sum(map(sum, pick)) / sum(map(len, pick)))
        dboots.sort()
        out.setdefault(fam, {})[split] = {
            "tasks": len(d), "delta": sum(d) / len(d), "ci95": [boots[lo], boots[hi]],
            "ci95_domains": [dboots[lo], dboots[hi]], "domains": len(groups),
            "better": sum(x > 0 for x in d), "worse": sum(x < 0 for x in d),
            "domains_better": sum(sum(g) > 0 for g in groups), "domains_worse": sum(sum(g) < 0 for g in groups)}
    return out
