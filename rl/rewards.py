"""Rewards from the domain verifiers, concurrently, in two lanes, never crashing and never guessing.

    rewards = score_all(rollouts, pool, RewardConfig())   # one domains.Reward per rollout, in order

- Fast lane: pure-Python verifiers, `workers` at a time, `timeout_s` each.
- Sandbox lane: verifiers that run code (Domain.needs_sandbox), `sandbox_slots` at a time, `sandbox_timeout_s`
  each, so slow programs queue among themselves and never hold up the fast lane.
Every verification runs in a daemon thread with its own deadline: a verifier that raises, hangs or returns
something that is not a Reward becomes `Reward.infra(...)`, which training excludes and counts (never a 0 or 1).
"""
from __future__ import annotations

import threading
import time
from typing import Any

from domains.core import Reward


def _verify(r, pool, timeout_s: float) -> Reward:
    if getattr(r, "infra_error", None):  # the rollout loop's mark (tool failed after retries, cut at its budget):
        return Reward.infra(f"rollout: {r.infra_error}")  # also for plug-ins that override Domain.verify
    try:
        out = r.domain.verify(r.task, r.messages, pool=pool, timeout_s=timeout_s)
    except Exception as e:  # noqa: BLE001 - a plug-in verify() may break the never-raises contract
        return Reward.infra(f"verifier raised {type(e).__name__}: {e}")
    if not isinstance(out, Reward) or not 0.0 <= float(out.score) <= 1.0:
        return Reward.infra(f"verifier returned {out!r}, not a Reward with score in [0, 1]")
    return out


def _lane(jobs: list[int], rollouts, pool, timeout_s: float, width: int, out: list, lock: threading.Lock) -> None:
    """Run jobs `width` at a time, each in a daemon thread with its own deadline (timeout_s + 1 s of grace).

    A job past its deadline is recorded as an infra error and its slot is reused; if its thread ever finishes,
    the late result is dropped (first writer wins under the lock)."""
    pending = list(jobs)
    running: list[tuple[int, threading.Thread, float]] = []

    def run(i: int) -> None:
        res = _verify(rollouts[i], pool, timeout_s)
        with lock:
            if out[i] is None:
                out[i] = res

    while pending or running:
        while pending and len(running) < max(1, width):
            i = pending.pop(0)
            t = threading.Thread(target=run, args=(i,), daemon=True)  # daemon: a hung verifier cannot block exit
            t.start()
            running.append((i, t, time.monotonic() + timeout_s + 1.0))
        still = []
        for i, t, deadline in running:
            if not t.is_alive():
                continue
            if time.monotonic() > deadline:
                with lock:
                    if out[i] is None:
                        out[i] = Reward.infra(f"verifier hung past {timeout_s}s")
                continue
            still.append((i, t, deadline))
        running = still
        if running:
            time.sleep(0.002)


def score_all(rollouts: list, pool: Any, cfg) -> list[Reward]:
    out: list[Reward | None] = [None] * len(rollouts)
    slow = [i for i, r in enumerate(rollouts) if r.domain.needs_sandbox]
    fast = [i for i, r in enumerate(rollouts) if not r.domain.needs_sandbox]
    lock = threading.Lock()
    lane = threading.Thread(target=_lane, daemon=True,
                            args=(slow, rollouts, pool, cfg.sandbox_timeout_s, cfg.sandbox_slots, out, lock))
    lane.start()
    _lane(fast, rollouts, pool, cfg.timeout_s, cfg.workers, out, lock)
    lane.join()
    return [o if o is not None else Reward.infra("verifier produced no result") for o in out]


def shaped(r, reward: Reward, format_weight: float) -> float:
    """Outcome score, plus an optional bonus for well-formed steps (the domain's process rewards)."""
    if not format_weight:
        return float(reward.score)
    try:
        pr = r.domain.process_rewards(r.task, r.messages)
    except Exception:  # noqa: BLE001 - a broken process reward only loses the bonus
        pr = []
    return float(reward.score) + format_weight * (sum(pr) / len(pr) if pr else 0.0)
