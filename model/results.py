"""Results files: JSON with schema, created, git commit, what was measured (manifest hash), machine, numbers."""
from __future__ import annotations

import datetime
import json
import os
import platform
from pathlib import Path
from typing import Any

from model.manifest import git_info, manifest_hash


def machine() -> dict[str, Any]:
    cpu = platform.processor()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    gpu = None
    try:
        import torch

        if torch.cuda.is_available():
            gpu = torch.cuda.get_device_name(0)
    except Exception:  # noqa: BLE001 - the machine record is best effort
        pass
    return {"cores": os.cpu_count(), "cpu": cpu, "gpu": gpu, "python": platform.python_version()}


def stamp() -> dict[str, Any]:
    """When, at which commit and on what machine a result was measured."""
    return {"created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
            "git_commit": git_info()["commit"], "machine": machine()}


def write(path: Path, name: str, numbers: dict, *, version: int = 1, measured: Path | None = None,
          extra: dict | None = None) -> dict:
    """Write a results file atomically; `measured` is the checkpoint directory whose manifest it describes."""
    doc = {"schema": {"name": name, "version": version}, **stamp(),
           "measured": None if measured is None else {"path": str(measured), "manifest_sha256": manifest_hash(measured)},
           **(extra or {}), **numbers}
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.tmp-{os.getpid()}")
    tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, path)
    return doc
