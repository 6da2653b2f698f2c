"""Multi-turn rollouts of domain tasks on a target (domains.rollout_batch), with target errors kept per task.

A target error (timeout, bad body, over-long prompt) ends that task's rollout with an empty turn and marks the
task `error`: it is counted, and left out of pass rates, like a verifier's infra_error.
"""
from __future__ import annotations

from typing import Any

import domains


def run(target, items: list[tuple[Any, Any]], pool, *, slots: int, max_tokens: int, temperature: float = 0.0,
        seed: int = 0) -> tuple[list[list[dict]], list[str | None]]:
    """(trajectories, error per item) for (Domain, Task) pairs; sandbox tool envs run in waves of `slots`."""
    errors: list[str | None] = [None] * len(items)
    by_first = {id(t.messages[0]): i for i, (_, t) in enumerate(items)}  # rollout_batch reuses the prompt dicts

    def generate_batch(convs):
        gens = target.generate(convs, n=1, temperature=temperature, max_tokens=max_tokens, seed=seed)
        texts = []
        for c, g in zip(convs, gens):
            if g.error:
                i = by_first.get(id(c[0]))
                if i is not None and errors[i] is None:
                    errors[i] = g.error
                texts.append("")
            else:
                texts.append(g.texts[0])
        return texts

    holds = [i for i, (d, t) in enumerate(items) if d.needs_sandbox and t.tools]
    hold_set = set(holds)
    waves = [[i for i in range(len(items)) if i not in hold_set]]
    waves += [holds[k:k + slots] for k in range(0, len(holds), slots)]
    trajs: list = [None] * len(items)
    for wave in waves:
        if wave:
            for i, tr in zip(wave, domains.rollout_batch([items[i] for i in wave], generate_batch, pool)):
                trajs[i] = tr
    return trajs, errors


def steps(traj: list[dict]) -> int:
    return sum(1 for m in traj if m.get("role") == "assistant")
