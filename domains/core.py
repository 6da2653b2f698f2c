"""Task, Reward, Domain and ToolEnv: the types every family builds on (see domains/__init__.py for the API tour).

A family subclasses Domain and implements four hooks:
    build(rng, difficulty) -> dict        fields of the Task (messages, tools, answer, tests, ...)
    oracle(task)                          generator: yields assistant messages, receives the tool observations
    score(task, trajectory, pool) -> Reward
    tool_impls(task, pool) -> dict        name -> callable(**arguments) -> str (only for tool-using domains)
The public methods (generate, solve, verify, make_env, process_rewards) add the guarantees:
determinism, argument type checking, turn limits, and "verify never raises".
"""
from __future__ import annotations

import copy
import dataclasses
import hashlib
import json
import random
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from domains import schema

MAX_MESSAGE_CHARS = 50_000  # any assistant message longer than this is rejected unread (enormous-output hack)
MAX_OBS_CHARS = 4_000       # tool observations are cut here so a trajectory fits a small context
TOOL_RETRIES = 2            # extra attempts of a tool call that failed for infrastructure reasons
TOOL_BACKOFF_S = 0.5        # first retry waits this long, then doubles


@dataclass
class Task:
    """One problem instance. `messages`, `tools`, `max_turns` are the prompt; the rest is hidden from the policy."""
    domain: str
    family: str
    seed: int
    difficulty: int
    messages: list[dict]
    tools: list[dict] = field(default_factory=list)
    max_turns: int = 1
    answer: Any = None          # hidden: expected final answer (or data the verifier needs)
    tests: Any = None           # hidden: unit tests / test script
    constraints: Any = None     # hidden: constraints on the end state (scene graph, files)
    files: dict = field(default_factory=dict)  # hidden: environment state (sandbox set-up files, virtual FS)
    meta: dict = field(default_factory=dict)   # hidden: anything else the oracle/verifier needs

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, d: dict) -> "Task":
        names = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - names
        if unknown:
            raise ValueError(f"Task.from_dict: unknown keys {sorted(unknown)}; expected a subset of {sorted(names)}")
        return cls(**copy.deepcopy(d))

    def to_json(self) -> str:
        """Canonical bytes: the same (domain, seed, difficulty) always gives the same string."""
        return json.dumps(self.to_dict(), sort_keys=True)

    def prompt(self) -> dict:
        """What the policy may see: messages, tools, max_turns (no hidden fields)."""
        return {"messages": copy.deepcopy(self.messages), "tools": copy.deepcopy(self.tools), "max_turns": self.max_turns}


@dataclass
class Reward:
    """Outcome of verify(). infra_error set => the score says nothing about the policy (skip it in RL, count it in eval)."""
    score: float
    passed: bool
    details: dict = field(default_factory=dict)
    infra_error: str | None = None

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    @classmethod
    def fail(cls, reason: str, **details) -> "Reward":
        return cls(0.0, False, {"reason": reason, **details})

    @classmethod
    def infra(cls, error: str, **details) -> "Reward":
        return cls(0.0, False, details, infra_error=error)


class ToolError(Exception):
    """Raised by a tool implementation; the env turns it into an 'error: ...' observation."""


class ToolInfraError(ToolError):
    """The tool could not run (sandbox failure), through no fault of the call: retried, then an infra error."""


def infra_mark(trajectory: Any) -> str | None:
    """The infra error a rollout loop wrote into a tool message (tool failed after its retries, rollout cut at
    its wall budget), else None. Only environments write tool messages, so the policy cannot forge one."""
    for m in trajectory if isinstance(trajectory, list) else []:
        if isinstance(m, dict) and m.get("role") == "tool" and m.get("infra_error"):
            return str(m["infra_error"])
    return None


def rng_for(domain: str, seed: int, difficulty: int) -> random.Random:
    """A private RNG per (domain, seed, difficulty): independent of call order and of Python's hash seed."""
    h = hashlib.sha256(f"{domain}|{seed}|{difficulty}".encode()).digest()
    return random.Random(int.from_bytes(h[:8], "big"))


def tool(name: str, description: str, params: dict[str, dict], required: list[str] | None = None) -> dict:
    """A tool schema: {"name", "description", "parameters": JSON schema of an object with no extra keys}."""
    return {"name": name, "description": description,
            "parameters": {"type": "object", "properties": params,
                           "required": list(params) if required is None else required,
                           "additionalProperties": False}}


