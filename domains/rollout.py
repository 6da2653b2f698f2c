"""Run a policy through tasks: the loop RL and eval share (generation is the caller's business).

    from domains import get, rollout, rollout_batch
    d = get("agent.kv_sum"); task = d.generate(seed=0, difficulty=1)
    traj = rollout(d, task, generate=lambda messages: my_model(render(messages, add_generation_prompt=True)))
    reward = d.verify(task, traj)
    # many tasks in lockstep, one batched generation call per turn (vLLM):
    trajs = rollout_batch([(d, task), ...], generate_batch=lambda convs: [my_model(c) for c in convs])
    # long-running (sandbox) tasks: a queue of `max_active` at a time, each cut at `budget_s` seconds of wall time
    trajs = rollout_batch(items, generate_batch, pool, max_active=2, budget_s=120)
    # both at once, what RL and every evaluation run: a lockstep lane and a sandbox lane, one generator per lane
    trajs = rollout_lanes(items, make_generate=lambda lane: generate_batch, pool=pool, slots=2, budget_s=120)

`generate(messages) -> str` returns the raw assistant text (up to <|im_end|>). A malformed tool call is kept
as the assistant's text and answered by a tool message named "error", so the policy can recover.

Infrastructure failures are not the policy's fault: a tool that still fails after ToolEnv's retries, an
environment that does not start, or a rollout past its wall budget ends the rollout with a tool message carrying
"infra_error" (core.infra_mark); Domain.verify turns that into Reward.infra, which RL skips and eval counts.
Tool messages whose call needed retries carry "retries": n. stats(trajectory) reads both back.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable

from domains.chat import ToolCallError, parse_assistant
from domains.core import Domain, Task, infra_mark


def rollout(domain: Domain, task: Task, generate: Callable[[list[dict]], str], pool: Any = None) -> list[dict]:
    return rollout_batch([(domain, task)], lambda convs: [generate(c) for c in convs], pool)[0]


def stats(trajectory: list[dict]) -> dict:
    """{"tool_retries": retried attempts, "infra_error": the mark or None, "cut": cut at its wall budget}."""
    tool_msgs = [m for m in trajectory if m.get("role") == "tool"]
    return {"tool_retries": sum(int(m.get("retries", 0)) for m in tool_msgs), "infra_error": infra_mark(trajectory),
            "cut": any(m.get("budget_cut") for m in tool_msgs)}


def _mark(why: str, cut: bool = False) -> dict:
    m = {"role": "tool", "name": "error", "content": f"error: {why}", "infra_error": why}
    if cut:
        m["budget_cut"] = True
    return m


def _open_env(domain: Domain, task: Task, pool: Any, retries: int | None, backoff_s: float | None):
    """(env, None) or (None, why): an environment that does not start is retried like a failing tool."""
    from domains.core import TOOL_BACKOFF_S, TOOL_RETRIES

    retries = TOOL_RETRIES if retries is None else retries
    backoff_s = TOOL_BACKOFF_S if backoff_s is None else backoff_s
    for k in range(retries + 1):
        try:
            env = domain.make_env(task, pool)
            env.retries, env.backoff_s = retries, backoff_s
            return env, None
        except ValueError:
            raise  # a caller's mistake (no pool for a sandbox domain), not the infrastructure's
        except Exception as e:  # noqa: BLE001
            why = f"environment did not start: {type(e).__name__}: {e}"
            if k < retries:
                time.sleep(backoff_s * 2 ** k)
    return None, f"{why} (after {retries + 1} attempts)"


class _Steps(threading.Thread):
    """The tool calls of one assistant message, in order, in a daemon thread (a hung tool cannot block exit).
    If the loop gives up on it (budget), the thread closes the environment itself once its call returns."""

    def __init__(self, env, calls: list[dict]):
        super().__init__(daemon=True)
        self.env, self.calls, self.out = env, calls, []
        self.lock, self.finished, self.abandoned = threading.Lock(), False, False
        self.t_done = 0.0

    def run(self) -> None:
        try:
            for call in self.calls:
                self.out.append((call, self.env.step(call), self.env.log[-1].get("retries", 0)))
                if self.env.infra_error:
                    break
        finally:
            self.t_done = time.monotonic()
            with self.lock:
                self.finished = True
                close = self.abandoned
            if close:
                self.env.close()

    def abandon(self) -> bool:
        """True if the calls were still running (the environment is now the thread's to close)."""
        with self.lock:
            self.abandoned = not self.finished
            return self.abandoned


def rollout_batch(items: list[tuple[Domain, Task]], generate_batch: Callable[[list[list[dict]]], list[str]],
                  pool: Any = None, *, max_active: int | None = None, budget_s: float | None = None,
                  tool_retries: int | None = None, retry_backoff_s: float | None = None) -> list[list[dict]]:
    """Trajectories for many (domain, task) pairs; each turn asks `generate_batch` for all unfinished ones.

    max_active: at most this many rollouts at once (a queue: a finished one's place goes to the next item, so a
    rollout holding a sandbox session never waits on one it cannot get). budget_s: each rollout's wall-clock
    budget from its start, not counting the time it waited in lockstep for other rollouts' tools; tool calls
    of a turn then run concurrently and a rollout past its budget is cut (marked infra, see the module doc) at
    once, even mid-call. tool_retries / retry_backoff_s: ToolEnv's."""
    trajs: list[list[dict]] = [[] for _ in items]
    envs: list = [None] * len(items)
    turns = [0] * len(items)
    start = [0.0] * len(items)  # budget deadline of rollout i: start[i] + waited[i] + budget_s
    waited = [0.0] * len(items)  # time i spent idle while other rollouts' tools ran (lockstep)
    pending, active = list(range(len(items))), []
    width = max_active or len(items) or 1
    owned_by_thread: set[int] = set()  # cut mid-call: the step thread closes the env when its call returns

    def cut(i: int) -> None:
        trajs[i].append(_mark(f"rollout cut: over its wall budget of {budget_s:g}s", cut=True))

    try:
        while pending or active:
            while pending and len(active) < width:
                i = pending.pop(0)
                d, t = items[i]
                if t.tools:
                    envs[i], why = _open_env(d, t, pool, tool_retries, retry_backoff_s)
                    if why:
                        trajs[i].append(_mark(why))
                        continue
                start[i] = time.monotonic()  # after the env opened: waiting for a free sandbox slot is not its time
                active.append(i)
            if not active:
                continue
            texts = generate_batch([list(items[i][1].messages) + trajs[i] for i in active])
            ended: set[int] = set()
            steps: dict[int, _Steps] = {}
            for i, text in zip(active, texts):
                turns[i] += 1
                try:
                    msg = parse_assistant(text)
                except ToolCallError as e:
                    trajs[i] += [{"role": "assistant", "content": text},
                                 {"role": "tool", "name": "error", "content": f"error: {e}"}]
                    continue
                trajs[i].append(msg)
                if not msg.get("tool_calls") or envs[i] is None:
                    ended.add(i)  # final answer
                else:
                    steps[i] = _Steps(envs[i], msg["tool_calls"])
            if budget_s is None:
                for s in steps.values():
                    s.run()  # inline: no thread, no deadline
            else:
                t_tools = time.monotonic()
                for s in steps.values():
                    s.start()
                for i, s in steps.items():
                    s.join(max(0.0, start[i] + waited[i] + budget_s - time.monotonic()))
                    if s.abandon():
                        owned_by_thread.add(i)
                        ended.add(i)
                        cut(i)
                t_end = time.monotonic()
                for i in active:
                    if i not in owned_by_thread:
                        waited[i] += t_end - (steps[i].t_done if i in steps else t_tools)
            for i, s in steps.items():
                if i in owned_by_thread:
                    continue
                for call, obs, retries in s.out:
                    m = {"role": "tool", "name": call["name"], "content": obs}
                    if retries:
                        m["retries"] = retries
                    trajs[i].append(m)
                if envs[i].infra_error:
                    trajs[i][-1]["infra_error"] = envs[i].infra_error
                    ended.add(i)
            still = []
            for i in active:
                if i not in ended and turns[i] < items[i][1].max_turns:
                    if budget_s is None or time.monotonic() - start[i] - waited[i] <= budget_s:
                        still.append(i)
                        continue
                    cut(i)
                if envs[i] is not None and i not in owned_by_thread:
                    envs[i].close()  # now: a queued rollout may be waiting for this sandbox slot
            active = still
    finally:
        for i, env in enumerate(envs):
            if env is not None and i not in owned_by_thread:
                env.close()
    return trajs


def rollout_lanes(items: list[tuple[Domain, Task]], make_generate: Callable[[int], Callable], pool: Any = None, *,
                  slots: int = 2, budget_s: float | None = None, tool_retries: int | None = None,
                  retry_backoff_s: float | None = None) -> list[list[dict]]:
    """rollout_batch in two lanes at the same time, what RL's rollouts and every evaluation run on.

    Lane 0: every rollout without a sandbox session, in one lockstep batch (one generate call per turn).
    Lane 1: tool environments that hold a sandbox session, a queue of `slots` at a time (a freed slot goes to the
    next one), each with a wall budget of `budget_s` (None = no budget; past it the rollout is cut and marked infra).
    make_generate(lane) gives each lane its own generate_batch, so seeds can be drawn per lane and the samples do
    not depend on how the lanes interleave; calls into the generator are serialised under one lock (one engine)."""
    lock = threading.Lock()

    def locked(gen: Callable) -> Callable:
        def call(convs):
            with lock:
                return gen(convs)
        return call

    hold = {i for i, (d, t) in enumerate(items) if d.needs_sandbox and t.tools}
    long_idx = sorted(hold)
    fast_idx = [i for i in range(len(items)) if i not in hold]
    trajs: list[list[dict]] = [[] for _ in items]
    opts = dict(tool_retries=tool_retries, retry_backoff_s=retry_backoff_s)
    failed: list[BaseException] = []

    def run(idx: list[int], lane: int, **kw) -> None:
        if idx:
            for i, tr in zip(idx, rollout_batch([items[i] for i in idx], locked(make_generate(lane)), pool, **opts, **kw)):
                trajs[i] = tr

    def long_lane() -> None:
        try:
            run(long_idx, 1, max_active=max(1, slots), budget_s=budget_s or None)
        except BaseException as e:  # noqa: BLE001 - re-raised in the caller's thread
            failed.append(e)

    thread = threading.Thread(target=long_lane, daemon=True)
    if long_idx:
        thread.start()
    run(fast_idx, 0)
    if long_idx:
        thread.join()
    if failed:
        raise failed[0]
    return trajs
