"""pass@k per family on the held-out domains (domains split "heldout": never trained on).

The project's one evaluation protocol (domains/evaluate.py) on generated held-out tasks: n independent rollouts
per task at temperature T (seeded), pass@k = the unbiased estimator of Chen et al. (2021) over the samples that
were scored, pass_rate = passed / scored samples with its Wilson interval over tasks (target errors and verifier
infra errors are counted, not scored). The items differ from the quick eval's (the domains datasets' eval split):
SEED_BASE seeds, `per_domain` each, held-out domains only.
"""
from __future__ import annotations

from collections import defaultdict

import domains
from domains import evaluate

SEED_BASE = 6_000_000  # outside every domains datasets seed range (see regression_set.yaml)


def select(cfg: dict) -> list[tuple]:
    """The (domain, task) items; a bad cfg (k outside 1..n, families without held-out domains) is a ValueError."""
    n, ks = int(cfg.get("n", 4)), [int(k) for k in cfg.get("k", [1])]
    if any(k < 1 or k > n for k in ks):
        raise ValueError(f"heldout.k={ks} must be within 1..heldout.n={n}")
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
    items = select(cfg)
    recs = evaluate.run(target, items, pool, n=n, temperature=temp, seed=int(cfg.get("seed", 0)),
                        max_tokens=int(cfg.get("max_tokens", 192)), slots=int(cfg.get("sandbox_slots", 2)))
    rows = [{"domain": r["domain"], "family": r["family"], "seed": r["seed"], "difficulty": r["difficulty"],
             "n": evaluate.scored(r), "correct": r["passed"], "errors": r["samples"] - evaluate.scored(r),
             "error_examples": sorted({o["error"] or o["infra_error"] for o in r["outcomes"]
                                       if o["error"] or o["infra_error"]})[:2]} for r in recs]
    rates = evaluate.summarize(recs, by=("family",))
    summary = {}
    for f, at_k in evaluate.pass_at_k(recs, ks).items():
        g = rates[f]
        summary[f] = {"tasks": g["tasks"], "samples_errors": g["errors"] + g["infra_errors"], **at_k,
                      "pass_rate": g["pass_rate"], "ci95": g["ci95"]}
    log("heldout: " + ", ".join(f"{f} pass@{ks[-1]}={v[f'pass@{ks[-1]}']}" for f, v in summary.items()))
    return {"config": cfg, "summary": summary, "rows": rows}


def table(summary: dict) -> str:
    """pass@k (%) and sample errors per family."""
    ks = sorted({k for s in summary.values() for k in s if k.startswith("pass@")}, key=lambda k: int(k[5:]))
    lines = [f"{'family':<12}{'tasks':>6}" + "".join(f"{k:>10}" for k in ks) + f"{'errors':>8}"]
    for f, s in summary.items():
        lines.append(f"{f:<12}{s['tasks']:>6}" + "".join(f"{'-' if s[k] is None else format(100 * s[k], '.1f'):>10}"
                                                       for k in ks) + f"{s['samples_errors']:>8}")
    return "\n".join(lines)
