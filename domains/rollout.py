"""Run a policy through a task: the loop RL and eval share (generation is the caller's business).

    from domains import get, rollout
    d = get("agent.kv_sum"); task = d.generate(seed=0, difficulty=1)
    traj = rollout(d, task, generate=lambda messages: my_model(render(messages, add_generation_prompt=True)))
    reward = d.verify(task, traj)

`generate(messages) -> str` returns the raw assistant text (up to <|im_end|>). A malformed tool call is kept
as the assistant's text and answered by a tool message named "error", so the policy can recover.
"""
from __future__ import annotations

from typing import Any, Callable

from domains.chat import ToolCallError, parse_assistant
from domains.core import Domain, Task


def rollout(domain: Domain, task: Task, generate: Callable[[list[dict]], str], pool: Any = None) -> list[dict]:
    messages = list(task.messages)
    traj: list[dict] = []
    env = domain.make_env(task, pool) if task.tools else None
    try:
        for _ in range(task.max_turns):
            text = generate(messages + traj)
            try:
                msg = parse_assistant(text)
            except ToolCallError as e:
                traj += [{"role": "assistant", "content": text}, {"role": "tool", "name": "error", "content": f"error: {e}"}]
                continue
            traj.append(msg)
            if not msg.get("tool_calls") or env is None:
                break
            for call in msg["tool_calls"]:
                traj.append({"role": "tool", "name": call["name"], "content": env.step(call)})
    finally:
        if env is not None:
            env.close()
    return traj
