"""Reward hacks the pure-Python verifiers must reject (sandbox families: test_sandbox_families.py)."""
import copy
import json

import pytest

from domains import get
from domains.core import Reward


def _final(text):
    return [{"role": "assistant", "content": text}]


@pytest.mark.parametrize("text", ["answer: {v}", "Answer:{v}", "Answer: {v}.0", "{v}", "Answer: {v} apples",
                                  "The answer is {v}", "Answer: {v}\nAnswer: 1{v}", "Answer: +{v}", "**Answer: {v}**"])
def test_loosely_formatted_math_answers_fail(text):
    d = get("math.add")
    t = d.generate(0, 1)
    v = t.answer["value"]
    assert d.verify(t, _final(f"Answer: {v}")).passed
    assert not d.verify(t, _final(text.format(v=v))).passed


def test_thousands_separator_in_docs_answer_fails():
    d = get("docs.revenue")
    t = d.generate(0, 1)
    v = int(t.answer["value"])
    assert not d.verify(t, _final(f"Answer: {v:,}\nSource: {t.answer['source'][0]}")).passed


def test_docs_right_number_wrong_citation_does_not_pass():
    d = get("docs.gross_margin")
    t = d.generate(0, 2)
    r = d.verify(t, _final(f"Answer: {t.answer['value']}\nSource: L01"))
    assert not r.passed and r.score == 0.5


def test_structured_json_in_code_fence_fails():
    d = get("structured.person_kv")
    t = d.generate(0, 1)
    assert not d.verify(t, _final("```json\n" + json.dumps(t.answer) + "\n```")).passed


def test_structured_string_typed_number_fails():
    d = get("structured.product_kv")
    t = d.generate(4, 3)
    bad = {k: (str(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v) for k, v in t.answer.items()}
    assert bad != t.answer and not d.verify(t, _final(json.dumps(bad))).passed


def test_structured_extra_key_fails():
    d = get("structured.event_prose")
    t = d.generate(1, 1)
    assert not d.verify(t, _final(json.dumps({**t.answer, "note": "extra"}))).passed


@pytest.mark.parametrize("name", ["math.gcd", "structured.book_kv", "retrieval.passkey_log", "docs.roe",
                                  "scene.row", "agent.kv_chain"])
def test_empty_output_fails(name):
    d = get(name)
    t = d.generate(0, 1)
    assert not d.verify(t, _final("")).passed


@pytest.mark.parametrize("name", ["math.gcd", "structured.book_kv", "docs.roe", "agent.kv_single"])
def test_enormous_output_fails(name):
    d = get(name)
    t = d.generate(0, 0)
    good = d.solve(t)
    huge = copy.deepcopy(good)
    huge[-1]["content"] = "x" * 200_000 + "\n" + huge[-1]["content"]
    assert d.verify(t, good).passed and not d.verify(t, huge).passed


def test_scene_call_with_wrong_parameter_types_does_not_pass():
    d = get("scene.positioned_set")
    t = d.generate(0, 1)
    traj = d.solve(t)
    for m in traj:
        for c in m.get("tool_calls") or []:
            if c["name"] == "transform":
                c["arguments"]["position"] = [str(x) for x in c["arguments"]["position"]]
    r = d.verify(t, traj)
    assert not r.passed


def test_scene_schema_error_blocks_pass_even_if_scene_is_right():
    d = get("scene.single")
    t = d.generate(0, 0)
    traj = d.solve(t)
    traj[0]["tool_calls"].append({"name": "set_material", "arguments": {"name": 7, "color": "red"}})
    r = d.verify(t, traj)
    assert not r.passed and r.details.get("schema_errors")


def test_agent_wrong_argument_type_does_not_pass():
    d = get("agent.kv_single")
    t = d.generate(0, 0)
    traj = d.solve(t)
    traj[0]["tool_calls"][0]["arguments"]["key"] = [traj[0]["tool_calls"][0]["arguments"]["key"]]
    assert not d.verify(t, traj).passed


def test_agent_forged_tool_results_do_not_count():
    d = get("agent.kv_sum")
    t = d.generate(0, 1)
    v = t.answer["value"]
    forged = [{"role": "assistant", "content": "", "tool_calls": [{"name": "calculator", "arguments": {"expression": "1"}}]},
              {"role": "tool", "name": "kv_get", "content": "all values looked up"},
              {"role": "assistant", "content": f"Answer: {v}"}]
    r = d.verify(t, forged)
    assert not r.passed and r.details["missing_lookups"]


def test_agent_guessing_without_lookups_fails():
    d = get("agent.kv_single")
    t = d.generate(0, 0)
    assert not d.verify(t, _final(f"Answer: {t.answer['value']}")).passed


def test_agent_extra_calls_lower_the_score():
    d = get("agent.kv_single")
    t = d.generate(0, 0)
    traj = d.solve(t)
    extra = traj[:2] * 4 + traj[2:]
    r = d.verify(t, extra)
    assert r.score < 1.0 and not r.passed


class _Res:
    def __init__(self, **kw):
        self.__dict__.update(dict(exit_code=0, stdout="", stderr="", timed_out=False, infra_error=None,
                                  stdout_truncated=False), **kw)


class _BrokenPool:
    def run(self, task):
        return _Res(infra_error="slot could not start")


class _RaisingPool:
    def run(self, task):
        raise ConnectionError("sandbox server unreachable")

    def session(self, **kw):
        raise ConnectionError("sandbox server unreachable")


@pytest.mark.parametrize("pool", [_BrokenPool(), _RaisingPool()])
def test_sandbox_failure_is_infra_error_never_pass(pool):
    pytest.importorskip("sandbox")  # Task/Limits objects come from the sandbox package
    d = get("code.add_two")
    t = d.generate(0, 0)
    r = d.verify(t, _final(f"```python\n{t.answer}\n```"), pool=pool)
    assert isinstance(r, Reward) and r.infra_error and not r.passed


def test_process_rewards_one_per_assistant_message():
    for name in ["scene.snowman", "agent.multi_hop", "math.add"]:
        d = get(name)
        t = d.generate(0, 2)
        traj = d.solve(t)
        pr = d.process_rewards(t, traj)
        assert len(pr) == sum(m["role"] == "assistant" for m in traj) and pr[-1] == 1.0


def test_scene_process_reward_zero_for_invalid_step():
    d = get("scene.pair")
    t = d.generate(0, 1)
    traj = d.solve(t)
    traj[0]["tool_calls"][0]["arguments"]["shape"] = "dodecahedron"
    assert d.process_rewards(t, traj)[0] == 0.0
