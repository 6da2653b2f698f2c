"""The fixed regression set (eval/regression_set.yaml) under the one evaluation protocol (domains/evaluate.py,
greedy, one rollout per task): pass rate and mean turns per dimension, and a task-by-task comparison of two
results.
"""
from __future__ import annotations

from pathlib import Path

import yaml

import domains
from domains import evaluate

ROOT = Path(__file__).resolve().parent.parent


def load_set(path: str | Path, only: list[int] | None = None) -> list[dict]:
    p = Path(path)
    p = p if p.is_absolute() else ROOT / p
    doc = yaml.safe_load(p.read_text())
    tasks = doc["tasks"]
    ids = [t["id"] for t in tasks]
    if len(set(ids)) != len(ids):
        raise ValueError(f"{p}: duplicate task ids")
    bad = [t["id"] for t in tasks if t["dimension"] not in doc["dimensions"]]
    if bad:
        raise ValueError(f"{p}: tasks {bad} have a dimension not listed under 'dimensions'")
    return [tasks[i] for i in only] if only else tasks


def run(target, cfg: dict, pool, log=print) -> dict:
    spec = load_set(cfg.get("set", "eval/regression_set.yaml"), cfg.get("only"))
    items = [(domains.get(s["domain"]), domains.get(s["domain"]).generate(int(s["seed"]), int(s["difficulty"])))
             for s in spec]
    recs = evaluate.run(target, items, pool, max_tokens=int(cfg.get("max_tokens", 192)),
                        slots=int(cfg.get("sandbox_slots", 2)))
    rows = []
    for s, r in zip(spec, recs):
        o = r["outcomes"][0]
        rows.append({"id": s["id"], "dimension": s["dimension"], "domain": s["domain"], "seed": s["seed"],
                     "difficulty": s["difficulty"], "passed": o["passed"], "score": o["score"], "turns": o["turns"],
                     "error": o["error"], "infra_error": o["infra_error"], "reason": o["reason"]})
    summary = evaluate.summarize([{**r, "dimension": s["dimension"]} for s, r in zip(spec, recs)], by=("dimension",))
    log("regression: " + ", ".join(f"{k} {v['pass_rate'] if v['pass_rate'] is None else round(100 * v['pass_rate'], 1)}%"
                                   for k, v in summary.items()))
    return {"config": cfg, "summary": summary, "rows": rows}


def table(summary: dict) -> str:
    """Pass rate, mean turns and errors per dimension."""
    lines = []
    for dim, s in summary.items():
        pr = "n/a" if s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"
        turns = "-" if s["mean_turns"] is None else f"{s['mean_turns']:.2f}"
        lines.append(f"{dim:<10} pass {pr:>7} ({s['passed']}/{s['scored']})  mean turns {turns}  "
                     f"errors {s['errors']}  infra {s['infra_errors']}")
    return "\n".join(lines)


def _cell(r: dict | None) -> str:
    if r is None:
        return "absent"
    if r["passed"] is None:
        return "error" if r["error"] else "infra"
    return ("pass" if r["passed"] else "fail") + f"/{_turns(r, 'turns')}"


def _turns(d: dict, key: str):
    """turns / mean_turns; files written before the protocol counted turns (results/reference/eval/) say steps."""
    return d.get(key, d.get(key.replace("turns", "steps")))


def compare(before: dict, after: dict) -> tuple[str, int]:
    """Per-task before/after table (pass|fail/turns) and per-dimension summary; returns (text, tasks changed).

    A task counts as changed when it is in both results and its outcome (pass, fail, error, infra) differs."""
    b = {r["id"]: r for r in before["rows"]}
    a = {r["id"]: r for r in after["rows"]}
    lines = [f"{'task':<14} {'domain':<32} {'before':>10} {'after':>10}"]
    changed = 0
    for tid in list(b) + [t for t in a if t not in b]:
        x, y = _cell(b.get(tid)), _cell(a.get(tid))
        flip = tid in a and tid in b and x.split("/")[0] != y.split("/")[0]
        changed += flip
        lines.append(f"{tid:<14} {(b.get(tid) or a.get(tid))['domain']:<32} {x:>10} {y:>10}{'  *' if flip else ''}")
    lines.append("")
    lines.append(f"{'dimension':<14} {'pass before':>12} {'pass after':>12} {'turns before':>13} {'turns after':>12}")
    sb, sa = before["summary"], after["summary"]
    for dim in sorted(set(sb) | set(sa)):
        def pr(s):
            return "-" if s is None or s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"

        def st(s):
            return "-" if s is None or _turns(s, "mean_turns") is None else f"{_turns(s, 'mean_turns'):.2f}"
        lines.append(f"{dim:<14} {pr(sb.get(dim)):>12} {pr(sa.get(dim)):>12} {st(sb.get(dim)):>13} {st(sa.get(dim)):>12}")
    lines.append(f"{changed} task(s) changed pass/fail (marked *)")
    return "\n".join(lines), changed