class ToolEnv:
    """Multi-turn environment: step(tool_call) -> observation string; never raises on bad calls.

    Errors the policy caused (unknown tool, bad arguments, a refused call: ToolError) are observations and never
    retried. A tool that could not run (ToolInfraError, or any other exception of the implementation) is retried
    `retries` times with exponential backoff; if it still fails, `infra_error` is set: the rollout says nothing
    about the policy and its reward must be an infra error (domains.rollout_batch marks the trajectory)."""

    def __init__(self, task: Task, impls: dict[str, Callable[..., str]], close: Callable[[], None] | None = None,
                 retries: int = TOOL_RETRIES, backoff_s: float = TOOL_BACKOFF_S):
        self.task = task
        self.schemas = {t["name"]: t for t in task.tools}
        self.impls = impls
        self._close = close
        self.retries, self.backoff_s = retries, backoff_s
        self.retried = 0  # retry attempts over the env's life
        self.infra_error: str | None = None  # set when a call failed for infrastructure reasons after all retries
        self.log: list[dict] = []  # {"call", "ok", "error_kind", "observation", "retries"} per step

    def check_call(self, call: Any) -> str | None:
        """None if the call is well-formed for this task's tools, else an error string."""
        if not isinstance(call, dict) or not isinstance(call.get("name"), str):
            return "error: a tool call must be an object with a string 'name' and an object 'arguments'"
        name, args = call["name"], call.get("arguments", {})
        if name not in self.schemas or name not in self.impls:
            return f"error: unknown tool {name!r}; available tools: {', '.join(sorted(self.schemas)) or 'none'}"
        if not isinstance(args, dict):
            return f"error: arguments of {name!r} must be an object, got {schema.type_name(args)}"
        problems = schema.validate(args, self.schemas[name]["parameters"])
        if problems:
            return f"error: invalid arguments for {name!r}: {problems[0]}"
        return None

    def step(self, call: dict) -> str:
        err = self.check_call(call)
        kind = None if err is None else "schema"  # schema: unknown tool / wrong argument types
        tries = 0
        obs = err or ""
        while err is None:
            try:
                obs = str(self.impls[call["name"]](**call.get("arguments", {})))
                break
            except ToolInfraError as e:
                why = str(e)
            except ToolError as e:
                obs, err, kind = f"error: {e}", str(e), "tool"  # tool: a valid call the tool refused
                break
            except Exception as e:  # noqa: BLE001 - a crashing tool is the environment's fault, not the call's
                why = f"tool {call['name']!r} crashed: {type(e).__name__}: {e}"
            if tries >= self.retries:
                obs, err, kind = f"error: {why}", why, "infra"
                self.infra_error = f"{why} (after {tries + 1} attempts)"
                break
            time.sleep(self.backoff_s * 2 ** tries)
            tries += 1
            self.retried += 1
        if len(obs) > MAX_OBS_CHARS:
            obs = obs[:MAX_OBS_CHARS] + f"\n[... {len(obs) - MAX_OBS_CHARS} more characters cut]"
        self.log.append({"call": call, "ok": err is None, "error_kind": kind, "observation": obs, "retries": tries})
        return obs

    def schema_errors(self) -> list[dict]:
        return [e for e in self.log if e["error_kind"] == "schema"]

    def close(self) -> None:
        if self._close is not None:
            self._close()
            self._close = None

    def __enter__(self) -> "ToolEnv":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def check_trajectory(task: Task, trajectory: Any) -> str | None:
    """Structural checks shared by every verifier; a string says why the trajectory fails (not an infra error)."""
    if not isinstance(trajectory, list) or not trajectory:
        return "empty trajectory: expected a list of messages ending with the final assistant answer"
    for i, m in enumerate(trajectory):
        if not isinstance(m, dict) or m.get("role") not in ("assistant", "tool"):
            return f"message {i} is not an assistant/tool message"
        if not isinstance(m.get("content", ""), (str, type(None))):
            return f"message {i} content is not a string"
        if len(m.get("content") or "") > MAX_MESSAGE_CHARS:
            return f"message {i} is longer than {MAX_MESSAGE_CHARS} characters"
        calls = m.get("tool_calls")
        if calls is not None:
            if m["role"] != "assistant" or not isinstance(calls, list):
                return f"message {i} has malformed tool_calls"
            if len(json.dumps(calls, default=str)) > MAX_MESSAGE_CHARS:
                return f"message {i} tool calls are longer than {MAX_MESSAGE_CHARS} characters"
    last = trajectory[-1]
    if last["role"] != "assistant" or last.get("tool_calls"):
        return "the trajectory must end with an assistant message without tool calls (the final answer)"
    n_assistant = sum(m["role"] == "assistant" for m in trajectory)
    if n_assistant > task.max_turns:
        return f"{n_assistant} assistant turns exceed max_turns={task.max_turns}"
    if task.tools == [] and len(trajectory) != 1:
        return "single-turn task: the trajectory must be exactly one assistant message"
    return None


def final_text(trajectory: list[dict]) -> str:
    return trajectory[-1].get("content") or ""


def tool_calls(trajectory: list[dict]) -> Iterator[tuple[int, dict]]:
    """(assistant step index, call) for every call in the trajectory, in order."""
    step = 0
    for m in trajectory:
        if m.get("role") == "assistant":
            for c in m.get("tool_calls") or []:
                yield step, c
            step += 1


