"""RL's rewards: the domain verifiers through domains.scoring (two lanes, deadlines, never raising), shaped.

    rewards = score_all(rollouts, pool, RewardConfig())   # one domains.Reward per rollout, in order
    value = shaped(rollout, reward, format_weight)        # outcome score + optional process-reward bonus
"""
from __future__ import annotations

from typing import Any

from domains.core import Reward
from domains.scoring import verify_all


def score_all(rollouts: list, pool: Any, cfg) -> list[Reward]:
    """One Reward per rollout (domains.scoring.verify_all with RewardConfig's lanes and deadlines); a rollout the
    loop marked (r.infra_error: tool failed after retries, cut at its budget) is infra without verifying."""
    todo = [i for i, r in enumerate(rollouts) if not getattr(r, "infra_error", None)]
    got = verify_all([(rollouts[i].domain, rollouts[i].task, rollouts[i].messages) for i in todo], pool,
                     timeout_s=cfg.timeout_s, sandbox_timeout_s=cfg.sandbox_timeout_s, workers=cfg.workers,
                     sandbox_slots=cfg.sandbox_slots)
    out = [Reward.infra(f"rollout: {r.infra_error}") if getattr(r, "infra_error", None) else None for r in rollouts]
    for i, rw in zip(todo, got):
        out[i] = rw
    return out


def shaped(r, reward: Reward, format_weight: float) -> float:
    """Outcome score, plus an optional bonus for well-formed steps (the domain's process rewards)."""
    if not format_weight:
        return float(reward.score)
    try:
        pr = r.domain.process_rewards(r.task, r.messages)
    except Exception:  # noqa: BLE001 - a broken process reward only loses the bonus
        pr = []
    return float(reward.score) + format_weight * (sum(pr) / len(pr) if pr else 0.0)
