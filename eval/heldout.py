"""pass@k per family on the held-out domains (domains split "heldout": never trained on).

Every task gets n samples at temperature T: single-turn tasks in one request (vLLM n), tool tasks as n
independent rollouts. pass@k is the unbiased estimator of Chen et al. (2021), 1 - C(n-c, k) / C(n, k), over the
samples that were scored (target errors and verifier infra errors are counted, not scored).
"""
from __future__ import annotations

import math
from collections import defaultdict

import domains
from domains import chat
from domains.core import Task
from eval import rollouts

SEED_BASE = 6_000_000  # outside every domains export range (see regression_set.yaml)


def pass_at_k(n: int, c: int, k: int) -> float:
    if n - c < k:
        return 1.0
    return 1.0 - math.comb(n - c, k) / math.comb(n, k)


def select(cfg: dict) -> list[tuple]:
    fams = cfg.get("families")
    ds = [d for d in domains.registry().values() if d.split == "heldout" and (not fams or d.family in fams)]
    if fams and not ds:
        raise ValueError(f"heldout.families={fams}: no held-out domains there")
    if cfg.get("max_domains"):
        per_fam: dict[str, list] = defaultdict(list)
        for d in ds:
            per_fam[d.family].append(d)
        ds = [d for f in sorted(per_fam) for d in per_fam[f][:int(cfg["max_domains"])]]
    diff = int(cfg.get("difficulty", 0))
    return [(d, d.generate(SEED_BASE + i, diff if diff in d.difficulties else min(d.difficulties)))
            for d in ds for i in range(int(cfg.get("per_domain", 1)))]


def run(target, cfg: dict, pool, log=print) -> dict:
    n, ks, temp = int(cfg.get("n", 4)), [int(k) for k in cfg.get("k", [1])], float(cfg.get("temperature", 0.8))
    if any(k < 1 or k > n for k in ks):
        raise ValueError(f"heldout.k={ks} must be within 1..n={n}")
    items = select(cfg)
    mt, seed = int(cfg.get("max_tokens", 192)), int(cfg.get("seed", 0))
    samples: list[list[tuple[bool | None, str | None]]] = [[] for _ in items]  # (passed|None, error) per sample
    single = [i for i, (_, t) in enumerate(items) if not t.tools]
    if single:
        gens = target.generate([items[i][1].messages for i in single], n=n, temperature=temp, max_tokens=mt, seed=seed)
        for i, g in zip(single, gens):
            d, t = items[i]
            if g.error:
                samples[i] = [(None, g.error)] * n
                continue
            for text in g.texts:
                try:
                    traj = [chat.parse_assistant(text)]
                except chat.ToolCallError:
                    traj = [{"role": "assistant", "content": text}]
                r = d.verify(t, traj, pool=pool)
                samples[i].append((None if r.infra_error else bool(r.passed), r.infra_error))
    multi = [i for i, (_, t) in enumerate(items) if t.tools]
    if multi:
        reps = [(i, items[i][0], Task.from_dict(items[i][1].to_dict())) for i in multi for _ in range(n)]
        trajs, errs = rollouts.run(target, [(d, t) for _, d, t in reps], pool, slots=int(cfg.get("sandbox_slots", 2)),
                                   max_tokens=mt, temperature=temp, seed=seed)
        for (i, d, t), tr, err in zip(reps, trajs, errs):
            if err:
                samples[i].append((None, err))
            else:
                r = d.verify(t, tr, pool=pool)
                samples[i].append((None if r.infra_error else bool(r.passed), r.infra_error))
    rows = []
    for (d, t), ss in zip(items, samples):
        scored = [p for p, _ in ss if p is not None]
        rows.append({"domain": d.name, "family": d.family, "seed": t.seed, "difficulty": t.difficulty,
                     "n": len(scored), "correct": sum(scored), "errors": len(ss) - len(scored),
                     "error_examples": sorted({e for _, e in ss if e})[:2]})
    fam: dict[str, list[dict]] = defaultdict(list)
    for r in rows:
        fam[r["family"]].append(r)
        fam["all"].append(r)
    summary = {}
    for f, rs in sorted(fam.items()):
        summary[f] = {"tasks": len(rs), "samples_errors": sum(r["errors"] for r in rs)}
        for k in ks:
            ok = [pass_at_k(r["n"], r["correct"], k) for r in rs if r["n"] >= k]
            summary[f][f"pass@{k}"] = sum(ok) / len(ok) if ok else None
            summary[f][f"tasks_scored@{k}"] = len(ok)
    log("heldout: " + ", ".join(f"{f} pass@{ks[-1]}={v[f'pass@{ks[-1]}']}" for f, v in summary.items()))
    return {"config": cfg, "summary": summary, "rows": rows}
