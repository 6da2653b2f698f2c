"""Benchmark: cold-start latency per tier vs a plain subprocess, and throughput at concurrency 1/2/4/8.

    python -m sandbox.bench                      # writes results/bench/sandbox.json
    python -m sandbox.bench --n 30 --tasks 100   # quicker

Latency = one `pool.run()` of `python3 -c 'print(1)'` end to end (spawn, supervise, cleanup, wipe), serial,
interleaved with the plain-subprocess baseline so both see the same machine load (the machine is shared).
Throughput = tasks/s of the same task through Pool(slots=c) with the best tier, and the baseline at the same
concurrency. Goals on 2 cores: best tier p50 <= 40 ms, >= 40 tasks/s at concurrency 8.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone

from .pool import Pool
from .task import Task
from .tiers import TIERS

CMD = ["python3", "-c", "print(1)"]


def plain() -> None:
    p = subprocess.run(["/usr/bin/python3", "-c", "print(1)"], capture_output=True)
    assert p.stdout == b"1\n"


def pct(xs: list[float], q: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(round(q * (len(xs) - 1))))]


def summary_ms(xs: list[float]) -> dict:
    return {"p50_ms": round(pct(xs, 0.5) * 1e3, 2), "p99_ms": round(pct(xs, 0.99) * 1e3, 2),
            "mean_ms": round(statistics.mean(xs) * 1e3, 2), "n": len(xs)}


def latency(tier: str, n: int) -> dict:
    try:
        pool = Pool(slots=1, tier=tier)
    except RuntimeError as e:
        return {"available": False, "why": str(e)[:300]}
    with pool:
        for _ in range(3):
            pool.run(Task(cmd=CMD))
        sb, base, inner, bad = [], [], [], 0
        for _ in range(n):
            t = time.perf_counter()
            plain()
            base.append(time.perf_counter() - t)
            t = time.perf_counter()
            r = pool.run(Task(cmd=CMD))
            sb.append(time.perf_counter() - t)
            inner.append(r.wall_s)
            bad += r.stdout != "1\n"
    return {"available": True, "end_to_end": summary_ms(sb), "task_wall": summary_ms(inner),
            "plain_subprocess": summary_ms(base), "overhead_p50_ms": round((pct(sb, .5) - pct(base, .5)) * 1e3, 2),
            "wrong_outputs": bad}


def throughput(conc: int, tasks: int) -> dict:
    with Pool(slots=conc) as pool:
        pool.map([Task(cmd=CMD)] * conc)
        t = time.perf_counter()
        rs = pool.map([Task(cmd=CMD)] * tasks)
        dt = time.perf_counter() - t
        tier = pool.tier
    with ThreadPoolExecutor(conc) as ex:
        t = time.perf_counter()
        list(ex.map(lambda _: plain(), range(tasks)))
        dt_plain = time.perf_counter() - t
    return {"tier": tier, "tasks": tasks, "tasks_per_s": round(tasks / dt, 1),
            "plain_subprocess_tasks_per_s": round(tasks / dt_plain, 1),
            "infra_errors": sum(r.infra_error is not None for r in rs), "wrong_outputs": sum(r.stdout != "1\n" for r in rs)}


def machine() -> dict:
    model = ""
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return {"cores": os.cpu_count(), "cpu_model": model, "gpu": None, "kernel": platform.release(),
            "loadavg_at_start": list(os.getloadavg())}


def git_commit() -> str | None:
    """HEAD, with "+dirty" when sandbox/ has uncommitted changes (the numbers are then not of HEAD)."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, check=True).stdout.strip()
        here = os.path.dirname(os.path.abspath(__file__))
        dirty = subprocess.run(["git", "status", "--porcelain", "--", here], capture_output=True, text=True).stdout.strip()
        return head + ("+dirty" if dirty else "")
    except Exception:  # noqa: BLE001
        return None


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="python -m sandbox.bench", description=__doc__.split("\n\n")[0])
    ap.add_argument("--n", type=int, default=100, help="serial runs per tier for latency")
    ap.add_argument("--tasks", type=int, default=300, help="tasks per throughput point")
    ap.add_argument("--out", default="results/bench/sandbox.json")
    a = ap.parse_args(argv)
    out = {"schema": {"name": "bench.sandbox", "version": 1},
           "created": datetime.now(timezone.utc).isoformat(timespec="seconds"),
           "git_commit": git_commit(), "machine": machine(), "baseline": "plain_subprocess",
           "task": " ".join(CMD), "latency": {}, "throughput": {}}
    for tier in TIERS:
        out["latency"][tier] = latency(tier, a.n)
        print(tier, json.dumps(out["latency"][tier]), flush=True)
    for c in (1, 2, 4, 8):
        out["throughput"][str(c)] = throughput(c, a.tasks)
        print("concurrency", c, json.dumps(out["throughput"][str(c)]), flush=True)
    best = next((t for t in TIERS if out["latency"][t].get("available")), None)
    p50 = out["latency"][best]["end_to_end"]["p50_ms"] if best else None
    tps8 = out["throughput"]["8"]["tasks_per_s"]
    out["goals"] = {"best_tier": best, "p50_ms": p50, "p50_goal_ms": 40, "p50_met": p50 is not None and p50 <= 40,
                    "tasks_per_s_at_8": tps8, "tasks_per_s_goal": 40, "throughput_met": tps8 >= 40}
    os.makedirs(os.path.dirname(os.path.abspath(a.out)), exist_ok=True)
    with open(a.out, "w") as fh:
        json.dump(out, fh, indent=2)
    print(f"wrote {a.out}: {json.dumps(out['goals'])}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
