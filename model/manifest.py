"""Checkpoint hand-off between stages: manifest.json, written last, and atomic publication.

A stage directory is valid only when its manifest.json exists and every sha256 in it matches.
Writers build in `<dir>.tmp-<pid>` and `publish()` renames it to `<dir>`: a partial directory is never
visible under the final name. Readers call `verify()`, which refuses anything else with one line
naming the file and the fix.
"""
from __future__ import annotations

import datetime
import contextlib
import hashlib
import json
import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

MANIFEST = "manifest.json"
SCHEMA = {"name": "checkpoint-manifest", "version": 1}


class CheckpointError(RuntimeError):
    """An input checkpoint that cannot be used; str(e) is one line naming the problem and the fix."""


def sha256_file(path: Path, chunk: int = 1 << 20) -> str:
    h = hashlib.sha256()
    with open(path, "rb") as f:
        while b := f.read(chunk):
            h.update(b)
    return h.hexdigest()


def git_info(repo: Path | None = None) -> dict[str, Any]:
    repo = repo or Path(__file__).resolve().parent.parent
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=repo, capture_output=True, text=True,
                                check=True).stdout.strip()
        dirty = bool(subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=repo,
                                    capture_output=True, text=True, check=True).stdout.strip())
    except (OSError, subprocess.CalledProcessError):
        commit, dirty = "unknown", True
    return {"commit": commit, "dirty": dirty}


def _files(root: Path) -> list[str]:
    """Every file under root but the manifest, relative, sorted."""
    return [str(p.relative_to(root)) for p in sorted(root.rglob("*")) if p.is_file() and p.name != MANIFEST]


def file_hashes(root: Path) -> dict[str, str]:
    root = Path(root)
    return {rel: sha256_file(root / rel) for rel in _files(root)}


def manifest_hash(ckpt_dir: Path) -> str:
    return sha256_file(Path(ckpt_dir) / MANIFEST)


def write_manifest(ckpt_dir: Path, *, stage: str, parent: Path | None, config: dict, seed: int,
                   metrics: dict, model_config: dict | None = None, extra: dict | None = None) -> dict:
    """Hash every file of ckpt_dir and write manifest.json last, atomically (tmp file + rename)."""
    ckpt_dir = Path(ckpt_dir)
    m = {
        "schema": SCHEMA, "stage": stage,
        "created": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
        "parent": None if parent is None else {"path": str(parent), "manifest_sha256": manifest_hash(parent)},
        "git": git_info(), "seed": seed, "model_config": model_config, "config": config, "metrics": metrics,
        "files": file_hashes(ckpt_dir), **(extra or {}),
    }
    tmp = ckpt_dir / f".{MANIFEST}.tmp-{os.getpid()}"
    tmp.write_text(json.dumps(m, indent=2, sort_keys=True, default=str) + "\n")
    os.replace(tmp, ckpt_dir / MANIFEST)
    return m


def staging_dir(final: Path) -> Path:
    """A fresh `<final>.tmp-<pid>` to build a stage's output in."""
    final = Path(final)
    tmp = final.with_name(f"{final.name}.tmp-{os.getpid()}")
    if tmp.exists():
        shutil.rmtree(tmp)
    tmp.mkdir(parents=True)
    return tmp


@contextlib.contextmanager
def staging(final: Path):
    """`with staging(out) as tmp:` build in a fresh staging dir; on any error it is removed, nothing half-made stays."""
    tmp = staging_dir(final)
    try:
        yield tmp
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise


def publish(tmp: Path, final: Path) -> None:
    """Atomically make `tmp` visible as `final` (an old `final` is replaced, never half-overwritten)."""
    tmp, final = Path(tmp), Path(final)
    if not (tmp / MANIFEST).exists():
        raise CheckpointError(f"{tmp}: no {MANIFEST}; write_manifest() must run before publish()")
    old = None
    if final.exists():
        old = final.with_name(f"{final.name}.old-{os.getpid()}")
        os.replace(final, old)
    try:
        os.replace(tmp, final)
    except BaseException:
        if old is not None:  # put the previous complete checkpoint back rather than leave nothing
            os.replace(old, final)
        raise
    if old is not None:
        shutil.rmtree(old, ignore_errors=True)


def verify(ckpt_dir: Path, stage: str | None = None) -> dict:
    """The manifest of a complete, untouched checkpoint directory, or CheckpointError (one line)."""
    ckpt_dir = Path(ckpt_dir)
    mpath = ckpt_dir / MANIFEST
    if not ckpt_dir.is_dir():
        raise CheckpointError(f"{ckpt_dir}: no such checkpoint directory; build it first (see `make help`)")
    if not mpath.exists():
        raise CheckpointError(f"{mpath}: missing, so {ckpt_dir} is incomplete; delete it and rerun the stage that makes it")
    try:
        m = json.loads(mpath.read_text())
        files = m["files"]
    except (json.JSONDecodeError, KeyError, TypeError) as e:
        raise CheckpointError(f"{mpath}: unreadable manifest ({type(e).__name__}); delete {ckpt_dir} and rerun its stage") from None
    if stage is not None and m.get("stage") != stage:
        raise CheckpointError(f"{mpath}: stage is {m.get('stage')!r}, expected {stage!r}; pass the right --in directory")
    for rel, digest in files.items():
        p = ckpt_dir / rel
        if not p.is_file():
            raise CheckpointError(f"{p}: listed in the manifest but missing; the checkpoint is damaged, rebuild it")
        if sha256_file(p) != digest:
            raise CheckpointError(f"{p}: sha256 mismatch with {mpath} (corrupted or edited); rebuild the checkpoint")
    extra = set(_files(ckpt_dir)) - set(files)  # names only: each listed file was hashed once, above
    if extra:
        raise CheckpointError(f"{ckpt_dir}: files not in the manifest ({sorted(extra)[0]}...); remove them or rebuild")
    return m
