"""Repo-wide pytest set-up, loaded before any test module imports torch."""
import os
import sys

# OpenMP threads spinning at barriers collapse when the 2 cores are shared (8x slower measured);
# passive waiting keeps both threads useful. Subprocesses of the tests inherit it.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

# Cache bytecode even where the shell sets PYTHONDONTWRITEBYTECODE (the Makefile unexports it too): set-up
# installs with --no-compile, so otherwise this process and every vLLM/Megatron subprocess recompile them.
sys.dont_write_bytecode = False
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)

# session fixtures shared across stages' tests (micro chain, memorised datasets, a target that passes tasks)
pytest_plugins = ["tests.trained_fixtures"]

import pytest  # noqa: E402 - after the environment above

# `make test` runs on pytest-xdist workers (Makefile TEST_WORKERS). The scheduler below sends each file's tests to one
# worker, so its module fixtures are built once, and the files that share the trained target of
# tests/trained_fixtures.py (~2 min to build) to the same one. (xdist's own --dist loadgroup marks do not take with
# pytest 9.2: every test went out alone.) With --no-loadscope-reorder the groups go out in collection order, and the
# groups whose fixtures take longest come first so that no worker is left alone with one at the end.
SHARED_GROUPS = {"serving/tests/": "trained_target", "tests/test_one_protocol.py": "trained_target"}
FIRST = ("tests/test_chain.py", "trained_target", "rl/tests/test_rl_train.py", "rl/tests/test_rl_routing.py",
         "rl/tests/test_rl_async.py")


def xdist_group_of(nodeid: str) -> str:
    path = nodeid.split("::")[0]
    return next((g for prefix, g in SHARED_GROUPS.items() if path.startswith(prefix)), path)


@pytest.hookimpl(optionalhook=True)  # a hook of pytest-xdist, absent without it
def pytest_xdist_make_scheduler(config, log):
    from xdist.scheduler import LoadScopeScheduling

    class ByGroup(LoadScopeScheduling):
        def _split_scope(self, nodeid: str) -> str:
            return xdist_group_of(nodeid)

    return ByGroup(config, log)


def pytest_collection_modifyitems(config, items):
    rank = {g: i for i, g in enumerate(FIRST)}
    items.sort(key=lambda item: rank.get(xdist_group_of(item.nodeid), len(FIRST)))  # stable: files stay whole
