"""The root conftest.py schedules `make test` on pytest-xdist workers by groups of files: every group it names must
still be there, else a renamed file silently loses its place (its module fixtures built on two workers, or the
longest fixtures left for the end)."""
from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _conftest():
    spec = importlib.util.spec_from_file_location("root_conftest", ROOT / "conftest.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_every_named_file_or_folder_exists():
    c = _conftest()
    shared = set(c.SHARED_GROUPS.values())
    named = [p for p in (*c.SHARED_GROUPS, *c.FIRST) if p not in shared]
    assert named and [p for p in named if not (ROOT / p).exists()] == []


def test_files_sharing_the_trained_target_are_one_group():
    c = _conftest()
    groups = {c.xdist_group_of(n) for n in ("serving/tests/test_fast.py::a", "serving/tests/test_serve.py::b[x]",
                                             "tests/test_one_protocol.py::c")}
    assert groups == {"trained_target"} and c.xdist_group_of("tests/test_chain.py::d") == "tests/test_chain.py"
