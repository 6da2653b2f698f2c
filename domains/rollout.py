"""Run a policy through tasks: the loop RL and eval share (generation is the caller's business).

    from domains import get, rollout, rollout_batch
    d = get("agent.kv_sum"); task = d.generate(seed=0, difficulty=1)
    traj = rollout(d, task, generate=lambda messages: my_model(render(messages, add_generation_prompt=True)))
    reward = d.verify(task, traj)
    # many tasks in lockstep, one batched generation call per turn (vLLM):
    trajs = rollout_batch([(d, task), ...], generate_batch=lambda convs: [my_model(c) for c in convs])

`generate(messages) -> str` returns the raw assistant text (up to <|im_end|>). A malformed tool call is kept
as the assistant's text and answered by a tool message named "error", so the policy can recover.
"""
from __future__ import annotations

from typing import Any, Callable

from domains.chat import ToolCallError, parse_assistant
from domains.core import Domain, Task


def rollout(domain: Domain, task: Task, generate: Callable[[list[dict]], str], pool: Any = None) -> list[dict]:
    return rollout_batch([(domain, task)], lambda convs: [generate(c) for c in convs], pool)[0]


def rollout_batch(items: list[tuple[Domain, Task]], generate_batch: Callable[[list[list[dict]]], list[str]],
                  pool: Any = None) -> list[list[dict]]:
    """Trajectories for many (domain, task) pairs; each turn asks `generate_batch` for all unfinished ones."""
    trajs: list[list[dict]] = [[] for _ in items]
    envs = [d.make_env(t, pool) if t.tools else None for d, t in items]
    turns = [0] * len(items)
    active = list(range(len(items)))
    try:
        while active:
            texts = generate_batch([list(items[i][1].messages) + trajs[i] for i in active])
            still = []
            for i, text in zip(active, texts):
                turns[i] += 1
                try:
                    msg = parse_assistant(text)
                except ToolCallError as e:
                    trajs[i] += [{"role": "assistant", "content": text},
                                 {"role": "tool", "name": "error", "content": f"error: {e}"}]
                else:
                    trajs[i].append(msg)
                    if not msg.get("tool_calls") or envs[i] is None:
                        continue  # final answer
                    for call in msg["tool_calls"]:
                        trajs[i].append({"role": "tool", "name": call["name"], "content": envs[i].step(call)})
                if turns[i] < items[i][1].max_turns:
                    still.append(i)
            active = still
    finally:
        for env in envs:
            if env is not None:
                env.close()
    return trajs
