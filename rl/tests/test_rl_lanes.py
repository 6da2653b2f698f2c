"""The long lane: sandbox-holding rollouts run beside the fast batch, each with a wall budget; tool infrastructure
failures are retried; what still fails or is cut becomes an infra error, counted, never a 0 or a 1."""
from __future__ import annotations

import threading
import time

import pytest

from domains import chat
from domains.core import Domain, Reward, Task, ToolInfraError, tool
from rl.config import RewardConfig
from rl.rewards import score_all
from model.vllm_engine import Completion
from rl.trajectory import Renderer, lane_metrics, rollout

CALL = '<tool_call>{"name": "ping", "arguments": {}}</tool_call>'
RELEASE = threading.Event()


class Ping(Domain):
    """ping() -> 'pong' (mode 'hang': blocks; 'flaky': one sandbox failure first; 'broken': always fails)."""
    family = "test"

    def __init__(self, name, needs_sandbox, mode="ok"):
        self.name, self.needs_sandbox, self.mode, self.calls = name, needs_sandbox, mode, 0

    def task(self) -> Task:
        return Task(domain=self.name, family=self.family, seed=0, difficulty=0, max_turns=3,
                    messages=[{"role": "user", "content": "ping, then say done"}], tools=[tool("ping", "ping", {})])

    def tool_impls(self, task, pool):
        def ping():
            self.calls += 1
            if self.mode == "hang":
                RELEASE.wait(120)
            if self.mode == "broken" or (self.mode == "flaky" and self.calls == 1):
                raise ToolInfraError("sandbox failure: slot died")
            return "pong"
        return {"ping": ping}, None

    def score(self, task, trajectory, pool):
        ok = any(m["content"] == "pong" for m in trajectory if m["role"] == "tool")
        return Reward(float(ok), ok)


class PingEngine:
    """A tool call at the first turn of every conversation, 'done' after."""

    def __init__(self, tok):
        self.tok = tok

    def generate(self, prompts, n, temperature, top_p, max_tokens, seeds):
        out = []
        for p in prompts:
            turn = self.tok.decode(p).count(chat.ASSISTANT_PREFIX) - 1
            ids = self.tok(CALL if turn == 0 else "done", add_special_tokens=False)["input_ids"]
            ids.append(self.tok.convert_tokens_to_ids(chat.IM_END))
            out.append([Completion("", ids, [-0.1] * len(ids), "stop")])
        return out


@pytest.fixture(scope="module")
def tok(tok_dir):
    from transformers import PreTrainedTokenizerFast

    return PreTrainedTokenizerFast.from_pretrained(str(tok_dir / "tok"))


def run(tok, items, **kw):
    return rollout(PingEngine(tok), Renderer(tok), items, n=2, temperature=1.0, top_p=1.0, max_tokens=32, seed=0,
                   pool=object(), sandbox_slots=2, retry_backoff_s=0.0, **kw)


def test_long_rollout_past_its_budget_is_cut_counted_and_excluded(tok):
    fast, box, hang = Ping("t.fast", False), Ping("t.box", True), Ping("t.hang", True, "hang")
    t0 = time.monotonic()
    try:
        rs = run(tok, [(fast, fast.task()), (hang, hang.task()), (box, box.task())], long_timeout_s=2.0)
        took = time.monotonic() - t0
    finally:
        RELEASE.set()
    assert took < 20  # the hung tool blocks 120 s; the lane gave it ~2 s (loose bound: shared CPU)
    assert [r.cut for r in rs] == [False, False, True, True, False, False]
    assert lane_metrics(rs) == {"tool_retries": 0, "tool_infra_failed": 0, "rollouts_cut": 2}
    rewards = score_all(rs, object(), RewardConfig(timeout_s=5, sandbox_timeout_s=5))
    assert [bool(w.infra_error) for w in rewards] == [False, False, True, True, False, False]
    assert all(w.passed for w, r in zip(rewards, rs) if not r.cut)  # the others finished their turns normally
    for r in rs:  # the trained sequence still holds exactly the sampled ids
        assert [t for t, m in zip(r.tokens, r.action_mask) if m] == [t for s in r.turns for t in s.token_ids]


def test_tool_infra_failures_are_retried_and_counted(tok):
    flaky, broken = Ping("t.flaky", True, "flaky"), Ping("t.broken", True, "broken")
    rs = run(tok, [(flaky, flaky.task()), (broken, broken.task())], tool_retries=2)
    assert flaky.calls == 3 and broken.calls == 6  # flaky: 1 failure + 1 success, then the second sample's call
    assert lane_metrics(rs) == {"tool_retries": 1 + 2 * 2, "tool_infra_failed": 2, "rollouts_cut": 0}
    rewards = score_all(rs, object(), RewardConfig(timeout_s=5, sandbox_timeout_s=5))
    assert [w.passed for w in rewards[:2]] == [True, True]
    assert all(w.infra_error and "slot died" in w.infra_error and w.score == 0 for w in rewards[2:])


@pytest.mark.parametrize("key", ["long_timeout_s", "tool_retries", "tool_retry_backoff_s"])
def test_negative_lane_settings_are_rejected_by_name(key):
    from model.config import ConfigError
    from rl.config import RLConfig

    with pytest.raises(ConfigError, match=f"rollout.{key}=-1"):
        RLConfig.from_dict({"rollout": {key: -1}})
