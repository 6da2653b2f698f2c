"""Pass rate of a generation function on the domains export's eval split (multi-turn, tools, verifiers).

    q = pass_rate(generate_batch, Path("data/domains"), per_domain=1, pool=pool)

The same protocol as every stage's quick eval: first `per_domain` eval tasks of each domain, greedy
multi-turn rollouts through domains.rollout_batch, each domain's verifier; infra errors are counted
and excluded, never scored as fails. serving/ may not import eval/, so this is its own small copy of
the protocol over domains/ (the regression set of eval/ is the reference once it exists).
"""
from __future__ import annotations

import json
from collections import defaultdict
from pathlib import Path
from typing import Callable


def eval_items(data_dir: Path, per_domain: int, families: list[str] | None = None) -> list:
    import datasets

    import domains

    rows = datasets.load_from_disk(str(Path(data_dir) / "eval"))
    seen: dict[str, int] = defaultdict(int)
    items = []
    for r in rows:
        if seen[r["domain"]] < per_domain and (not families or r["family"] in families):
            seen[r["domain"]] += 1
            items.append((domains.get(r["domain"]), domains.Task.from_dict(json.loads(r["task"]))))
    return items


def pass_rate(generate_batch: Callable[[list[list[dict]]], list[str]], items: list, pool=None,
              sandbox_slots: int = 2) -> dict:
    """{"pass_rate", "tasks", "passed", "infra_errors", "per_family": {fam: pass_rate}}."""
    import domains

    holds = [i for i, (d, t) in enumerate(items) if d.needs_sandbox and t.tools]
    hold = set(holds)
    waves = [[i for i in range(len(items)) if i not in hold]]  # tool sandboxes hold a pool slot each
    waves += [holds[k:k + sandbox_slots] for k in range(0, len(holds), sandbox_slots)]
    trajs: list = [None] * len(items)
    for wave in waves:
        if wave:
            for i, tr in zip(wave, domains.rollout_batch([items[i] for i in wave], generate_batch, pool)):
                trajs[i] = tr
    rewards = [d.verify(t, tr, pool=pool) for (d, t), tr in zip(items, trajs)]
    fam: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    passed = infra = 0
    for (_d, t), rw in zip(items, rewards):
        if rw.infra_error:
            infra += 1
            continue
        fam[t.family][0] += int(rw.passed)
        fam[t.family][1] += 1
        passed += int(rw.passed)
    scored = len(items) - infra
    return {"pass_rate": passed / scored if scored else None, "tasks": len(items), "passed": passed,
            "infra_errors": infra, "per_family": {f: p / n for f, (p, n) in sorted(fam.items())}}
