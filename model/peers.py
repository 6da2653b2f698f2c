"""What the side-by-side benchmarks against a peer library share (sft/bench_peers.py, rl/bench_peers.py).

Both arms run as whole processes, one after the other, and are timed the same way: this process timestamps each
per-step line as it arrives on the child's stdout, so start-up, loading and warm-up steps stay out of the rate.
"""
from __future__ import annotations

import json
import os
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from model.config import ConfigError

MARK = "PEER "  # how the peer scripts mark their lines (sft/peer_trl.py, rl/peer_trl_grpo.py print it themselves)
PEERS_VENV = Path(".venv-peers")  # `make peers-venv`: the peer libraries, pinned, never in the project's venv


def arm_args(ap, steps: int, warmup: int) -> None:
    """The options both peer benchmarks take: steps, warm-up, rounds, the peer's threads and environment."""
    ap.add_argument("--steps", type=int, default=steps, help="optimizer steps per arm")
    ap.add_argument("--warmup", type=int, default=warmup, help="first steps left out of the rates")
    ap.add_argument("--rounds", type=int, default=2, help="times each arm runs (alternating order)")
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="the peer's torch threads (ours: torch default)")
    ap.add_argument("--peers-venv", type=Path, default=PEERS_VENV, help="the peer's environment (make peers-venv)")


def check_arm_args(a) -> Path:
    """Refuse step counts that leave fewer than 3 timed steps; the peer environment's python."""
    if a.steps < a.warmup + 3 or a.warmup < 1:
        raise ConfigError(f"--steps {a.steps} --warmup {a.warmup}: need warmup >= 1 and steps >= warmup + 3")
    return peer_python(a.peers_venv)


def messages(lines: list[tuple[float, str]]) -> list[tuple[float, dict]]:
    """The peer script's marked JSON lines ("PEER {...}"), with their arrival times; its other output is left."""
    return [(t, json.loads(ln[len(MARK):])) for t, ln in lines if ln.startswith(MARK)]


def peer_python(venv: Path) -> Path:
    py = venv / "bin" / "python"
    if not py.exists():
        raise ConfigError(f"no peer environment at {venv}: run `make peers-venv` (installs TRL there, pinned)")
    return py


def timed_lines(cmd: list[str], *, env: dict | None = None, what: str = "run") -> list[tuple[float, str]]:
    """Run cmd; return (perf_counter when it arrived, line) for each stdout line. A failure raises with the stderr
    tail. The child must flush its lines (print(..., flush=True) or PYTHONUNBUFFERED)."""
    env = {**(env or os.environ), "PYTHONUNBUFFERED": "1"}
    out: list[tuple[float, str]] = []
    with tempfile.TemporaryFile(mode="w+") as err:
        p = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=err, text=True, env=env)
        for line in p.stdout:
            out.append((time.perf_counter(), line.rstrip("\n")))
        if p.wait():
            err.seek(0)
            raise RuntimeError(f"{what} failed (exit {p.returncode}): {' '.join(cmd)}\n{err.read()[-3000:]}")
    return out


def steady(points: list[tuple[float, int, float]], warmup: int) -> dict:
    """points: (time, step, amount done in that step). The rate over the steps after `warmup`: the amount of steps
    warmup+1..last over the time from step warmup's line to the last one, and the median step time."""
    if warmup < 1:
        raise ValueError("warmup must be >= 1: the first step's start is not observed")
    pts = sorted(points, key=lambda p: p[1])
    if len(pts) < warmup + 2:
        raise RuntimeError(f"{len(pts)} step lines: need more than warmup {warmup} + 1")
    t0 = pts[warmup - 1][0]
    timed = pts[warmup:]
    seconds = timed[-1][0] - t0
    dts = [b[0] - a[0] for a, b in zip(pts[warmup - 1:], timed)]
    amount = sum(p[2] for p in timed)
    return {"steps": len(timed), "seconds": seconds, "amount": amount, "per_s": amount / seconds,
            "step_s_median": statistics.median(dts), "step_s_all": [round(d, 4) for d in dts]}


def write_section(path: Path, name: str, section: dict) -> None:
    """Replace one section of a peers results file (sft, grpo), keeping the others: each carries its own time,
    commit and machine, as the sections may come from different runs."""
    from model import results

    doc = json.loads(path.read_text()) if path.exists() else {}
    kept = {k: v for k, v in doc.get("sections", {}).items() if k != name}
    results.write(path, "bench.peers", {"sections": {**kept, name: {**results.stamp(), **section}}})


def alternate(arms: dict, rounds: int, rate_key: str, unit: str) -> dict[str, list[dict]]:
    """Run each arm (name -> callable returning a result with result["rate"][rate_key]) `rounds` times, back to back,
    in reversed order every other round (a drift of the machine's speed then weighs on every arm alike)."""
    out: dict[str, list[dict]] = {k: [] for k in arms}
    for r in range(rounds):
        for name in (list(arms) if r % 2 == 0 else list(arms)[::-1]):
            load0 = os.getloadavg()
            print(f"round {r + 1}/{rounds}: {name}", flush=True)
            res = arms[name]()
            res.update(round=r + 1, load_average_start=load0, load_average_end=os.getloadavg())
            out[name].append(res)
            print(f"  {name}: {res['rate'][rate_key]:.1f} {unit}, step {res['rate']['step_s_median']:.3f} s", flush=True)
    return out


def median_of(runs: dict[str, list[dict]], key: str) -> dict[str, float]:
    return {k: statistics.median(x["rate"][key] for x in v) for k, v in runs.items()}
