"""Glue to the sandbox/ package (imported lazily: domains works without it for the pure-Python families).

    from domains.sandboxing import available, make_pool
    with make_pool(slots=2) as pool: ...

Verifiers receive the pool as a parameter (sandbox.Pool or anything with run/map/submit/session) and build
Task/Limits through task()/limits() here, so the contract lives in one place.
"""
from __future__ import annotations

import os
from typing import Any


def available() -> bool:
    try:
        import sandbox  # noqa: F401
    except Exception:  # noqa: BLE001 - any import failure means "not usable yet"
        return False
    return True


def make_pool(slots: int | None = None) -> Any:
    try:
        from sandbox import Pool
    except Exception as e:  # noqa: BLE001
        raise RuntimeError(f"the sandbox package is not importable ({type(e).__name__}: {e}); "
                           f"terminal/code domains need it: build sandbox/ or pass --families without them") from None
    return Pool(slots=slots or max(1, min(4, (os.cpu_count() or 2))))


def limits(wall_s: float = 10.0, memory_mb: int = 512, output_bytes: int = 200_000, **kw) -> Any:
    from sandbox import Limits
    base = dict(wall_s=wall_s, cpu_s=wall_s, memory_mb=memory_mb, file_size_mb=16, nproc=64, nofile=256,
                output_bytes=output_bytes, network=False)
    base.update(kw)
    return Limits(**base)


def task(**kw) -> Any:
    from sandbox import Task
    return Task(**kw)


def clip(text: str, n: int = 1500) -> str:
    text = text or ""
    return text if len(text) <= n else text[:n] + f"\n[... {len(text) - n} more characters cut]"


def observation(r: Any, n: int = 1500) -> str:
    """A sandbox Result as the tool observation the policy sees."""
    if getattr(r, "infra_error", None):
        return f"error: sandbox failure: {r.infra_error}"
    out = clip(((r.stdout or "").rstrip("\n") + ("\n" + r.stderr.rstrip("\n") if r.stderr else "")).strip("\n"), n)
    tail = " (timed out)" if r.timed_out else ""
    return f"{out}\n[exit code: {r.exit_code}{tail}]" if out else f"[exit code: {r.exit_code}{tail}]"
