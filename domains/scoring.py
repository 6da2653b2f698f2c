"""Verify many trajectories at once, never crashing and never guessing: what RL rewards and every eval score with.

    rewards = verify_all([(domain, task, trajectory), ...], pool)   # one domains.Reward per job, in order

- Fast lane: pure-Python verifiers, `workers` at a time, `timeout_s` each.
- Sandbox lane: verifiers that run code (Domain.needs_sandbox), `sandbox_slots` at a time, `sandbox_timeout_s`
  each, so slow programs queue among themselves and never hold up the fast lane.
Every verification runs in a daemon thread with its own deadline: a verifier that raises, hangs or returns
something that is not a Reward becomes `Reward.infra(...)`, which training excludes and eval counts (never a 0 or 1).
A trajectory the rollout loop marked (tool failed after its retries, cut at its wall budget) is infra as well,
also for plug-ins that override Domain.verify.
"""
from __future__ import annotations

import threading
import time
from typing import Any

from domains.core import Reward, infra_mark

TIMEOUT_S = 10.0  # per verification, fast lane
SANDBOX_TIMEOUT_S = 30.0  # per verification, sandbox lane
WORKERS = 8  # concurrent fast-lane verifications
SANDBOX_SLOTS = 2  # concurrent sandbox-lane verifications (the pool's size)


def _verify(job, pool, timeout_s: float) -> Reward:
    domain, task, traj = job
    mark = infra_mark(traj)
    if mark:
        return Reward.infra(f"rollout: {mark}")
    try:
        out = domain.verify(task, traj, pool=pool, timeout_s=timeout_s)
    except Exception as e:  # noqa: BLE001 - a plug-in verify() may break the never-raises contract
        return Reward.infra(f"verifier raised {type(e).__name__}: {e}")
    if not isinstance(out, Reward) or not 0.0 <= float(out.score) <= 1.0:
        return Reward.infra(f"verifier returned {out!r}, not a Reward with score in [0, 1]")
    return out


def _lane(idx: list[int], jobs: list, pool, timeout_s: float, width: int, out: list, lock: threading.Lock) -> None:
    """Run jobs `width` at a time, each in a daemon thread with its own deadline (timeout_s + 1 s of grace).

    A job past its deadline is recorded as an infra error and its slot is reused; if its thread ever finishes,
    the late result is dropped (first writer wins under the lock)."""
    pending = list(idx)
    running: list[tuple[int, threading.Thread, float]] = []

    def run(i: int) -> None:
        res = _verify(jobs[i], pool, timeout_s)
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


def verify_all(jobs: list[tuple[Any, Any, list[dict]]], pool: Any = None, *, timeout_s: float = TIMEOUT_S,
               sandbox_timeout_s: float = SANDBOX_TIMEOUT_S, workers: int = WORKERS,
               sandbox_slots: int = SANDBOX_SLOTS) -> list[Reward]:
    """jobs: (Domain, Task, trajectory) triples -> one Reward each, in order."""
    out: list[Reward | None] = [None] * len(jobs)
    slow = [i for i, (d, _, _) in enumerate(jobs) if d.needs_sandbox]
    fast = [i for i, (d, _, _) in enumerate(jobs) if not d.needs_sandbox]
    lock = threading.Lock()
    lane = threading.Thread(target=_lane, daemon=True, args=(slow, jobs, pool, sandbox_timeout_s, sandbox_slots, out, lock))
    lane.start()
    _lane(fast, jobs, pool, timeout_s, workers, out, lock)
    lane.join()
    return [o if o is not None else Reward.infra("verifier produced no result") for o in out]
