"""domains: every SFT, RL and eval task of the project comes from here.

A *family* (math, structured, retrieval, docs, scene, agent, code, terminal) times a parameterised *variant* is
a *domain* (e.g. "math.gcd", "scene.snowman", "terminal.sort_numbers"); each has difficulty levels (0 = short
prompt, short formulaic answer, for tiny models; 3 = long / multi-step / real code) and a split ("train" or
"heldout": whole domains held out, every family has some; see splits.py).

    import domains
    d = domains.get("agent.kv_sum")                  # or domains.registry() -> {name: Domain}
    task = d.generate(seed=0, difficulty=1)          # Task; same (domain, seed, difficulty) -> same bytes
    task.messages, task.tools, task.max_turns        # the prompt (system + user, chat.py format) and tool schemas
    traj = d.solve(task, pool=None)                  # oracle demonstration: messages after the prompt
    r = d.verify(task, traj, pool=None)              # Reward(score in [0,1], passed, details, infra_error)
    d.process_rewards(task, traj)                    # one value in [0,1] per assistant message
    env = d.make_env(task, pool)                     # multi-turn: env.step({"name", "arguments"}) -> str; env.close()
    domains.rollout(d, task, generate=fn, pool=pool) # the RL/eval loop around any text generator
    from domains import evaluate                     # the one evaluation protocol every stage calls:
    evaluate.summarize(evaluate.run(target, evaluate.eval_items(datasets_dir, 2), pool))  # pass rates, ci95, pass@k

Contracts
- Task (core.py): domain, family, seed, difficulty, messages, tools, max_turns + hidden answer, tests,
  constraints, files, meta. to_dict()/from_dict(); to_json() is canonical (sort_keys). task.prompt() is what
  the policy may see. Hidden fields are never rendered into messages.
- Trajectory: the messages after the prompt: assistant messages (optionally with tool_calls), one tool message
  per call ({"role": "tool", "name", "content"}), ending with a final assistant message without tool calls.
  Final formats are strict: 'Answer: <value>' as the last line (math, retrieval, agent), 'Answer:' + 'Source:'
  lines (docs), a bare JSON object (structured), exactly one ```python block (code), exactly "Done." (scene,
  terminal). Loose variants ("answer: 5", "5.0", code fences around JSON) fail.
- verify never raises: malformed input fails with a reason in details; an exception or a timeout inside a
  verifier, or a sandbox failure, returns infra_error (never a pass) - skip those in RL, count them in eval.
  Tool-using verifiers replay the assistant's tool calls in a fresh environment and ignore the tool messages.
  A call with wrong argument types (schema.py, strict: "2" is not a number) never passes.
- env.step returns "error: ..." strings for unknown tools, wrong argument types and refused calls (never raises).
  A tool that cannot run (ToolInfraError: sandbox failure; or a crash) is retried with backoff; if it still fails,
  rollout_batch marks the trajectory and verify returns infra_error (the policy is not blamed). rollout_batch's
  max_active/budget_s give long-running tasks a queue and a per-rollout wall budget (rollout.py).
- Sandbox families (code, terminal; Domain.needs_sandbox) take pool=sandbox.Pool(...) or any object with
  run/map/submit/session; domains never creates global sandbox state. See sandboxing.py.
- Plug-ins: domains.load_plugin("pkg.mod:register") or DOMAINS_PLUGINS=pkg.mod,pkg2.mod; register() returns
  Domain objects (subclass core.Domain, or base.AnswerDomain for 'Answer:' questions). See registry.py.

CLI (see cli.py):  .venv/bin/python -m domains list --json | sample DOMAIN --seed S | check | datasets --out DIR
Tests:             .venv/bin/python -m pytest domains -q
"""
from domains.core import Domain, Reward, Task, ToolEnv, ToolError, ToolInfraError
from domains.registry import get, load_plugin, registry
from domains.rollout import rollout, rollout_batch

__all__ = ["Domain", "Reward", "Task", "ToolEnv", "ToolError", "ToolInfraError", "get", "load_plugin", "registry", "rollout", "rollout_batch"]
