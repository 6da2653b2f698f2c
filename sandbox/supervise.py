"""The supervision loop of one sandboxed process: stdin feeding, capped stdout/stderr, wall deadline.

Output beyond Limits.output_bytes is counted and dropped; past 16x the cap (+16 MiB) the pipe is
closed so a `yes`-style flood costs the pool nothing more (the task then gets SIGPIPE/EPIPE).
"""
from __future__ import annotations

import math
import os
import selectors
import time
from typing import Callable

from .proc import BaseProc, SpawnerProc
from .task import Limits

KILL_GRACE_S = 2.0          # after SIGKILL a tree is gone in ms; beyond this it is an infra error


def supervise(proc: BaseProc, stdin: bytes, lim: Limits, deadline: float,
              kill: Callable[[BaseProc], None], after_exit: Callable[[], None]) -> dict:
    """Feed stdin, collect capped output, enforce the deadline, wait for exit. Returns raw facts.

    kill(proc) kills the task's tree; after_exit() runs once the main process has exited."""
    sel = selectors.DefaultSelector()
    sel.register(proc.exit_fd, selectors.EVENT_READ, "exit")
    bufs = {"out": bytearray(), "err": bytearray()}
    seen = {"out": 0, "err": 0}
    cap, drain_cap = lim.output_bytes, 16 * lim.output_bytes + (16 << 20)
    sel.register(proc.stdout, selectors.EVENT_READ, "out")
    sel.register(proc.stderr, selectors.EVENT_READ, "err")
    if proc.status_r is not None:
        sel.register(proc.status_r, selectors.EVENT_READ, "status")
    stdin_view = memoryview(stdin)
    if proc.stdin is not None:
        if stdin_view:
            os.set_blocking(proc.stdin.fileno(), False)
            sel.register(proc.stdin, selectors.EVENT_WRITE, "in")
        else:
            proc.stdin.close()
    status_buf = bytearray()
    t_exit = None
    timed_out, kill_at, end_by = False, None, None
    open_pipes = {"out", "err"}
    try:
        while True:
            now = time.monotonic()
            if proc.exited and not open_pipes:
                break
            if end_by is not None and now >= end_by:
                break  # pipes still held open after everything was killed: give up on them
            if not timed_out and now >= deadline:
                timed_out, kill_at = True, now
                kill(proc)
                end_by = now + KILL_GRACE_S
            nxt = [t for t in (None if timed_out else deadline, end_by) if t is not None]
            events = sel.select(timeout=max(0.0, min(nxt) - now) if nxt else None)
            for key, _ in events:
                tag = key.data
                if tag == "exit":
                    proc.collect_exit()
                    t_exit = time.monotonic()
                    sel.unregister(key.fileobj)
                    after_exit()
                    end_by = min(end_by or math.inf, time.monotonic() + KILL_GRACE_S)
                elif tag in ("out", "err"):
                    data = os.read(key.fd, 65536)
                    if not data or seen[tag] + len(data) > drain_cap:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                        open_pipes.discard(tag)
                        seen[tag] += len(data)
                        continue
                    seen[tag] += len(data)
                    b = bufs[tag]
                    if len(b) <= cap:
                        b += data[: cap + 1 - len(b)]
                elif tag == "in":
                    try:
                        n = os.write(key.fd, stdin_view[:65536])
                        stdin_view = stdin_view[n:]
                    except OSError:
                        stdin_view = stdin_view[:0]
                    if not stdin_view:
                        sel.unregister(key.fileobj)
                        key.fileobj.close()
                elif tag == "status":
                    chunk = os.read(key.fd, 4096)
                    if not chunk:
                        sel.unregister(key.fd)
                    else:
                        status_buf += chunk
    finally:
        sel.close()
        if not proc.exited:  # never saw the exit: make sure it is dead and collected
            kill(proc)
            if isinstance(proc, SpawnerProc):
                proc.wait(KILL_GRACE_S)
            else:
                proc.collect_exit()
            t_exit = time.monotonic()
        proc.close()
    return {"status": proc.wait_status, "usage": proc.usage, "t_exit": t_exit or time.monotonic(),
            "timed_out": timed_out, "kill_at": kill_at, "out": bytes(bufs["out"]), "err": bytes(bufs["err"]),
            "status_json": bytes(status_buf)}
