"""Tool failures: infrastructure failures are retried and then blamed on nobody (infra error); errors the policy
caused are feedback, never retried; a rollout past its wall budget is cut and marked without holding up others."""
import threading
import time

import pytest

from domains import rollout_batch
from domains.core import Domain, Reward, Task, ToolError, ToolInfraError, tool
from domains.rollout import stats

CALL = '<tool_call>{"name": "ping", "arguments": {"x": 1}}</tool_call>'
DONE = "done"


class Flaky(Domain):
    """ping(x) -> 'pong x'; fails for infrastructure reasons `fail` times first; x < 0 is the policy's mistake;
    'slow' tasks hang in the tool until released. Passes when the trajectory saw a pong and ended with 'done'."""
    name, family = "test.flaky", "test"

    def __init__(self, fail=0, hang=None):
        self.fail, self.hang, self.attempts = fail, hang, 0

    def task(self, slow=False) -> Task:
        return Task(domain=self.name, family=self.family, seed=0, difficulty=0, max_turns=3,
                    messages=[{"role": "user", "content": "ping then say done"}],
                    tools=[tool("ping", "ping", {"x": {"type": "integer"}})], meta={"slow": slow})

    def tool_impls(self, task, pool):
        def ping(x):
            self.attempts += 1
            if task.meta["slow"]:
                self.hang.wait(60)
            if x < 0:
                raise ToolError("x must be >= 0")
            if self.attempts <= self.fail:
                raise ToolInfraError("sandbox failure: slot died")
            return f"pong {x}"
        return {"ping": ping}, None

    def score(self, task, trajectory, pool):
        ok = any(m.get("content", "").startswith("pong") for m in trajectory if m["role"] == "tool")
        return Reward(float(ok), ok)


def script(*texts):
    """generate_batch answering every conversation with texts[k] at its k-th assistant turn."""
    def gen(convs):
        return [texts[sum(m["role"] == "assistant" for m in c)] for c in convs]
    return gen


def run(d, tasks, texts=(CALL, DONE), **kw):
    return rollout_batch([(d, t) for t in tasks], script(*texts), None, retry_backoff_s=0.0, **kw)


def test_infra_failure_is_retried_and_the_policy_sees_the_success():
    d = Flaky(fail=2)
    t = d.task()
    [tr] = run(d, [t], tool_retries=2)
    assert d.attempts == 3
    assert [m["content"] for m in tr if m["role"] == "tool"] == ["pong 1"]
    assert stats(tr) == {"tool_retries": 2, "infra_error": None, "cut": False}
    assert d.verify(t, tr).passed


def test_tool_failing_after_all_retries_is_an_infra_error_not_a_zero():
    d = Flaky(fail=10**6)
    t = d.task()
    [tr] = run(d, [t], tool_retries=2)
    assert d.attempts == 3
    assert sum(m["role"] == "assistant" for m in tr) == 1  # the rollout stopped: nothing more to learn from it
    r = d.verify(t, tr)
    assert r.infra_error and "slot died" in r.infra_error and not r.passed
    assert stats(tr)["infra_error"] and not stats(tr)["cut"]


def test_policy_caused_tool_error_is_feedback_and_not_retried():
    d = Flaky(fail=10**6)  # would fail for infra reasons, but the bad argument is refused first
    t = d.task()
    bad = '<tool_call>{"name": "ping", "arguments": {"x": -1}}</tool_call>'
    [tr] = run(d, [t], texts=(bad, DONE), tool_retries=2)
    assert d.attempts == 1
    assert tr[1]["content"] == "error: x must be >= 0"
    r = d.verify(t, tr)
    assert r.infra_error is None and not r.passed and stats(tr)["tool_retries"] == 0


def test_environment_that_does_not_start_is_an_infra_error():
    class NoEnv(Flaky):
        def tool_impls(self, task, pool):
            self.attempts += 1
            raise RuntimeError("session shell did not start")

    d = NoEnv()
    t = d.task()
    [tr] = run(d, [t], tool_retries=1)
    assert d.attempts == 2 and d.verify(t, tr).infra_error


def test_rollout_past_its_budget_is_cut_without_delaying_the_others():
    release = threading.Event()
    d = Flaky(hang=release)
    tasks = [d.task(slow=True), d.task(), d.task()]
    t0 = time.monotonic()
    try:
        trs = run(d, tasks, max_active=2, budget_s=1.0)
        took = time.monotonic() - t0
    finally:
        release.set()
    assert took < 10  # the hung tool (60 s) held the batch for about its 1 s budget only (loose: shared CPU)
    assert stats(trs[0])["cut"] and d.verify(tasks[0], trs[0]).infra_error
    for t, tr in zip(tasks[1:], trs[1:]):  # the queued third task took the second's slot; both finished normally
        assert not stats(tr)["cut"] and d.verify(t, tr).passed


@pytest.mark.parametrize("budget", [None, 30.0])
def test_same_trajectories_with_or_without_a_budget(budget):
    d = Flaky()
    tasks = [d.task(), d.task()]
    trs = run(d, tasks, max_active=1, budget_s=budget)
    assert trs == [[{"role": "assistant", "content": "", "tool_calls": [{"name": "ping", "arguments": {"x": 1}}]},
                    {"role": "tool", "name": "ping", "content": "pong 1"},
                    {"role": "assistant", "content": DONE}]] * 2
