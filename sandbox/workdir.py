"""The per-slot work dir: a size-limited tmpfs owned by the slot uid, filled, diffed, read, wiped.

A fresh tmpfs per task makes wiping O(1) (unmount + mount) and bounds disk use (Limits.disk_mb).
Every read of task-written paths uses lstat/O_NOFOLLOW and a realpath check, because the task may
have planted symlinks to host files and the pool reads as root.
"""
from __future__ import annotations

import hashlib
import os
import shutil

from . import syscalls

MAX_ENTRIES = 20_000      # a task creating millions of files must not stall the pool's diff
HASH_LIMIT = 16 << 20     # files above this are compared by size+mtime only


class WorkDir:
    def __init__(self, path: str, uid: int, gid: int, use_tmpfs: bool):
        self.path, self.uid, self.gid, self.use_tmpfs = path, uid, gid, use_tmpfs
        self._size_mb: int | None = None
        self.clean = False          # True right after fresh(): no task files in it yet
        os.makedirs(path, exist_ok=True)

    def fresh(self, size_mb: int) -> None:
        """Empty work dir of `size_mb`, owned by the slot uid, mode 700 (other slots cannot look in)."""
        if self.use_tmpfs:
            if self._size_mb is not None:
                syscalls.umount(self.path)
            syscalls.mount("sandbox", self.path, "tmpfs", syscalls.MS_NOSUID | syscalls.MS_NODEV,
                           f"size={size_mb}m,nr_inodes=65536,mode=700,uid={self.uid},gid={self.gid}")
            self._size_mb = size_mb
        else:
            for e in os.scandir(self.path):
                if e.is_dir(follow_symlinks=False):
                    shutil.rmtree(e.path, ignore_errors=True)
                else:
                    os.unlink(e.path)
            os.chmod(self.path, 0o700)
            if os.geteuid() == 0:
                os.chown(self.path, self.uid, self.gid)
            self._size_mb = size_mb
        self.clean = True

    def close(self) -> None:
        if self.use_tmpfs and self._size_mb is not None:
            try:
                syscalls.umount(self.path)
            except OSError:
                pass
            self._size_mb = None

    def place(self, files: dict[str, str | bytes]) -> None:
        self.clean = False
        root = os.geteuid() == 0
        for rel, content in files.items():
            full = os.path.join(self.path, rel)
            parent = os.path.dirname(full)
            if parent != self.path:
                os.makedirs(parent, exist_ok=True)
                if root:  # chown every new parent so the task can write next to its files
                    d = parent
                    while d != self.path:
                        os.chown(d, self.uid, self.gid)
                        d = os.path.dirname(d)
            data = content.encode() if isinstance(content, str) else content
            fd = os.open(full, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_NOFOLLOW, 0o644)
            try:
                os.write(fd, data) if len(data) < (1 << 20) else _write_all(fd, data)
            finally:
                os.close(fd)
            if root:
                os.chown(full, self.uid, self.gid)

    def snapshot(self) -> dict[str, tuple]:
        """path -> (kind, size, mtime_ns, digest) for files and symlinks, never following links."""
        out: dict[str, tuple] = {}
        stack = [""]
        while stack and len(out) < MAX_ENTRIES:
            rel_dir = stack.pop()
            try:
                entries = list(os.scandir(os.path.join(self.path, rel_dir)))
            except OSError:
                continue
            for e in entries:
                rel = os.path.join(rel_dir, e.name) if rel_dir else e.name
                try:
                    st = e.stat(follow_symlinks=False)
                except OSError:
                    continue
                if e.is_symlink():
                    out[rel] = ("link", 0, 0, os.readlink(e.path))
                elif e.is_dir(follow_symlinks=False):
                    stack.append(rel)
                elif e.is_file(follow_symlinks=False):
                    out[rel] = ("file", st.st_size, st.st_mtime_ns, _digest(e.path, st.st_size))
                if len(out) >= MAX_ENTRIES:
                    break
        return out

    @staticmethod
    def diff(before: dict[str, tuple], after: dict[str, tuple]) -> dict[str, list[str]]:
        def same(a: tuple, b: tuple) -> bool:
            if a[0] != b[0]:
                return False
            if a[3] is not None and b[3] is not None:
                return a[3] == b[3]
            return a[1:3] == b[1:3]
        return {"created": sorted(set(after) - set(before)),
                "modified": sorted(p for p in set(after) & set(before) if not same(before[p], after[p])),
                "deleted": sorted(set(before) - set(after))}

    def read(self, rel: str, cap: int) -> str | None:
        """Text of a regular file inside the work dir, or None (missing, symlink out, not a file)."""
        full = os.path.join(self.path, rel)
        real = os.path.realpath(full)
        if not real.startswith(os.path.realpath(self.path) + os.sep):
            return None
        try:
            fd = os.open(real, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except OSError:
            return None
        try:
            if not _is_regular(fd):
                return None
            data = os.read(fd, cap)
        finally:
            os.close(fd)
        return data.decode("utf-8", errors="replace")


def _is_regular(fd: int) -> bool:
    import stat
    return stat.S_ISREG(os.fstat(fd).st_mode)


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        n = os.write(fd, view)
        view = view[n:]


def _digest(path: str, size: int) -> str | None:
    if size > HASH_LIMIT:
        return None
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except OSError:
        return None
    try:
        h = hashlib.blake2b(digest_size=16)
        while True:
            b = os.read(fd, 1 << 20)
            if not b:
                break
            h.update(b)
        return h.hexdigest()
    finally:
        os.close(fd)
