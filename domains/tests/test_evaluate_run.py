"""The evaluation protocol's rollouts (domains/evaluate.run) on stand-in targets: oracle replays pass, target
errors are counted apart from fails, sampled seeds repeat run to run, EngineTarget maps an engine's results."""
from __future__ import annotations

from types import SimpleNamespace

import pytest

import domains
from domains import chat
from domains.evaluate import EngineTarget, Gen, run, summarize

NAMES = ("math.gcd", "agent.kv_sum", "agent.kv_chain", "retrieval.city_log")


def _items(names=NAMES, per=2):
    return [(d, d.generate(seed=s, difficulty=min(d.difficulties))) for d in map(domains.get, names) for s in range(per)]


class Oracle:
    """Replays each task's oracle demonstration turn by turn; records every call's seed."""

    def __init__(self, items, wrong=()):
        self.by_prompt, self.seeds, self.wrong = {}, [], set(wrong)
        for d, t in items:
            turns = [chat.render_message(m)[len(chat.ASSISTANT_PREFIX):-len(chat.IM_END) - 1]
                     for m in d.solve(t) if m["role"] == "assistant"]
            self.by_prompt[chat.render(t.messages)] = turns

    def generate(self, convs, *, n=1, temperature=0.0, max_tokens=64, seed=None):
        self.seeds.append(seed)
        out = []
        for c in convs:
            k = next(i for i in range(len(c), 0, -1) if chat.render(c[:i]) in self.by_prompt)
            if chat.render(c[:k]) in self.wrong:
                out.append(Gen(error="timeout: stand-in") if "error" in self.wrong else Gen(["Answer: nonsense"] * n))
                continue
            turns = self.by_prompt[chat.render(c[:k])]
            out.append(Gen([turns[sum(1 for m in c[k:] if m["role"] == "assistant")]] * n))
        return out


@pytest.fixture(scope="module")
def items():
    return _items()


def test_oracle_passes_every_task_and_each_sample_is_its_own_rollout(items):
    recs = run(Oracle(items), items, None, n=3, temperature=1.0, max_tokens=64)
    assert [r["samples"] for r in recs] == [3] * len(items) and all(r["passed"] == 3 for r in recs)
    t = summarize(recs)["all"]
    assert sum(c["passed"] for c in t.values()) == 3 * len(items)
    assert [o["passed"] for r in recs for o in r["outcomes"]] == [True] * 3 * len(items)


def test_target_errors_are_counted_apart_from_fails(items):
    bad = chat.render(items[0][1].messages)
    fail = chat.render(items[1][1].messages)
    o = Oracle(items, wrong={bad, "error"})
    recs = run(o, items[:1], None)
    assert (recs[0]["errors"], recs[0]["passed"], recs[0]["outcomes"][0]["passed"]) == (1, 0, None)
    recs = run(Oracle(items, wrong={fail}), items[1:2], None)
    assert (recs[0]["errors"], recs[0]["passed"], recs[0]["outcomes"][0]["passed"]) == (0, 0, False)
    assert summarize(recs)["all"][items[1][0].split]["pass_rate"] == 0.0


def test_sampled_seeds_repeat_run_to_run_and_change_call_to_call(items):
    a, b = Oracle(items), Oracle(items)
    run(a, items, None, n=2, temperature=1.0, seed=5)
    run(b, items, None, n=2, temperature=1.0, seed=5)
    assert a.seeds == b.seeds and len(set(a.seeds)) == len(a.seeds)
    c = Oracle(items)
    run(c, items, None, n=2, temperature=1.0, seed=6)
    assert c.seeds != a.seeds


def test_a_turn_cap_makes_multi_turn_tasks_fail_not_pass():
    its = _items(("agent.kv_chain",))
    assert all(len([m for m in d.solve(t) if m["role"] == "assistant"]) > 1 for d, t in its)
    recs = run(Oracle(its), its, None, max_turns=1)
    assert all(r["passed"] == 0 and r["turns"] == 1 for r in recs)


class FakeEngine:
    max_model_len = 64

    def __init__(self):
        self.calls = []

    def generate(self, prompts, *, n, temperature, max_tokens, seed):
        self.calls.append(seed)
        return [[SimpleNamespace(text="", finish_reason="prompt_too_long")] * n if len(p) > 300 else
                [SimpleNamespace(text=f"Answer: {i}", finish_reason="stop")] * n for i, p in enumerate(prompts)]


def test_engine_target_reports_prompts_without_room_as_errors_and_drops_seeds_when_greedy():
    eng = FakeEngine()
    t = EngineTarget(eng)
    short, long = [{"role": "user", "content": "hi"}], [{"role": "user", "content": "x " * 400}]
    g = t.generate([short, long], n=2, temperature=0.0, seed=3)
    assert g[0].texts == ["Answer: 0"] * 2 and g[0].error is None
    assert g[1].texts == [] and "max_model_len=64" in g[1].error
    t.generate([short], temperature=0.7, seed=3)
    assert eng.calls == [None, 3]
