"""`python -m domains check`: every oracle through its verifier, on every domain and difficulty.

Per (domain, difficulty, seed) it asserts: generate() twice gives byte-identical JSON; Task round-trips through
to_dict/from_dict; the oracle trajectory passes with score 1.0 and no infra_error; a null answer fails;
process_rewards has one value in [0, 1] per assistant message.

    .venv/bin/python -m domains check                      # all domains (sandbox families need sandbox/)
    .venv/bin/python -m domains check --families math,scene --seeds 3
"""
from __future__ import annotations

import json
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from domains.core import Domain, Task


@dataclass
class CheckResult:
    domain: str
    family: str
    difficulty: int
    seed: int
    ok: bool
    problems: list[str] = field(default_factory=list)
    seconds: float = 0.0


def null_trajectory(task: Task) -> list[dict]:
    return [{"role": "assistant", "content": ""}]


def check_one(d: Domain, difficulty: int, seed: int, pool: Any) -> CheckResult:
    t0, problems = time.time(), []
    try:
        a, b = d.generate(seed, difficulty), d.generate(seed, difficulty)
        if a.to_json() != b.to_json():
            problems.append("generate is not deterministic (same seed, different bytes)")
        if Task.from_dict(json.loads(a.to_json())).to_json() != a.to_json():
            problems.append("Task does not round-trip through to_dict/from_dict")
        traj = d.solve(a, pool)
        r = d.verify(a, traj, pool)
        if r.infra_error or not r.passed or r.score != 1.0:
            problems.append(f"oracle failed its verifier: {json.dumps(r.to_dict(), default=str)[:400]}")
        n_assistant = sum(m["role"] == "assistant" for m in traj)
        if n_assistant > a.max_turns:
            problems.append(f"oracle uses {n_assistant} turns > max_turns {a.max_turns}")
        pr = d.process_rewards(a, traj)
        if len(pr) != n_assistant or not all(0.0 <= x <= 1.0 for x in pr):
            problems.append(f"process_rewards {pr} do not match {n_assistant} assistant messages in [0, 1]")
        r0 = d.verify(a, null_trajectory(a), pool)
        if r0.passed:
            problems.append("an empty answer passes the verifier")
    except Exception as e:  # noqa: BLE001 - report, do not stop the sweep
        problems.append(f"{type(e).__name__}: {e}")
    return CheckResult(d.name, d.family, difficulty, seed, not problems, problems, round(time.time() - t0, 3))


def run_check(domains: list[Domain], seeds: list[int], pool: Any = None, workers: int = 1) -> list[CheckResult]:
    jobs = [(d, diff, s) for d in domains for diff in d.difficulties for s in seeds]
    pure = [j for j in jobs if not j[0].needs_sandbox]
    boxed = [j for j in jobs if j[0].needs_sandbox]
    out = [check_one(d, diff, s, None) for d, diff, s in pure]
    if boxed:
        with ThreadPoolExecutor(max(1, workers)) as ex:  # sandbox runs wait on subprocesses: threads overlap them
            out += list(ex.map(lambda j: check_one(j[0], j[1], j[2], pool), boxed))
    return out
