"""Pass rate per family and split (train / held-out domains) of the engine's current weights, greedy.

Used for the periodic evaluation of rl/02_train.py and by the experiments: tasks come from the domains
export's eval split (seeds disjoint from RL's), at most `per_domain` per domain. Infra errors are counted
and left out of the pass rates.
"""
from __future__ import annotations

import json
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


def evaluate(engine, renderer, items: list, pool: Any, reward_cfg, max_tokens: int, rollout_cfg=None) -> dict:
    """rollout_cfg (RolloutConfig): the long lane's budget and the tool retries, as in training."""
    lane = {} if rollout_cfg is None else dict(long_timeout_s=rollout_cfg.long_timeout_s,
                                                tool_retries=rollout_cfg.tool_retries,
                                                retry_backoff_s=rollout_cfg.tool_retry_backoff_s)
    rolls = trajectory.rollout(engine, renderer, items, n=1, temperature=0.0, top_p=1.0, max_tokens=max_tokens,
                               seed=0, pool=pool, sandbox_slots=reward_cfg.sandbox_slots, **lane)
    rs = rewards.score_all(rolls, pool, reward_cfg)
    agg: dict[tuple[str, str], dict] = defaultdict(lambda: {"tasks": 0, "passed": 0, "infra_errors": 0,
                                                            "tool_retries": 0, "cut": 0})
    for r, rw in zip(rolls, rs):
        for key in ((r.task.family, r.domain.split), ("all", r.domain.split)):
            g = agg[key]
            g["tasks"] += 1
            g["tool_retries"] += r.tool_retries
            g["cut"] += int(r.cut)
            g["infra_errors"] += int(rw.infra_error is not None)
            g["passed"] += int(rw.infra_error is None and rw.passed)
    table: dict[str, dict] = {}
    for (fam, split), g in sorted(agg.items()):
        scored = g["tasks"] - g["infra_errors"]
        table.setdefault(fam, {})[split] = {**g, "pass_rate": g["passed"] / scored if scored else None}
    return table
