"""Exact-match scoring of long-context replies and the RULER aggregates (per task x length, length x depth,
effective length).

A reply scores 1 when its last "Answer:" line lists exactly the expected items (order, case and separators
free; nothing missing, nothing extra), else 0. `recall` (RULER's string_match_all: the share of expected
items found anywhere in the reply) is kept beside it as a softer diagnostic. A reply that never came back
(target error) has no score: it is counted under `errors` and left out of every mean, never read as a 0.
"""
from __future__ import annotations

import re
from collections import defaultdict

RULER_THRESHOLD = 85.6  # RULER: Llama-2-7B's mean score at 4K; "effective length" = longest length scoring above it
ITEM_RE = re.compile(r"[A-Za-z0-9]+(?:-[A-Za-z0-9]+)*")


def answer_items(text: str) -> list[str] | None:
    """Lower-cased items on the last line starting with 'Answer:', or None when there is no such line."""
    lines = [ln.strip() for ln in (text or "").splitlines()]
    ans = [ln for ln in lines if ln.lower().startswith("answer:")]
    if not ans:
        return None
    return [x.lower() for x in ITEM_RE.findall(ans[-1][len("answer:"):])]


def score(answers: list[str], text: str) -> dict:
    want = {a.lower() for a in answers}
    got = answer_items(text)
    low = (text or "").lower()
    recall = sum(a in low for a in want) / len(want)
    if got is None:
        return {"score": 0.0, "recall": recall, "reason": "no 'Answer:' line"}
    ok = set(got) == want
    return {"score": 1.0 if ok else 0.0, "recall": recall,
            "reason": "exact" if ok else f"missing {len(want - set(got))}, extra {len(set(got) - want)}"}


def _mean(xs: list[float]) -> float | None:
    return 100.0 * sum(xs) / len(xs) if xs else None


def aggregate(rows: list[dict], threshold: float = RULER_THRESHOLD) -> dict:
    """rows: {task, length, depth, score|None, recall|None, error|None} -> tables in percent (None = nothing scored).

    per_length is the mean of the per-task means at that length (RULER), so tasks with depths do not weigh more.
    """
    cell: dict[tuple, list[dict]] = defaultdict(list)
    for r in rows:
        cell[("task", r["task"], r["length"])].append(r)
        if r.get("depth") is not None:
            cell[("grid", r["length"], r["depth"])].append(r)

    def stats(rs: list[dict]) -> dict:
        ok = [r for r in rs if not r.get("error")]
        return {"score": _mean([r["score"] for r in ok]), "recall": _mean([r["recall"] for r in ok]),
                "n": len(ok), "errors": len(rs) - len(ok)}

    per_task: dict[str, dict] = defaultdict(dict)
    grid: dict[str, dict] = defaultdict(dict)
    for k in sorted(cell, key=str):
        if k[0] == "task":
            per_task[k[1]][str(k[2])] = stats(cell[k])
        else:
            grid[str(k[1])][f"{k[2]:g}"] = stats(cell[k])
    lengths = sorted({r["length"] for r in rows})
    per_length = {}
    for n in lengths:
        ts = [per_task[t][str(n)] for t in per_task if str(n) in per_task[t]]
        scored = [v for v in ts if v["score"] is not None]
        per_length[str(n)] = {"score": sum(v["score"] for v in scored) / len(scored) if scored else None,
                              "recall": sum(v["recall"] for v in scored) / len(scored) if scored else None,
                              "tasks_scored": len(scored), "errors": sum(v["errors"] for v in ts)}
    passing = [n for n in lengths if (per_length[str(n)]["score"] or 0.0) >= threshold]
    # also the stricter reading: every length up to it passes (a model can pass 8K and fail 4K by noise)
    prefix = 0
    for n in lengths:
        if (per_length[str(n)]["score"] or 0.0) < threshold:
            break
        prefix = n
    return {"per_task": dict(per_task), "per_length": per_length, "grid": dict(grid), "threshold": threshold,
            "effective_length": max(passing) if passing else 0, "effective_length_prefix": prefix,
            "errors": sum(1 for r in rows if r.get("error")), "tasks": len(rows)}
