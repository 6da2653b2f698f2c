"""Plug-in domains for RL tests (DOMAINS_PLUGINS=rl.tests.toy_domains): rewards an untrained micro policy
can earn, and verifiers that break their contract.

- toy.parity / toy.parity_eval: pass when the reply has an even number of characters (about half of random
  replies), so groups have reward variance and the objective, clipping and sync paths all see real tokens.
- toy.raises: verify() itself raises (a plug-in ignoring the never-raises contract).
- toy.hangs: verify() blocks far beyond any timeout.
"""
from __future__ import annotations

import threading

from domains.core import Domain, Reward, Task


class Parity(Domain):
    family = "toy"
    difficulties = (0, 1)
    description = "reply with an even number of characters"

    def __init__(self, name: str, split: str):
        self.name, self.split = name, split

    def build(self, rng, difficulty):
        n = rng.randint(1, 99)
        return {"messages": [{"role": "system", "content": "Reply briefly."},
                             {"role": "user", "content": f"Say something about {n}."}], "answer": n}

    def oracle(self, task):
        yield {"role": "assistant", "content": "ok"}

    def score(self, task, trajectory, pool):
        ok = len(trajectory[-1].get("content") or "") % 2 == 0
        return Reward(1.0 if ok else 0.0, ok, {})


class Raises(Parity):
    def verify(self, task, trajectory, pool=None, timeout_s=None):
        raise RuntimeError("verifier bug")


_STOP = threading.Event()


class Hangs(Parity):
    def verify(self, task, trajectory, pool=None, timeout_s=None):
        _STOP.wait(3600)
        return Reward(1.0, True, {})  # would be a pass, if it ever returned in time


def register():
    return [Parity("toy.parity", "train"), Parity("toy.parity_eval", "heldout"), Raises("toy.raises", "train"),
            Hangs("toy.hangs", "train")]
