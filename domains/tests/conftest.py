"""Shared fixtures: a real sandbox pool for the code and terminal families.

Without an importable sandbox package the tests that need it skip on a developer's machine (a package that
imports but finds no working tier is an error everywhere).
CI says the sandbox must exist by setting SANDBOX_REQUIRE (`.ci/run` sets it; values as in sandbox.tiers.required:
"1"/"all" = every tier, or a comma list such as "bwrap,rlimit"): then a missing sandbox is a failure naming what
is missing and the probe's error, and the pool the domain tests get must be the strongest required tier (a broken
bwrap must not pass quietly by falling back to a weaker tier)."""
import contextlib
import io
import json
import os

import pytest

from domains import registry, sandboxing
from domains.cli import main as cli_main


def required_tiers() -> tuple[str, ...]:
    """SANDBOX_REQUIRE parsed by sandbox.tiers.required, imported lazily: domains/ works (and its pure-family tests
    run) without sandbox/, e.g. copied alone into another project."""
    value = os.environ.get("SANDBOX_REQUIRE", "")
    try:
        from sandbox.tiers import required
    except Exception as e:  # noqa: BLE001 - no sandbox package to parse it with
        if value.strip().lower() in ("", "0", "no", "false"):
            return ()
        pytest.fail(f"SANDBOX_REQUIRE={value} but the sandbox package is not importable ({type(e).__name__}: {e})",
                    pytrace=False)
    try:
        return required(value)
    except ValueError as e:
        raise pytest.UsageError(str(e)) from None


def sandbox_missing(why: str):
    """Skip on a developer's machine; fail where SANDBOX_REQUIRE says the sandbox must be here."""
    if required_tiers():
        pytest.fail(f"SANDBOX_REQUIRE={os.environ['SANDBOX_REQUIRE']} but {why}", pytrace=False)
    pytest.skip(why)


def expected_tier() -> str | None:
    """The tier a Pool(tier="auto") must pick here: the strongest required one (None when nothing is required)."""
    req = required_tiers()
    if not req:
        return None
    from sandbox.tiers import TIERS

    return min(req, key=TIERS.index)


def check_tier(p) -> None:
    want = expected_tier()
    if want is not None and p.tier != want:
        pytest.fail(f"SANDBOX_REQUIRE={os.environ['SANDBOX_REQUIRE']}: the domains' pool fell back to tier {p.tier!r}, "
                    f"not {want!r}; probe errors: {getattr(p, 'probe_errors', None)}", pytrace=False)


@pytest.fixture(scope="session")
def sandbox_ready():
    """Asserts (or, on a developer's machine, skips unless) the sandbox package imports."""
    if not sandboxing.available():
        try:
            import sandbox  # noqa: F401
        except Exception as e:  # noqa: BLE001
            sandbox_missing(f"the sandbox package is not importable ({type(e).__name__}: {e})")
    return True


@pytest.fixture(scope="session")
def pool(sandbox_ready):
    with sandboxing.make_pool(1) as p:  # one slot: the machine has 2 shared cores; no tier at all raises
        check_tier(p)
        yield p


def run_cli_check(args: list[str], tmp_path) -> tuple[int, str, set, list]:
    """`python -m domains check ARGS --json F`: exit code, stdout, the (domain, difficulty) pairs checked, failures."""
    out, buf = tmp_path / "check.json", io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = cli_main(["check", *args, "--json", str(out)])
    res = json.loads(out.read_text())
    return rc, buf.getvalue(), {(r["domain"], r["difficulty"]) for r in res}, [r for r in res if not r["ok"]]


def every_oracle(sandboxed: bool) -> set:
    return {(d.name, k) for d in registry().values() if d.needs_sandbox == sandboxed for k in d.difficulties}
