"""Shared fixtures: one pool per isolation tier for the whole test session, and a check that no
process of any slot uid survives a test ("no process of a task outlives it")."""
from __future__ import annotations

import os
import sys
import time

import pytest

if not sys.platform.startswith("linux"):
    pytest.skip("the sandbox is Linux-only", allow_module_level=True)

from sandbox.tiers import TIERS

ROOT = os.geteuid() == 0
needs_root = pytest.mark.skipif(not ROOT, reason="sandbox tests need root (uid drop, cgroups, tmpfs)")
_pools: dict = {}


def get_pool(tier: str):
    """A 2-slot pool of exactly this tier, created once; skips when the machine lacks the tier."""
    from sandbox import Pool
    if tier not in _pools:
        try:
            _pools[tier] = Pool(slots=2, tier=tier, audit_log=None)
        except RuntimeError as e:
            _pools[tier] = e
    p = _pools[tier]
    if isinstance(p, Exception):
        pytest.skip(f"tier {tier} unavailable here: {p}")
    return p


@pytest.fixture(params=TIERS)
def pool(request):
    if not ROOT:
        pytest.skip("sandbox tests need root")
    p = get_pool(request.param)
    yield p
    assert_no_slot_processes(p)


@pytest.fixture
def best_pool():
    """The strongest tier this machine offers (what Pool(tier="auto") picks)."""
    if not ROOT:
        pytest.skip("sandbox tests need root")
    for tier in TIERS:
        get = _pools.get(tier)
        if get is None:
            try:
                get = get_pool(tier)
            except pytest.skip.Exception:
                continue
        if not isinstance(get, Exception):
            yield get
            assert_no_slot_processes(get)
            return
    pytest.skip("no tier works")


def slot_processes(pool) -> list[tuple[int, str]]:
    """(pid, comm) of every live (non-zombie) or zombie process owned by one of the pool's slot uids."""
    uids = {s.uid for s in pool.slots}
    out = []
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            st = open(f"/proc/{d}/status").read()
        except OSError:
            continue
        fields = dict(line.split(":", 1) for line in st.splitlines() if ":" in line)
        if int(fields["Uid"].split()[0]) in uids:
            out.append((int(d), fields["Name"].strip() + " " + fields["State"].strip()))
    return out


def assert_no_slot_processes(pool, wait_s: float = 0.5) -> None:
    end = time.monotonic() + wait_s
    while True:
        left = slot_processes(pool)
        if not left or time.monotonic() > end:
            break
        time.sleep(0.02)
    assert left == [], f"processes of slot uids outlived their task: {left}"


def pytest_sessionfinish(session, exitstatus):
    for p in _pools.values():
        if not isinstance(p, Exception):
            p.close()
