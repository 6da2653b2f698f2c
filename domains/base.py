"""AnswerDomain: a single-turn question whose final line is 'Answer: <value>' (math, retrieval, docs).

A variant is a function make(rng, difficulty) -> Q(question, answer, working); the domain wraps it:

    AnswerDomain("math.add", "math", make_add, kind="int")
"""
from __future__ import annotations

import random
from dataclasses import dataclass
from typing import Any, Callable, Iterator

from domains import answers
from domains.core import Domain, Reward, Task

FORMAT_HINT = {
    "int": "an integer",
    "frac": "a fraction a/b in lowest terms (or 0)",
    "word": "a single word",
    "text": "the exact value",
    **{f"dec{n}": f"a number with exactly {n} decimals" for n in range(1, 5)},
}


@dataclass
class Q:
    question: str
    answer: str
    working: str = ""          # optional worked steps the oracle writes before the answer line
    extra: dict | None = None  # hidden data kept in Task.meta (e.g. cited source lines)
    kind: str | None = None    # overrides the domain's kind for this instance


class AnswerDomain(Domain):
    def __init__(self, name: str, family: str, make: Callable[[random.Random, int], Q], kind: str = "int",
                 tol: float = 0.0, difficulties: tuple[int, ...] = (0, 1, 2, 3), description: str = "",
                 system: str | None = None):
        self.name, self.family, self.make, self.kind, self.tol = name, family, make, kind, tol
        self.difficulties, self.description = difficulties, description or (make.__doc__ or "").strip()
        self.system = system

    def build(self, rng: random.Random, difficulty: int) -> dict[str, Any]:
        q = self.make(rng, difficulty)
        kind = q.kind or self.kind
        system = self.system or f"Answer the question. End with one line 'Answer: <value>' where the value is {FORMAT_HINT[kind]}."
        return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": q.question}],
                "answer": {"value": q.answer, "kind": kind, "tol": self.tol},
                "meta": {"working": q.working, **(q.extra or {})}}

    def final_message(self, task: Task) -> str:
        w = task.meta.get("working") or ""
        return (w + "\n" if w else "") + f"Answer: {task.answer['value']}"

    def oracle(self, task: Task) -> Iterator[dict]:
        yield {"role": "assistant", "content": self.final_message(task)}

    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        a = task.answer
        ok, why = answers.match(a["kind"], answers.answer_line(trajectory[-1].get("content") or ""), a["value"], a["tol"])
        return Reward(1.0 if ok else 0.0, ok, {"reason": why})

    def format_ok(self, task: Task, text: str) -> bool:
        return answers.answer_line(text) is not None