class Domain:
    """A family x variant: generate / solve / verify / make_env / process_rewards. Subclasses set the class attributes."""
    name: str = ""
    family: str = ""
    difficulties: tuple[int, ...] = (0, 1, 2, 3)
    needs_sandbox: bool = False
    multi_step: bool = False
    description: str = ""
    split: str | None = None      # "train" | "heldout"; set by the registry (a plug-in may preset it)
    verify_timeout_s: float = 30.0

    # ---- hooks for families -------------------------------------------------------------
    def build(self, rng: random.Random, difficulty: int) -> dict:
        raise NotImplementedError

    def oracle(self, task: Task) -> Iterator[dict]:
        raise NotImplementedError

    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        raise NotImplementedError

    def tool_impls(self, task: Task, pool: Any) -> tuple[dict[str, Callable[..., str]], Callable[[], None] | None]:
        return {}, None

    # ---- public API ----------------------------------------------------------------------
    def info(self) -> dict:
        return {"name": self.name, "family": self.family, "difficulties": list(self.difficulties),
                "split": self.split, "needs_sandbox": self.needs_sandbox, "multi_step": self.multi_step,
                "description": self.description}

    def generate(self, seed: int, difficulty: int) -> Task:
        if difficulty not in self.difficulties:
            raise ValueError(f"{self.name}: difficulty {difficulty} not in {list(self.difficulties)}")
        if not isinstance(seed, int) or isinstance(seed, bool) or seed < 0:
            raise ValueError(f"{self.name}: seed must be a non-negative int, got {seed!r}")
        fields = self.build(rng_for(self.name, seed, difficulty), difficulty)
        task = Task(domain=self.name, family=self.family, seed=seed, difficulty=difficulty, **fields)
        return Task.from_dict(json.loads(task.to_json()))  # normalise (tuples -> lists) so round trips are exact

    def make_env(self, task: Task, pool: Any = None) -> ToolEnv:
        if self.needs_sandbox and pool is None:
            raise ValueError(f"{self.name} runs code: pass pool=sandbox.Pool(...) (or a client with run/map/session)")
        impls, close = self.tool_impls(task, pool)
        return ToolEnv(task, impls, close)

    def solve(self, task: Task, pool: Any = None) -> list[dict]:
        """The oracle demonstration: assistant messages (with tool calls) and the real tool observations."""
        traj: list[dict] = []
        gen = self.oracle(task)
        msg = next(gen)
        env = self.make_env(task, pool) if task.tools else None
        try:
            while True:
                traj.append(msg)
                if not msg.get("tool_calls"):
                    return traj
                obs = [env.step(c) for c in msg["tool_calls"]]
                traj += [{"role": "tool", "name": c["name"], "content": o} for c, o in zip(msg["tool_calls"], obs)]
                msg = gen.send(obs)
        finally:
            gen.close()
            if env is not None:
                env.close()

    def verify(self, task: Task, trajectory: list[dict], pool: Any = None, timeout_s: float | None = None) -> Reward:
        """Never raises: bad trajectories fail; an exception or timeout inside the verifier, or a rollout the loop
        marked (tool failed after retries, cut at its wall budget: infra_mark), is an infra_error."""
        try:
            mark = infra_mark(trajectory)
            if mark:
                return Reward.infra(f"rollout: {mark}")
            why = check_trajectory(task, trajectory)
        except Exception as e:  # noqa: BLE001 - the contract is "never raises"
            return Reward.infra(f"verifier crashed: {type(e).__name__}: {e}")
        if why:
            return Reward.fail(why)
        if self.needs_sandbox and pool is None:
            return Reward.infra(f"{self.name} needs a sandbox pool to verify; pass pool=")
        box: dict = {}

        def target():
            try:
                box["r"] = self.score(task, trajectory, pool)
            except Exception as e:  # noqa: BLE001
                box["e"] = f"{type(e).__name__}: {e}"

        t = threading.Thread(target=target, daemon=True)  # daemon: a hung verifier cannot block exit
        t.start()
        t.join(self.verify_timeout_s if timeout_s is None else timeout_s)
        if t.is_alive():
            return Reward.infra(f"verifier timed out after {self.verify_timeout_s if timeout_s is None else timeout_s}s")
        if "e" in box:
            return Reward.infra(f"verifier crashed: {box['e']}")
        r = box.get("r")
        if not isinstance(r, Reward) or not (0.0 <= r.score <= 1.0):
            return Reward.infra(f"verifier returned {r!r}, not a Reward with score in [0, 1]")
        return r

    def process_rewards(self, task: Task, trajectory: list[dict]) -> list[float]:
        """One number in [0, 1] per assistant message. Default: 1 for a step whose tool calls all succeeded
        (observation not starting with 'error'), 1 for a final message that parses in the required format."""
        out, i = [], 0
        while i < len(trajectory):
            m = trajectory[i]
            i += 1
            if m.get("role") != "assistant":
                continue
            if m.get("tool_calls"):
                obs = []
                while i < len(trajectory) and trajectory[i].get("role") == "tool":
                    obs.append(trajectory[i].get("content") or "")
                    i += 1
                out.append(float(self.step_ok(task, m, obs)))
            else:
                out.append(float(self.format_ok(task, m.get("content") or "")))
        return out

    def step_ok(self, task: Task, msg: dict, observations: list[str]) -> bool:
        return len(observations) == len(msg["tool_calls"]) and not any(o.startswith("error") for o in observations)

    def format_ok(self, task: Task, text: str) -> bool:
        """Is the final message in the required format (not necessarily right)? Families override."""
        return bool(text.strip())
