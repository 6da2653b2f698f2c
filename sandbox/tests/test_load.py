"""Volume: every submitted task yields exactly one result, none lost or duplicated; infra errors counted."""
from __future__ import annotations

import collections
import time

import pytest

from sandbox import Task


def _load(n: int, concurrency: int):
    from sandbox import Pool
    with Pool(slots=concurrency) as pool:
        t0 = time.monotonic()
        futs = [pool.submit(Task(cmd=["echo", str(i)], id=str(i))) for i in range(n)]
        rs = [f.result() for f in futs]
        dt = time.monotonic() - t0
    ids = collections.Counter(r.task_id for r in rs)
    infra = sum(r.infra_error is not None for r in rs)
    wrong = sum(r.stdout != f"{r.task_id}\n" for r in rs if r.infra_error is None)
    print(f"\n{n} tasks at concurrency {concurrency}: {len(rs)} results, {infra} infra errors, "
          f"{wrong} wrong outputs, {n / dt:.1f} tasks/s")
    return rs, ids, infra, wrong


@pytest.mark.usefixtures("root")
def test_400_tiny_tasks_at_concurrency_8_all_return_once():
    rs, ids, infra, wrong = _load(400, 8)
    assert len(rs) == 400 and set(ids) == {str(i) for i in range(400)} and max(ids.values()) == 1
    assert infra == 0 and wrong == 0


@pytest.mark.slow
@pytest.mark.usefixtures("root")
def test_10000_tiny_tasks_at_concurrency_8_all_return_once():
    rs, ids, infra, wrong = _load(10_000, 8)
    assert len(rs) == 10_000 and set(ids) == {str(i) for i in range(10_000)} and max(ids.values()) == 1
    assert wrong == 0
    assert infra == 0, f"{infra} infra errors in 10,000 tasks"
