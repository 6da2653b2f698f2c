"""Handles for a running sandbox process, whichever way it was started.

- `DirectProc`: a Popen child of ours (rlimit/unshare tiers, or bwrap without root): exit via pidfd + wait4.
- `SpawnerProc`: started by the slot's `Spawner` (bwrap tier as root, see spawner.py): exit status
  arrives as a message on the spawner socket.
Both expose pid, stdin/stdout/stderr file objects, `exit_fd` to select on, `collect_exit()` and `poll()`.
"""
from __future__ import annotations

import json
import os
import select
import socket
import subprocess
import sys
import time
from dataclasses import dataclass

SPAWNER_SRC = os.path.join(os.path.dirname(os.path.abspath(__file__)), "spawner.py")


@dataclass
class Usage:
    """CPU and peak RSS from wait4 (fallback when the slot has no cgroups)."""
    cpu_s: float
    maxrss_mb: float


class BaseProc:
    pid: int
    stdin = stdout = stderr = None
    exit_fd: int
    status_r: int | None = None      # bwrap --json-status-fd read end
    t0: float = 0.0
    wait_status: int | None = None
    usage: Usage | None = None
    exited = False

    def collect_exit(self) -> None:
        raise NotImplementedError

    def poll(self) -> bool:
        """True once the process has exited (collects the status if it just did)."""
        if not self.exited and select.select([self.exit_fd], [], [], 0)[0]:
            self.collect_exit()
        return self.exited

    def close(self) -> None:
        for f in (self.stdin, self.stdout, self.stderr):
            if f is not None and not f.closed:
                f.close()
        if self.status_r is not None:
            os.close(self.status_r)
            self.status_r = None


class DirectProc(BaseProc):
    def __init__(self, popen: subprocess.Popen, status_r: int | None, t0: float):
        self.popen, self.pid, self.status_r, self.t0 = popen, popen.pid, status_r, t0
        self.stdin, self.stdout, self.stderr = popen.stdin, popen.stdout, popen.stderr
        self.exit_fd = os.pidfd_open(popen.pid)

    def collect_exit(self) -> None:
        if self.exited:
            return
        try:
            _, st, ru = os.wait4(self.pid, 0)
            self.wait_status, self.usage = st, Usage(ru.ru_utime + ru.ru_stime, ru.ru_maxrss / 1024)
            self.popen.returncode = -os.WTERMSIG(st) if os.WIFSIGNALED(st) else os.WEXITSTATUS(st)
        except ChildProcessError:
            self.popen.returncode = -9
        self.exited = True

    def close(self) -> None:
        super().close()
        if self.exit_fd >= 0:
            os.close(self.exit_fd)
            self.exit_fd = -1


class Spawner:
    """The slot's resident root process (spawner.py) and our end of its socket."""

    def __init__(self, join_cgroup) -> None:
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        self.popen = subprocess.Popen([sys.executable, "-S", SPAWNER_SRC, str(theirs.fileno())],
                                      pass_fds=[theirs.fileno()], stdin=subprocess.DEVNULL,
                                      stdout=subprocess.DEVNULL, start_new_session=True, close_fds=True)
        theirs.close()
        self.sock, self.pid = ours, self.popen.pid
        join_cgroup(self.pid)   # the one migration of this slot; every task is then born inside

    def request(self, argv: list[str], env: dict[str, str], fds: list[int], timeout_s: float = 10.0) -> int:
        socket.send_fds(self.sock, [json.dumps({"argv": argv, "env": env}).encode()], fds)
        msg = self._recv(timeout_s)
        if "error" in msg:
            err = msg.get("errno") or 0
            raise OSError(err, msg["error"])
        return int(msg["pid"])

    def _recv(self, timeout_s: float | None) -> dict:
        if timeout_s is not None and not select.select([self.sock], [], [], timeout_s)[0]:
            raise TimeoutError("slot spawner did not answer")
        data = self.sock.recv(1 << 16)
        if not data:
            raise ConnectionError("slot spawner died")
        return json.loads(data)

    def alive(self) -> bool:
        return self.popen.poll() is None

    def close(self) -> None:
        self.sock.close()          # the spawner exits on EOF
        try:
            self.popen.wait(timeout=2)
        except subprocess.TimeoutExpired:
            self.popen.kill()
            self.popen.wait()


class SpawnerProc(BaseProc):
    def __init__(self, spawner: Spawner, pid: int, stdin, stdout, stderr, status_r: int | None, t0: float):
        self.spawner, self.pid, self.status_r, self.t0 = spawner, pid, status_r, t0
        self.stdin, self.stdout, self.stderr = stdin, stdout, stderr
        self.exit_fd = spawner.sock.fileno()

    def collect_exit(self) -> None:
        if self.exited:
            return
        msg = self.spawner._recv(None)
        self.wait_status = msg.get("exit")
        if "utime" in msg:
            self.usage = Usage(msg["utime"] + msg["stime"], msg["maxrss_kb"] / 1024)
        self.exited = True

    def wait(self, timeout_s: float) -> None:
        end = time.monotonic() + timeout_s
        while not self.exited and time.monotonic() < end:
            if select.select([self.exit_fd], [], [], max(0.0, end - time.monotonic()))[0]:
                self.collect_exit()
