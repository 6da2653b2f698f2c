"""The shared RL/eval loop: text in, trajectory out, same verifier."""
from domains import get, rollout
from domains.chat import IM_END, render_message


def _scripted(texts):
    it = iter(texts)
    return lambda messages: next(it)


def _as_text(msg):
    return render_message(msg).split("\n", 1)[1][:-1]  # body + <|im_end|>, as a model would generate it


def test_rollout_of_oracle_text_passes_the_verifier():
    d = get("agent.kv_then_file")
    t = d.generate(2, 1)
    texts = [_as_text(m) for m in d.solve(t) if m["role"] == "assistant"]
    traj = rollout(d, t, _scripted(texts))
    assert d.verify(t, traj).passed


def test_rollout_feeds_back_malformed_tool_calls_as_errors():
    d = get("scene.single")
    t = d.generate(0, 0)
    good = [_as_text(m) for m in d.solve(t) if m["role"] == "assistant"]
    traj = rollout(d, t, _scripted(['<tool_call>{"name": add_object}</tool_call>' + IM_END] + good))
    assert traj[1]["role"] == "tool" and traj[1]["content"].startswith("error: tool call is not valid JSON")
    assert d.verify(t, traj).passed


def test_rollout_stops_at_max_turns():
    d = get("agent.kv_single")
    t = d.generate(0, 0)
    call = '<tool_call>{"name": "kv_get", "arguments": {"key": "x"}}</tool_call>'
    traj = rollout(d, t, lambda messages: call)
    assert sum(m["role"] == "assistant" for m in traj) == t.max_turns and not d.verify(t, traj).passed
