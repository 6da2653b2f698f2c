"""Shared fixtures: one pool per isolation tier for the whole test session, and a check that no
process of any slot uid survives a test ("no process of a task outlives it").

Where a tier (or root, or Linux) is missing, its tests skip on a developer's machine. CI says the tiers must
exist by setting SANDBOX_REQUIRE (`.ci/run` does): "1"/"all" = every tier of sandbox.tiers.TIERS, or a comma
list ("bwrap,rlimit"). Then a missing tier is a failure that names the tier and its probe error, and any other
skip of a test in sandbox/tests (a skipif, a skip inside a test) is turned into a failure too, so a green CI
cannot hide a broken sandbox."""
from __future__ import annotations

import os
import sys
import time

import pytest

from sandbox.tiers import TIERS, required  # stdlib only: importable before the Linux check below


def required_tiers() -> tuple[str, ...]:
    try:
        return required(os.environ.get("SANDBOX_REQUIRE"))
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def unavailable(why: str, tier: str | None = None):
    """Skip, or fail where SANDBOX_REQUIRE requires this tier (tier=None: anything the sandbox needs, e.g. root)."""
    req = required_tiers()
    if req and (tier is None or tier in req):
        pytest.fail(f"SANDBOX_REQUIRE={os.environ['SANDBOX_REQUIRE']}: {why}", pytrace=False)
    pytest.skip(why)


if not sys.platform.startswith("linux"):
    if required_tiers():
        raise pytest.UsageError(f"SANDBOX_REQUIRE={os.environ['SANDBOX_REQUIRE']} but the sandbox is Linux-only "
                                f"and this is {sys.platform}")
    pytest.skip("the sandbox is Linux-only", allow_module_level=True)

ROOT = os.geteuid() == 0
_pools: dict = {}


def require_root() -> None:
    if not ROOT:
        unavailable(f"sandbox tests need root (uid drop, cgroups, tmpfs); euid is {os.geteuid()}")


@pytest.fixture
def root():
    """For tests that make their own pool or run the CLI: root, or skip (fail under SANDBOX_REQUIRE)."""
    require_root()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """Under SANDBOX_REQUIRE no sandbox test may skip: a skip that did not come through unavailable() (a skipif
    marker, a skip inside a test) becomes a failure with its reason."""
    outcome = yield
    rep = outcome.get_result()
    if rep.skipped and required_tiers() and not hasattr(rep, "wasxfail"):
        reason = rep.longrepr[2] if isinstance(rep.longrepr, tuple) else str(rep.longrepr)
        rep.outcome = "failed"
        rep.longrepr = f"SANDBOX_REQUIRE={os.environ['SANDBOX_REQUIRE']}: this sandbox test skipped: {reason}"


def get_pool(tier: str):
    """A 2-slot pool of exactly this tier, created once; skips (fails if required) when the machine lacks it."""
    from sandbox import Pool
    if tier not in _pools:
        try:
            _pools[tier] = Pool(slots=2, tier=tier, audit_log=None)
        except RuntimeError as e:
            _pools[tier] = e
    p = _pools[tier]
    if isinstance(p, Exception):
        unavailable(f"tier {tier} unavailable here: {p}", tier)
    return p


@pytest.fixture(params=TIERS)
def pool(request):
    require_root()
    p = get_pool(request.param)
    yield p
    assert_no_slot_processes(p)


@pytest.fixture
def best_pool():
    """The strongest tier this machine offers (what Pool(tier="auto") picks); under SANDBOX_REQUIRE a required
    tier that is missing fails it instead of falling back to a weaker one."""
    require_root()
    req = required_tiers()
    for tier in TIERS:
        got = _pools.get(tier)
        if got is None:
            try:
                got = get_pool(tier)   # fails here if this tier is required and missing
            except pytest.skip.Exception:
                continue
        if not isinstance(got, Exception):
            yield got
            assert_no_slot_processes(got)
            return
        if tier in req:
            unavailable(f"tier {tier} unavailable here: {got}", tier)
    unavailable("no tier works")


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
