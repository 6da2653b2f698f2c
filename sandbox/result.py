"""What came out of a sandboxed task: `Result`, a plain dataclass that round-trips through JSON.

    r = pool.run(task); r.ok; r.to_dict(); Result.from_dict(d)

`infra_error` (a string) means the sandbox itself failed (could not start, could not clean up); then
the task's own outcome is unknown and must not be scored. Task failures (non-zero exit, signal,
timeout, limits) leave `infra_error` None.
"""
from __future__ import annotations

from dataclasses import asdict, dataclass, field, fields
from typing import Any


@dataclass
class Result:
    exit_code: int | None = None          # process exit status; None when killed by a signal or never started
    signal: int | None = None             # terminating signal number (9 after a timeout or OOM kill)
    stdout: str = ""                      # decoded UTF-8 (invalid bytes replaced), at most Limits.output_bytes
    stderr: str = ""
    stdout_truncated: bool = False        # True when stdout exceeded Limits.output_bytes
    stderr_truncated: bool = False
    wall_s: float = 0.0                   # from spawn to exit of the task
    cpu_s: float = 0.0                    # user+system CPU of the whole task tree
    peak_memory_mb: float = 0.0           # peak memory of the tree (cgroup) or of its largest process
    files: dict[str, list[str]] = field(default_factory=lambda: {"created": [], "modified": [], "deleted": []})
    read_files: dict[str, str] = field(default_factory=dict)  # Task.collect path -> text (capped; missing = absent)
    timed_out: bool = False               # killed at Limits.wall_s (or a session command's timeout)
    limit_hit: str | None = None          # "wall" | "cpu" | "memory" | "output" | None: which cap ended or cut the task
    infra_error: str | None = None        # sandbox failure, never a task failure; see module doc
    tier: str = ""                        # isolation tier that ran it: "bwrap" | "unshare" | "rlimit"
    env_hash: str = ""                    # hash of the pinned task environment (interpreter, tools, binds)
    task_hash: str = ""                   # Task.hash() of what ran
    task_id: str | None = None            # Task.id echoed

    @property
    def ok(self) -> bool:
        """Exited 0 without timeout or infra error."""
        return self.exit_code == 0 and not self.timed_out and self.infra_error is None

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "Result":
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in d.items() if k in known})

    @classmethod
    def infra(cls, msg: str, **kw: Any) -> "Result":
        return cls(infra_error=msg, **kw)

    def summary(self) -> dict[str, Any]:
        """Short form for the audit log."""
        return {"exit_code": self.exit_code, "signal": self.signal, "timed_out": self.timed_out,
                "limit_hit": self.limit_hit, "infra_error": self.infra_error, "wall_s": round(self.wall_s, 4),
                "cpu_s": round(self.cpu_s, 4), "peak_memory_mb": round(self.peak_memory_mb, 1),
                "stdout_bytes": len(self.stdout), "stderr_bytes": len(self.stderr),
                "files": {k: len(v) for k, v in self.files.items()}}
