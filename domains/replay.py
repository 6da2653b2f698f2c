"""ReplayDomain: base for tool-using families whose tools are pure Python state (scene, agent).

The verifier never trusts the tool messages in a trajectory: it replays the assistant's tool calls through a
fresh environment and judges the resulting state, so forged observations change nothing.
A subclass implements new_state(task) -> object with .impls() -> {tool name: callable}, plus build/oracle and
judge(task, env, state, final_text) -> Reward and progress(task, state) -> float in [0, 1].
"""
from __future__ import annotations

from typing import Any, Callable

from domains.core import Domain, Reward, Task, ToolEnv


class ReplayDomain(Domain):
    multi_step = True

    def new_state(self, task: Task) -> Any:
        raise NotImplementedError

    def judge(self, task: Task, env: ToolEnv, state: Any, final: str) -> Reward:
        raise NotImplementedError

    def progress(self, task: Task, state: Any) -> float:
        return 0.0

    def tool_impls(self, task: Task, pool: Any) -> tuple[dict[str, Callable[..., str]], None]:
        return self.new_state(task).impls(), None

    def replay(self, task: Task, trajectory: list[dict], after_step: Callable[[ToolEnv, Any, dict], None] | None = None
               ) -> tuple[ToolEnv, Any]:
        state = self.new_state(task)
        env = ToolEnv(task, state.impls())
        for m in trajectory:
            if m.get("role") != "assistant":
                continue
            for c in m.get("tool_calls") or []:
                env.step(c)
            if after_step:
                after_step(env, state, m)
        return env, state

    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        env, state = self.replay(task, trajectory)
        r = self.judge(task, env, state, trajectory[-1].get("content") or "")
        bad = env.schema_errors()
        if bad:  # wrong argument types / unknown tools never pass, whatever the end state
            r.details["schema_errors"] = [e["observation"] for e in bad[:5]]
            return Reward(r.score * 0.5, False, r.details)
        return r

    def process_rewards(self, task: Task, trajectory: list[dict]) -> list[float]:
        """Per assistant message: 0 if it made an invalid call, else task progress after it (final message too)."""
        out: list[float] = []

        def after(env: ToolEnv, state: Any, msg: dict) -> None:
            n = len(msg.get("tool_calls") or [])
            bad = n and not all(e["ok"] for e in env.log[-n:])
            out.append(0.0 if bad else round(self.progress(task, state), 4))

        try:
            self.replay(task, trajectory, after)
        except Exception:  # noqa: BLE001 - malformed trajectories get zeros, like verify's failures
            return [0.0] * sum(1 for m in trajectory if isinstance(m, dict) and m.get("role") == "assistant")
        return out
