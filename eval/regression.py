"""The fixed regression set (eval/regression_set.yaml): rollouts, domain verifiers, pass rate and mean steps
per dimension, and a task-by-task comparison of two results.
"""
from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import yaml

import domains
from eval import rollouts

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
    trajs, errors = rollouts.run(target, items, pool, slots=int(cfg.get("sandbox_slots", 2)),
                                 max_tokens=int(cfg.get("max_tokens", 192)))
    rows = []
    for s, (d, t), tr, err in zip(spec, items, trajs, errors):
        r = d.verify(t, tr, pool=pool)
        rows.append({"id": s["id"], "dimension": s["dimension"], "domain": s["domain"], "seed": s["seed"],
                     "difficulty": s["difficulty"], "passed": None if (err or r.infra_error) else bool(r.passed),
                     "score": None if (err or r.infra_error) else r.score, "steps": rollouts.steps(tr),
                     "error": err, "infra_error": r.infra_error, "reason": (r.details or {}).get("reason")})
    summary = summarize(rows)
    log("regression: " + ", ".join(f"{k} {v['pass_rate'] if v['pass_rate'] is None else round(100 * v['pass_rate'], 1)}%"
                                   for k, v in summary.items()))
    return {"config": cfg, "summary": summary, "rows": rows}


def summarize(rows: list[dict]) -> dict:
    g: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        g[r["dimension"]].append(r)
        g["all"].append(r)
    out = {}
    for dim, rs in sorted(g.items()):
        scored = [r for r in rs if r["passed"] is not None]
        out[dim] = {"tasks": len(rs), "scored": len(scored), "passed": sum(r["passed"] for r in scored),
                    "pass_rate": sum(r["passed"] for r in scored) / len(scored) if scored else None,
                    "mean_steps": sum(r["steps"] for r in rs) / len(rs),
                    "errors": sum(1 for r in rs if r["error"]), "infra_errors": sum(1 for r in rs if r["infra_error"])}
    return out


def _cell(r: dict | None) -> str:
    if r is None:
        return "absent"
    if r["passed"] is None:
        return "error" if r["error"] else "infra"
    return ("pass" if r["passed"] else "fail") + f"/{r['steps']}"


def compare(before: dict, after: dict) -> tuple[str, int]:
    """Per-task before/after table (pass|fail/steps) and per-dimension summary; returns (text, tasks changed).

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
    lines.append(f"{'dimension':<14} {'pass before':>12} {'pass after':>12} {'steps before':>13} {'steps after':>12}")
    sb, sa = before["summary"], after["summary"]
    for dim in sorted(set(sb) | set(sa)):
        def pr(s):
            return "-" if s is None or s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"

        def st(s):
            return "-" if s is None else f"{s['mean_steps']:.2f}"
        lines.append(f"{dim:<14} {pr(sb.get(dim)):>12} {pr(sa.get(dim)):>12} {st(sb.get(dim)):>13} {st(sa.get(dim)):>12}")
    lines.append(f"{changed} task(s) changed pass/fail (marked *)")
    return "\n".join(lines), changed
