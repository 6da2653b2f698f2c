"""A persistent bash in one sandbox: several commands, cwd/env kept between them (terminal tasks).

    with pool.session(files={"d/x.txt": "hi"}, limits=Limits(memory_mb=256)) as sh:
        sh.run("cd d && export A=1")
        r = sh.run("cat x.txt; echo $A", timeout_s=5)     # Result of this command only

Each command runs via `eval` in the shell itself (so `cd`/`export` persist) with stdin from /dev/null;
markers with a random nonce delimit its output. On timeout the command's processes are killed (the
shell survives); if the shell itself is stuck (a builtin loop) or exits, a fresh shell is started in
the same work dir (files kept, cwd/env reset) and the Result's stderr says so.
The slot is held for the session's life and wiped when it ends.
"""
from __future__ import annotations

import base64
import os
import re
import secrets
import selectors
import time

from .result import Result
from .task import Limits, Task
from .workdir import WorkDir

TAIL = 4096


class Session:
    def __init__(self, pool, files: dict, limits: Limits, env: dict[str, str]):
        self.pool, self.limits, self.env = pool, limits, env
        self._files = Task(cmd=["bash"], files=files, limits=limits).files   # validates paths
        self.slot = None
        self.proc = None
        self.protected: set[int] = set()
        self.commands = 0

    # ---- lifecycle ----------------------------------------------------------------------------
    def __enter__(self) -> "Session":
        self.slot = self.pool._acquire()
        try:
            if self.slot.spawner is not None and not self.slot.spawner.alive():
                self.slot.start_spawner()
            self.slot.prepare(self.limits, self._files)
            self._start_shell()
        except BaseException:
            self.close()
            raise
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    def _start_shell(self) -> None:
        env = self.slot._env(dict(self.env, PS1="", PS2=""), self.limits)
        lim = self.limits
        self.proc = self.slot.spawn(["/bin/bash", "--noprofile", "--norc"], env, lim, stdin_pipe=True)
        # the bwrap status pipe stays open (closing it would SIGPIPE bwrap); its two lines fit the buffer
        with self.slot.rt.lock:
            self.slot.rt.active_mains.add(self.proc.pid)
        for f in (self.proc.stdout, self.proc.stderr):
            os.set_blocking(f.fileno(), False)
        self._buf = {"out": bytearray(), "err": bytearray()}
        ready = self._exchange("true", 30.0)
        if ready.infra_error or ready.timed_out:
            raise RuntimeError(f"session shell did not start: {ready.infra_error or ready.stderr[-300:]}")
        self.protected = self.slot._leftovers()   # bwrap + init + bash: never killed by a timeout

    def _stop_shell(self) -> int | None:
        """Kill the shell and all of the slot's processes; returns the shell's wait status."""
        if self.proc is None:
            return None
        proc, self.proc = self.proc, None
        if not proc.poll():
            self.slot.kill_all(proc)
            if hasattr(proc, "wait"):
                proc.wait(2.0)
            else:
                proc.collect_exit()
        proc.close()
        with self.slot.rt.lock:
            self.slot.rt.active_mains.discard(proc.pid)
        self.slot.kill_all()
        return proc.wait_status

    def close(self) -> None:
        if self.slot is None:
            return
        slot, self.slot = self.slot, None
        try:
            self._stop_shell_with(slot)
            slot.cleanup()
        except Exception as e:  # noqa: BLE001 - a broken slot is rebuilt rather than reused
            slot = self.pool._rebuild(slot, e)
        finally:
            self.pool._release(slot)

    def _stop_shell_with(self, slot) -> None:
        self.slot = slot
        try:
            self._stop_shell()
        finally:
            self.slot = None

    # ---- commands -----------------------------------------------------------------------------
    def run(self, command: str, timeout_s: float | None = None) -> Result:
        """Run one shell command; returns its Result (files diff and counters are per command)."""
        if self.slot is None:
            raise RuntimeError("session is closed; open a new one with pool.session(...)")
        if not isinstance(command, str):
            raise ValueError("Session.run(command) takes a shell command string")
        timeout_s = self.limits.wall_s if timeout_s is None else float(timeout_s)
        note = ""
        if self.proc is None or self.proc.poll():
            self._stop_shell()
            self._start_shell()
            note = "sandbox: shell restarted; cwd and environment reset\n"
        before = self.slot.work.snapshot()
        if self.slot.cg:
            self.slot.cg.prepare((self.limits.memory_mb << 20) if "memory" in self.slot.cg.dirs else None,
                                 self.limits.nproc + self.slot.overhead + (1 if self.slot.spawner else 0))
        r = self._exchange(command, timeout_s)
        r.stderr = note + r.stderr
        r.files = WorkDir.diff(before, self.slot.work.snapshot())
        self.commands += 1
        task = Task(script=command, limits=self.limits, id=f"session-cmd-{self.commands}")
        r.task_hash, r.task_id = task.hash(), task.id
        self.pool.audit.record(task, r, self.slot.index, kind="session")
        return r

    def _exchange(self, command: str, timeout_s: float) -> Result:
        slot, lim, p = self.slot, self.limits, self.proc
        nonce = secrets.token_hex(8)
        b64 = base64.b64encode(command.encode()).decode()
        line = (f"eval \"$(printf %s {b64} | base64 -d)\" </dev/null; __sbx_rc=$?; "
                f"printf '\\n__SBX_{nonce}_%d__\\n' $__sbx_rc; printf '\\n__SBX_{nonce}__\\n' >&2\n")
        r = Result(tier=slot.rt.tier, env_hash=slot.rt.env_hash)
        t0 = time.monotonic()
        try:
            p.stdin.write(line.encode())
            p.stdin.flush()
        except (BrokenPipeError, OSError):
            r.infra_error = None
            r.stderr = "sandbox: the session shell has exited\n"
            self._stop_shell()
            return r
        pat_out = re.compile(rb"\n__SBX_" + nonce.encode() + rb"_(-?\d+)__\n")
        pat_err = b"\n__SBX_" + nonce.encode() + b"__\n"
        got = {"out": None, "err": None}
        head = {"out": bytearray(), "err": bytearray()}
        tail = {"out": bytearray(), "err": bytearray()}
        total = {"out": 0, "err": 0}
        cap = lim.output_bytes
        sel = selectors.DefaultSelector()
        sel.register(p.stdout, selectors.EVENT_READ, "out")
        sel.register(p.stderr, selectors.EVENT_READ, "err")
        sel.register(self.proc.exit_fd, selectors.EVENT_READ, "exit")
        deadline, hard_end, shell_died = t0 + timeout_s, None, False
        try:
            while got["out"] is None or got["err"] is None:
                now = time.monotonic()
                if hard_end is not None and now >= hard_end:
                    break
                if not r.timed_out and now >= deadline:
                    r.timed_out, r.limit_hit = True, "wall"
                    self._kill_command()
                    hard_end = now + 1.0   # the shell should print the markers right after
                ends = [t for t in (None if r.timed_out else deadline, hard_end) if t is not None]
                wait = min(ends) - now
                for key, _ in sel.select(timeout=max(0.0, wait)):
                    if key.data == "exit":
                        shell_died = True
                        hard_end = min(hard_end or now + 0.2, now + 0.2)
                        sel.unregister(key.fileobj)
                        continue
                    tag = key.data
                    try:
                        data = os.read(key.fd, 65536)
                    except BlockingIOError:
                        continue
                    if not data:
                        sel.unregister(key.fileobj)
                        continue
                    total[tag] += len(data)
                    h = head[tag]
                    if len(h) <= cap + TAIL:
                        h += data
                    else:
                        t = tail[tag]
                        t += data
                        del t[:-TAIL]
                    buf = h if not tail[tag] else (h[-TAIL:] + tail[tag])
                    if tag == "out":
                        m = pat_out.search(buf)
                        if m:
                            got["out"] = int(m.group(1))
                    elif pat_err in buf:
                        got["err"] = True
        finally:
            sel.close()
        r.wall_s = time.monotonic() - t0
        for tag in ("out", "err"):
            data = bytes(head[tag] + tail[tag])
            if tag == "out":
                m = pat_out.search(data)
                body = data[: m.start()] if m else data
            else:
                i = data.find(pat_err)
                body = data[:i] if i >= 0 else data
            trunc = len(body) > cap or total[tag] > cap + TAIL + len(body)
            text = body[:cap].decode("utf-8", errors="replace")
            if tag == "out":
                r.stdout, r.stdout_truncated = text, trunc
            else:
                r.stderr, r.stderr_truncated = text, trunc
        if got["out"] is not None:
            code = got["out"]
            if code > 128 and r.timed_out:
                r.signal = code - 128
            else:
                r.exit_code = code
        else:   # the shell itself is stuck or gone: replace it on the next command
            st = self._stop_shell()
            if r.timed_out:
                r.signal = 9
            elif shell_died and st is not None:
                if os.WIFSIGNALED(st):
                    r.signal = os.WTERMSIG(st)
                else:
                    code = os.WEXITSTATUS(st)
                    r.exit_code, r.signal = (None, code - 128) if slot.rt.tier == "bwrap" and code > 128 else (code, None)
        if slot.cg:
            cpu, mem = slot.cg.cpu_s(), slot.cg.peak_memory_mb()
            r.cpu_s, r.peak_memory_mb = cpu or 0.0, mem or 0.0
        if r.limit_hit is None and (r.stdout_truncated or r.stderr_truncated):
            r.limit_hit = "output"
        return r

    def _kill_command(self) -> None:
        """Kill the command's processes, not the shell (needs cgroups to tell them apart)."""
        slot = self.slot
        if not (slot.cg and slot.cg.dirs and self.protected):
            self._stop_shell()
            return
        for _ in range(5):   # a few rounds: a forking command may add processes between reads
            victims = slot.cg.pids() - self.protected - slot._protected()
            if not victims:
                return
            for pid in victims:
                try:
                    os.kill(pid, 9)
                except OSError:
                    pass
            time.sleep(0.005)
        if slot.rt.tier != "bwrap":
            slot.reap_orphans(0.2)
