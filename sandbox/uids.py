"""Per-slot uids, unique across every pool on the machine (flock on /run/sandbox/uids/<uid>.lock).

RLIMIT_NPROC and kill-by-uid only isolate slots if no two live slots share a uid, even slots of
different processes (a server and a test run at once). A lock dies with its process, so a crashed
pool frees its uids."""
from __future__ import annotations

import fcntl
import os

LOCK_DIR = "/run/sandbox/uids"
UID_BASE = int(os.environ.get("SANDBOX_UID_BASE", "61000"))
UID_SPAN = 4000


class UidLease:
    def __init__(self, uid: int, fd: int):
        self.uid, self._fd = uid, fd

    def release(self) -> None:
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1


def lease_uids(n: int) -> list[UidLease]:
    """n free uids; raises RuntimeError naming the fix when the range is exhausted."""
    os.makedirs(LOCK_DIR, mode=0o700, exist_ok=True)
    out: list[UidLease] = []
    busy = uids_with_processes()
    for uid in range(UID_BASE, UID_BASE + UID_SPAN):
        if len(out) == n:
            break
        if uid in busy:   # e.g. zombies of a crashed pool that no one reaps: they would eat RLIMIT_NPROC
            continue
        fd = os.open(os.path.join(LOCK_DIR, f"{uid}.lock"), os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o600)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(fd)
            continue
        out.append(UidLease(uid, fd))
    if len(out) < n:
        for lease in out:
            lease.release()
        raise RuntimeError(f"only {len(out)} of {n} sandbox uids free in {UID_BASE}..{UID_BASE + UID_SPAN}; "
                           "close other pools or set SANDBOX_UID_BASE to a free range")
    return out


def uids_with_processes() -> set[int]:
    """Real uids of every process (zombies included) on the machine."""
    out: set[int] = set()
    for d in os.listdir("/proc"):
        if d.isdigit():
            try:
                with open(f"/proc/{d}/status") as fh:
                    for line in fh:
                        if line.startswith("Uid:"):
                            out.add(int(line.split()[1]))
                            break
            except (OSError, ValueError, IndexError):
                pass
    return out
