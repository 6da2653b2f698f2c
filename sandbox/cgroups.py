"""Per-slot cgroups: v1 memory/pids/cpuacct for limits and accounting, v2 for `cgroup.kill`.

Slots are created *below the pool process's own cgroup* in each hierarchy, so the pool stays inside
whatever limits its launcher set. Every piece is optional: a missing or unwritable controller is
skipped and reported by `SlotCgroup.features`.
"""
from __future__ import annotations

import os
import signal
import time

ROOT = "/sys/fs/cgroup"


def _own_paths() -> dict[str, str]:
    """controller -> mount dir of this process's cgroup, for the controllers we use."""
    out: dict[str, str] = {}
    try:
        lines = open("/proc/self/cgroup").read().splitlines()
    except OSError:
        return out
    for line in lines:
        _, ctrls, path = line.split(":", 2)
        for c in (ctrls.split(",") if ctrls else ["unified"]):
            if c in ("memory", "pids", "cpuacct", "unified"):
                base = os.path.join(ROOT, c)
                if c == "unified" and not os.path.exists(os.path.join(base, "cgroup.procs")):
                    base = ROOT  # pure v2 machine: the unified tree is mounted at /sys/fs/cgroup
                d = os.path.join(base, path.lstrip("/"))
                if os.path.isdir(d):
                    out[c] = d
    return out


def _write(path: str, value: str) -> bool:
    try:
        fd = os.open(path, os.O_WRONLY)
        try:
            os.write(fd, value.encode())
        finally:
            os.close(fd)
        return True
    except OSError:
        return False


def _read_int(path: str) -> int | None:
    try:
        with open(path) as fh:
            return int(fh.read().split()[0])
    except (OSError, ValueError, IndexError):
        return None


class SlotCgroup:
    def __init__(self, name: str):
        self.dirs: dict[str, str] = {}
        for ctrl, parent in _own_paths().items():
            d = os.path.join(parent, name)
            try:
                os.makedirs(d, exist_ok=True)
            except OSError:
                continue
            if ctrl == "unified" and not os.path.exists(os.path.join(d, "cgroup.kill")):
                continue  # kernel < 5.14: no cgroup.kill, fall back to kill-by-uid
            self.dirs[ctrl] = d
        self._mem_limit: int | None = None
        self.baseline_bytes = 0
        self._pids_max: int | None = None
        if "memory" in self.dirs:
            _write(os.path.join(self.dirs["memory"], "memory.swappiness"), "0")
        self.procs_files = [os.path.join(d, "cgroup.procs") for d in self.dirs.values()]

    @property
    def features(self) -> list[str]:
        return sorted(self.dirs)

    def prepare(self, memory_bytes: int | None, pids_max: int | None) -> None:
        """Set limits (only when changed) and reset the peak/CPU counters before a task."""
        m = self.dirs.get("memory")
        if m:
            # what the idle slot already uses (its resident spawner) is not the task's: add it to the
            # limit and subtract it from the peak
            self.baseline_bytes = _read_int(os.path.join(m, "memory.usage_in_bytes")) or 0
            limit = memory_bytes + self.baseline_bytes if memory_bytes else None
            if limit is None or self._mem_limit is None or abs(limit - self._mem_limit) > (1 << 20):
                _write(os.path.join(m, "memory.limit_in_bytes"), str(limit or -1))
                self._mem_limit = limit
            _write(os.path.join(m, "memory.max_usage_in_bytes"), "0")
            _write(os.path.join(m, "memory.failcnt"), "0")
        p = self.dirs.get("pids")
        if p and pids_max != self._pids_max:
            _write(os.path.join(p, "pids.max"), str(pids_max) if pids_max else "max")
            self._pids_max = pids_max
        c = self.dirs.get("cpuacct")
        if c:
            _write(os.path.join(c, "cpuacct.usage"), "0")

    def join_fds(self) -> list[str]:
        """Paths the child writes its pid to (between fork and exec, as root)."""
        return self.procs_files

    def cpu_s(self) -> float | None:
        c = self.dirs.get("cpuacct")
        v = _read_int(os.path.join(c, "cpuacct.usage")) if c else None
        return v / 1e9 if v is not None else None

    def peak_memory_mb(self) -> float | None:
        m = self.dirs.get("memory")
        v = _read_int(os.path.join(m, "memory.max_usage_in_bytes")) if m else None
        return max(0, v - self.baseline_bytes) / 2**20 if v is not None else None

    def memory_limit_hit(self) -> bool:
        m = self.dirs.get("memory")
        v = _read_int(os.path.join(m, "memory.failcnt")) if m else None
        return bool(v)

    def pids(self) -> set[int]:
        out: set[int] = set()
        for f in self.procs_files:
            try:
                with open(f) as fh:
                    out.update(int(x) for x in fh.read().split())
            except (OSError, ValueError):
                pass
        return out

    def kill(self, exclude: set[int] = frozenset()) -> bool:
        """Kill every process in the slot (escaped daemons included) except `exclude` (the slot's spawner)."""
        u = self.dirs.get("unified")
        if not exclude and u and _write(os.path.join(u, "cgroup.kill"), "1"):
            return True
        for _ in range(4):   # a few rounds: a forking task may add processes between reads
            victims = self.pids() - exclude
            if not victims:
                break
            for pid in victims:
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
        return bool(self.dirs)

    def wait_empty(self, timeout_s: float = 2.0, exclude: set[int] = frozenset()) -> bool:
        end = time.monotonic() + timeout_s
        while self.pids() - exclude:
            if time.monotonic() > end:
                return False
            time.sleep(0.002)
        return True

    def remove(self) -> None:
        for d in self.dirs.values():
            try:
                os.rmdir(d)
            except OSError:
                pass
