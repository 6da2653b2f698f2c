"""Run the RULER-style suite against a target: build tasks lazily, batch them by tokens, score, aggregate.

Config (recipe section `longctx`): tasks, lengths, depths (for DEPTH_TASKS), per_cell (samples per task x
length [x depth]), max_tokens, seed, batch_tokens (prompt tokens per generate call), nll (in-process vLLM
only: also record each prompt's mean token NLL over its last quarter, `tail_nll`, averaged per length).
A (task, length) that cannot be built (length below the task's fixed text) is listed under `skipped`.
"""
from __future__ import annotations

import time

from eval import ruler, scoring
from eval.haystack import Tokens


def plan(cfg: dict) -> list[tuple[str, int, float | None, int]]:
    tasks = cfg.get("tasks") or sorted(ruler.TASKS)
    unknown = sorted(set(tasks) - set(ruler.TASKS))
    if unknown:
        raise ValueError(f"longctx.tasks: unknown {unknown}; choose from {sorted(ruler.TASKS)}")
    depths = [float(d) for d in cfg.get("depths", [0.5])]
    if any(not 0 <= d <= 1 for d in depths):
        raise ValueError(f"longctx.depths={depths}: each must be in [0, 1]")
    seed0, per = int(cfg.get("seed", 0)), int(cfg.get("per_cell", 1))
    out = []
    for length in sorted(int(n) for n in cfg["lengths"]):
        for t in tasks:
            for d in (depths if t in ruler.DEPTH_TASKS else [None]):
                out += [(t, length, d, seed0 + s) for s in range(per)]
    return out


def run(target, tok: Tokens, cfg: dict, log=print) -> dict:
    items = plan(cfg)
    rows, skipped = [], []
    batch: list[ruler.LongTask] = []
    max_tokens, budget = int(cfg.get("max_tokens", 64)), int(cfg.get("batch_tokens", 1 << 20))
    want_nll = bool(cfg.get("nll")) and hasattr(target, "prompt_nll")
    t0 = time.perf_counter()

    def flush():
        gens = target.generate([t.messages for t in batch], max_tokens=max_tokens, temperature=0.0)
        nll = target.prompt_nll([t.messages for t in batch]) if want_nll else [None] * len(batch)
        for t, g, x in zip(batch, gens, nll):
            row = {"task": t.task, "length": t.length, "depth": t.depth, "seed": t.seed,
                   "prompt_tokens": t.prompt_tokens, "answers": t.answers}
            if want_nll:
                row["tail_nll"] = x
            if g.error:
                row.update(score=None, recall=None, error=g.error, reply=None)
            else:
                row.update(**scoring.score(t.answers, g.texts[0]), error=None, reply=g.texts[0][:300])
            rows.append(row)
        batch.clear()

    for task, length, depth, seed in items:
        try:
            t = ruler.build(task, length, depth, seed, tok)
        except ValueError as e:
            if (task, length) not in {(s["task"], s["length"]) for s in skipped}:
                skipped.append({"task": task, "length": length, "reason": str(e)})
            continue
        if batch and sum(b.prompt_tokens for b in batch) + t.prompt_tokens > budget:
            flush()
        batch.append(t)
    if batch:
        flush()
    agg = scoring.aggregate(rows)
    if want_nll:
        for n, v in agg["per_length"].items():
            xs = [r["tail_nll"] for r in rows if str(r["length"]) == n and r.get("tail_nll") is not None]
            v["tail_nll"] = sum(xs) / len(xs) if xs else None
    log(f"longctx: {len(rows)} tasks, {agg['errors']} errors, effective length {agg['effective_length']} "
        f"({time.perf_counter() - t0:.1f}s)")
    return {"config": cfg, "summary": agg, "rows": rows, "skipped": skipped}


def table(summary: dict) -> str:
    lengths = sorted(summary["per_length"], key=int)
    lines = [f"{'task':<18}" + "".join(f"{n:>9}" for n in lengths)]
    for t, per in sorted(summary["per_task"].items()):
        lines.append(f"{t:<18}" + "".join(
            f"{'-' if per.get(n) is None else ('err' if per[n]['score'] is None else format(per[n]['score'], '.1f')):>9}"
            for n in lengths))
    lines.append(f"{'mean':<18}" + "".join(
        f"{'err' if summary['per_length'][n]['score'] is None else format(summary['per_length'][n]['score'], '.1f'):>9}"
        for n in lengths))
    depths = sorted({d for row in summary["grid"].values() for d in row}, key=float)
    if depths:
        lines.append(f"{'length x depth':<18}" + "".join(f"{d:>9}" for d in depths))
        for n in sorted(summary["grid"], key=int):
            row = summary["grid"][n]
            lines.append(f"{n:<18}" + "".join(
                f"{'-' if d not in row else ('err' if row[d]['score'] is None else format(row[d]['score'], '.1f')):>9}"
                for d in depths))
    lines.append(f"effective length (>= {summary['threshold']}): {summary['effective_length']}")
    return "\n".join(lines)
