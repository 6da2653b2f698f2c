"""Append-only JSONL audit log: one line per task (time, task hash, limits, tier, env hash, result summary).

    tail -f results/sandbox/audit.jsonl | python -m json.tool --json-lines
"""
from __future__ import annotations

import json
import os
import threading
import time

from .result import Result
from .task import Task


class AuditLog:
    def __init__(self, path: str | None):
        self.path = path
        self._lock = threading.Lock()
        self._fh = None
        if path:
            os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
            self._fh = open(path, "a", buffering=1)   # line-buffered: a crash loses at most one line

    def record(self, task: Task, result: Result, slot: int | None, kind: str = "task") -> None:
        if self._fh is None:
            return
        line = json.dumps({"time": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "kind": kind, "task_hash": result.task_hash,
                           "task_id": task.id, "limits": task.limits.to_dict(), "tier": result.tier,
                           "env_hash": result.env_hash, "slot": slot, "result": result.summary()})
        with self._lock:
            self._fh.write(line + "\n")

    def close(self) -> None:
        with self._lock:
            if self._fh:
                self._fh.close()
                self._fh = None
