"""Per-slot spawner: a small root process that lives in the slot's cgroups and starts each task there.

Why: moving a fresh process into a cgroup (writing cgroup.procs) waits for an RCU grace period
(~10 ms, global lock); a child forked by a process already inside the cgroups is born there for free.
So each slot starts one spawner at pool start (the "pre-warmed" slot), migrates it once, and every
task is a posix_spawn (vfork speed) of `prlimit ... setpriv ... bwrap ...` by it.

Protocol over a SOCK_SEQPACKET socketpair (one task at a time per slot):
  parent -> {"argv", "env"} + fds [stdin, stdout, stderr, extra...]  (child gets them as 0, 1, 2, 3, ...)
  spawner -> {"pid"} or {"error"};  later  {"exit": wait_status, "utime", "stime", "maxrss_kb"}
It is a child subreaper and reaps every orphan of its tasks before taking the next request. If the
pool process dies (socket EOF) it kills the running task and exits, so no task outlives its pool.
This file is run by path (`python -S spawner.py FD`) and imports only the standard library.
"""
import ctypes
import fcntl
import json
import os
import select
import signal
import socket
import sys

HIGH_FD = 100
RESET_SIGNALS = tuple(set(signal.valid_signals()) - {signal.SIGKILL, signal.SIGSTOP})


def main() -> None:
    sock = socket.socket(fileno=int(sys.argv[1]))
    os.set_inheritable(sock.fileno(), False)
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(36, 1, 0, 0, 0)   # PR_SET_CHILD_SUBREAPER: orphans of a task come to us, we reap them
    _oom_adj(-1000)
    while True:
        try:
            msg, fds, _, _ = socket.recv_fds(sock, 1 << 22, 16)
        except OSError:
            return
        if not msg:
            return   # parent closed the socket: the slot is gone
        req = json.loads(msg)
        high = []
        for i, fd in enumerate(fds):   # park fds out of the way so dup2 onto 0..n cannot clobber a source
            high.append(fcntl.fcntl(fd, fcntl.F_DUPFD_CLOEXEC, HIGH_FD + i))
            os.close(fd)
        try:
            actions = [(os.POSIX_SPAWN_DUP2, fd, i) for i, fd in enumerate(high)]
            # Python ignores SIGPIPE/SIGXFSZ; a task must get default dispositions and an empty mask.
            # The child inherits oom_score_adj: normal for it, immune for us (the memory cgroup's OOM
            # killer must pick the task, never the slot's spawner).
            _oom_adj(0)
            try:
                pid = os.posix_spawn(req["argv"][0], req["argv"], req["env"], file_actions=actions, setsid=True,
                                     setsigdef=RESET_SIGNALS, setsigmask=())
            finally:
                _oom_adj(-1000)
        except OSError as e:
            sock.send(json.dumps({"error": f"{type(e).__name__}: {e}", "errno": e.errno}).encode())
            continue
        finally:
            for fd in high:
                os.close(fd)
        sock.send(json.dumps({"pid": pid}).encode())
        pidfd = os.pidfd_open(pid)
        while True:   # the task ends, or the pool dies (socket EOF): then the task must die too
            ready, _, _ = select.select([pidfd, sock], [], [])
            if sock in ready and not sock.recv(1, socket.MSG_PEEK):
                for kill in (os.killpg, os.kill):
                    try:
                        kill(pid, signal.SIGKILL)
                    except OSError:
                        pass
                _reap_all()   # our init may not reap: leave no zombie of the slot uid behind
                return
            if pidfd in ready:
                break
        os.close(pidfd)
        while True:   # collect the task; reap orphans (e.g. bwrap's pid-1 init) on the way
            try:
                got, status, ru = os.wait4(-1, 0)
            except ChildProcessError:
                status, ru = None, None
                break
            if got == pid:
                break
        out = {"exit": status}
        if ru is not None:
            out.update(utime=ru.ru_utime, stime=ru.ru_stime, maxrss_kb=ru.ru_maxrss)
        sock.send(json.dumps(out).encode())
        _reap_all()   # everything else of the task dies with its pid namespace


def _oom_adj(value: int) -> None:
    try:
        with open("/proc/self/oom_score_adj", "w") as fh:
            fh.write(str(value))
    except OSError:
        pass


def _reap_all() -> None:
    while True:
        try:
            os.wait4(-1, 0)
        except ChildProcessError:
            return


if __name__ == "__main__":
    main()
