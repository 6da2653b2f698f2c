"""What to run in a sandbox: `Limits` (resource caps) and `Task` (command, files, stdin, env).

    from sandbox import Task, Limits
    t = Task(cmd=["python3", "main.py"], files={"main.py": "print(1)"}, limits=Limits(wall_s=5))
    t = Task(script="echo hi && ls")          # runs /bin/bash -c SCRIPT

Both validate on construction: bad input raises ValueError with one line naming the field and the fix.
"""
from __future__ import annotations

import base64
import hashlib
import json
import posixpath
from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass(frozen=True)
class Limits:
    wall_s: float = 10.0            # wall-clock limit; the whole process tree is killed at it
    cpu_s: float = 10.0             # CPU seconds per process (RLIMIT_CPU) and, with cgroups, for the tree
    memory_mb: int = 512            # memory of the whole tree (cgroup) or address space per process (fallback)
    file_size_mb: int = 64          # largest file a process may write (RLIMIT_FSIZE)
    nproc: int = 64                 # processes/threads of the task at once (RLIMIT_NPROC per slot uid, pids cgroup)
    nofile: int = 256               # open file descriptors per process (RLIMIT_NOFILE)
    output_bytes: int = 1_000_000   # stdout and stderr are each kept up to this many bytes, then truncated
    network: bool = False           # False: no network namespace access and no AF_INET/AF_INET6 sockets
    disk_mb: int = 256              # size of the work dir tmpfs and of the sandbox /tmp
    collect_bytes: int = 1_000_000  # cap per file in Result.read_files

    def __post_init__(self) -> None:
        for f in fields(self):
            v = getattr(self, f.name)
            if f.name == "network":
                if not isinstance(v, bool):
                    raise ValueError(f"Limits.network must be True or False, got {v!r}")
                continue
            if isinstance(v, bool) or not isinstance(v, (int, float)) or v <= 0:
                raise ValueError(f"Limits.{f.name} must be a positive number, got {v!r}")
        if self.nproc < 2 or self.nofile < 16:
            raise ValueError(f"Limits.nproc must be >= 2 and nofile >= 16 (got {self.nproc}, {self.nofile}): a shell needs them")

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Limits":
        known = {f.name for f in fields(cls)}
        bad = set(d) - known
        if bad:
            raise ValueError(f"unknown Limits field(s) {sorted(bad)}; known: {sorted(known)}")
        return cls(**d)


def check_relpath(path: str, what: str) -> str:
    """Normalise a work-dir-relative path; refuse absolute paths and '..' (they would escape the work dir)."""
    if not isinstance(path, str) or not path or "\x00" in path:
        raise ValueError(f"{what} path {path!r} must be a non-empty string")
    norm = posixpath.normpath(path)
    if norm.startswith("/") or norm == ".." or norm.startswith("../") or norm == ".":
        raise ValueError(f"{what} path {path!r} must be relative and stay inside the work dir (no leading / or ..)")
    return norm


def _enc(v: str | bytes) -> Any:
    return v if isinstance(v, str) else {"b64": base64.b64encode(v).decode()}


def _dec(v: Any) -> str | bytes:
    return base64.b64decode(v["b64"]) if isinstance(v, dict) else v


@dataclass
class Task:
    cmd: list[str] | None = None                 # argv; argv[0] is looked up in PATH (/usr/bin:/bin)
    script: str | None = None                    # alternative to cmd: run with /bin/bash -c SCRIPT
    files: dict[str, str | bytes] = field(default_factory=dict)  # placed in the work dir before start
    stdin: str | bytes = ""                      # fed to the task's stdin, then closed
    env: dict[str, str] = field(default_factory=dict)  # added to the pinned base env (PATH, HOME, LANG, TMPDIR)
    limits: Limits = field(default_factory=Limits)
    collect: list[str] = field(default_factory=list)  # work-dir files returned as text in Result.read_files
    id: str | None = None                        # caller's tag, echoed in Result.task_id and the audit log

    def __post_init__(self) -> None:
        if (self.cmd is None) == (self.script is None):
            raise ValueError("Task needs exactly one of cmd=[...] or script='...'")
        if self.cmd is not None:
            if isinstance(self.cmd, str) or not self.cmd or not all(isinstance(a, str) and "\x00" not in a for a in self.cmd):
                raise ValueError(f"Task.cmd must be a non-empty list of strings, got {self.cmd!r} (use script= for a shell string)")
            self.cmd = list(self.cmd)
        if self.script is not None and not isinstance(self.script, str):
            raise ValueError("Task.script must be a string")
        if not isinstance(self.files, dict):
            raise ValueError("Task.files must be a dict of relative path -> str or bytes")
        self.files = {check_relpath(k, "Task.files"): v for k, v in self.files.items()}
        for k, v in self.files.items():
            if not isinstance(v, (str, bytes)):
                raise ValueError(f"Task.files[{k!r}] must be str or bytes, got {type(v).__name__}")
        if not isinstance(self.stdin, (str, bytes)):
            raise ValueError("Task.stdin must be str or bytes")
        if not isinstance(self.env, dict) or not all(
                isinstance(k, str) and isinstance(v, str) and k and "=" not in k and "\x00" not in k + v
                for k, v in self.env.items()):
            raise ValueError("Task.env must map names (no '=') to string values")
        if isinstance(self.limits, dict):
            self.limits = Limits.from_dict(self.limits)
        if not isinstance(self.limits, Limits):
            raise ValueError("Task.limits must be a sandbox.Limits")
        self.collect = [check_relpath(p, "Task.collect") for p in self.collect]

    def argv(self) -> list[str]:
        return list(self.cmd) if self.cmd is not None else ["/bin/bash", "-c", self.script or ""]

    def to_dict(self) -> dict[str, Any]:
        return {"cmd": self.cmd, "script": self.script,
                "files": {k: _enc(v) for k, v in self.files.items()}, "stdin": _enc(self.stdin),
                "env": dict(self.env), "limits": self.limits.to_dict(), "collect": list(self.collect), "id": self.id}

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Task":
        if not isinstance(d, dict):
            raise ValueError("a task must be a JSON object")
        known = {f.name for f in fields(cls)}
        bad = set(d) - known
        if bad:
            raise ValueError(f"unknown Task field(s) {sorted(bad)}; known: {sorted(known)}")
        d = dict(d)
        if "files" in d and isinstance(d["files"], dict):
            d["files"] = {k: _dec(v) for k, v in d["files"].items()}
        if "stdin" in d:
            d["stdin"] = _dec(d["stdin"])
        if "limits" in d and isinstance(d["limits"], dict):
            d["limits"] = Limits.from_dict(d["limits"])
        return cls(**d)

    def hash(self) -> str:
        """Content hash of what runs (not the id): equal tasks hash equal, for the audit log and dedup."""
        d = self.to_dict()
        d.pop("id")
        return hashlib.sha256(json.dumps(d, sort_keys=True).encode()).hexdigest()[:16]
