"""Code: write a Python function; hidden unit tests run in the sandbox (stdlib-only python3, no pytest).

One domain per problem (code_problems.py). The final assistant message must be exactly one ```python block
defining the function. Difficulty: 0 = 3 hidden tests on simple inputs, 1 = 6 tests with edge cases,
2-3 = multi-turn with a run_python tool and 10-14 tests; the oracle's demonstrations at 2-3 sometimes write a
buggy version first, run the examples, read the error, diagnose it and fix it.

Grading (anti-hack): the hidden cases and expected values reach the grader only through stdin; the grader
runs the solution in a child process that sees the inputs but never the expected values, compares outputs
itself and prints a per-run random nonce with the result. Hard-coding the visible examples, printing the
expected output, killing the grader, enormous output or timeouts all fail; a sandbox failure is infra_error.

    .venv/bin/python -m domains sample code.fizzbuzz --seed 0 --difficulty 2
"""
from __future__ import annotations

import json
import random
import re
import secrets
from typing import Any, Iterator

from domains import sandboxing
from domains.chat import tools_prompt
from domains.core import Domain, Reward, Task, ToolInfraError, tool
from domains.families.code_problems import PROBLEMS, Problem

RUN_TOOL = tool("run_python", "Run a Python 3 script in a sandbox; returns its output and exit code.",
                {"code": {"type": "string", "maxLength": 20000}})
N_TESTS = (3, 6, 10, 14)
BLOCK_RE = re.compile(r"```python\n(.*?)\n?```", re.S)

CHILD = r'''
import importlib.util, json, os, sys
spec = json.load(open("_cases.json"))
real = sys.stdout
sys.stdout = open(os.devnull, "w")  # the solution's prints go nowhere
try:
    s = importlib.util.spec_from_file_location("solution", "solution.py")
    m = importlib.util.module_from_spec(s)
    s.loader.exec_module(m)
    fn = getattr(m, spec["fn"])
except BaseException as e:
    real.write("\n" + json.dumps({"load_error": (type(e).__name__ + ": " + str(e))[:300]}) + "\n")
    real.flush()
    os._exit(0)
res = []
for args in spec["cases"]:
    try:
        res.append({"ok": True, "v": json.loads(json.dumps(fn(*args)))})
    except BaseException as e:
        res.append({"ok": False, "e": (type(e).__name__ + ": " + str(e))[:200]})
real.write("\n" + json.dumps(res) + "\n")
real.flush()
os._exit(0)
'''

GRADER = r'''
import json, os, subprocess, sys
spec = json.loads(sys.stdin.read())
nonce = spec.pop("nonce")
expected = spec.pop("expected")
timeout = spec.pop("timeout")
with open("_cases.json", "w") as f:
    json.dump(spec, f)

def same(a, b):
    if isinstance(a, bool) or isinstance(b, bool):
        return a is b
    if isinstance(a, (int, float)) and isinstance(b, (int, float)):
        return abs(a - b) <= 1e-6 * max(1.0, abs(b))
    if isinstance(a, list) and isinstance(b, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    return type(a) is type(b) and a == b

report = {"passed": 0, "total": len(expected), "failures": []}
with open("_out.txt", "wb") as out, open("_err.txt", "wb") as err:
    try:
        subprocess.run([sys.executable, "-I", "_child.py"], stdout=out, stderr=err, stdin=subprocess.DEVNULL, timeout=timeout)
    except subprocess.TimeoutExpired:
        report["error"] = "timed out after %ss" % timeout
with open("_out.txt", "rb") as f:
    data = f.read(2000000).decode("utf-8", "replace").strip().split("\n")[-1]
try:
    res = json.loads(data)
except Exception:
    res = None
    report.setdefault("error", "the solution produced no result (crashed, exited or wrote too much)")
if isinstance(res, dict):
    report["error"] = res.get("load_error", "bad result")
elif isinstance(res, list) and len(res) == len(expected):
    for i, (r, want) in enumerate(zip(res, expected)):
        if isinstance(r, dict) and r.get("ok") and same(r.get("v"), want):
            report["passed"] += 1
        elif len(report["failures"]) < 3:
            report["failures"].append({"case": i, "got": r.get("v") if isinstance(r, dict) and r.get("ok") else None,
                                       "error": r.get("e") if isinstance(r, dict) else "bad result"})
elif res is not None:
    report.setdefault("error", "result count mismatch")
print(nonce + " " + json.dumps(report, default=str))
'''


def _ref_call(p: Problem, args: list) -> Any:
    ns: dict = {}
    exec(p.ref, ns)  # noqa: S102 - our own reference solutions, never model output
    return json.loads(json.dumps(ns[p.name](*json.loads(json.dumps(args)))))


def _with_bug(p: Problem, ref: str, bug: str) -> str:
    """The oracle's deliberate first-attempt mistakes (error demonstrations)."""
    if bug == "name_typo":
        return ref.replace(f"def {p.name}(", f"def {p.name}_fn(", 1)
    lines = ref.rstrip().split("\n")
    lines[-1] = lines[-1].replace("    return ", "    result = ", 1)
    return "\n".join(lines)


def _passes(code: str, fn: str, examples: list) -> bool:
    ns: dict = {}
    exec(code, ns)  # noqa: S102 - a mutation of our own reference
    return all(json.loads(json.dumps(ns[fn](*json.loads(json.dumps(a))))) == v for a, v in examples)


def _call_text(p: Problem, args: list) -> str:
    return f"{p.name}({', '.join(repr(a) for a in args)})"


def extract_code(text: str) -> tuple[str | None, str | None]:
    """(code, error): the message must be exactly one ```python block (whitespace around it allowed)."""
    blocks = BLOCK_RE.findall(text)
    if len(blocks) != 1:
        return None, f"expected exactly one ```python code block, found {len(blocks)}"
    if BLOCK_RE.sub("", text).strip():
        return None, "the final message must contain only the code block"
    if not blocks[0].strip():
        return None, "the code block is empty"
    return blocks[0], None


class CodeDomain(Domain):
    family = "code"
    needs_sandbox = True
    verify_timeout_s = 120.0

    def __init__(self, problem: Problem):
        self.p = problem
        self.name, self.description = f"code.{problem.name}", problem.doc
        self.multi_step = True  # at difficulty >= 2

    def build(self, rng: random.Random, difficulty: int) -> dict:
        p = self.p
        examples, hidden, seen = [], [], set()
        while len(examples) < 2:
            a = p.gen(rng, 0)
            if json.dumps(a) not in seen:
                seen.add(json.dumps(a))
                examples.append([a, _ref_call(p, a)])
        tries = 0
        while len(hidden) < N_TESTS[difficulty] and tries < 500:  # hidden inputs differ from the examples
            tries += 1
            a = p.gen(rng, rng.randint(0, difficulty))
            if json.dumps(a) not in seen:
                seen.add(json.dumps(a))
                hidden.append([a, _ref_call(p, a)])
        multi = difficulty >= 2
        ex_text = "\n".join(f"{_call_text(p, a)} == {v!r}" for a, v in examples)
        user = f"Write this Python function:\n\n{p.signature}\n    \"\"\"{p.doc}\"\"\"\n\nExamples:\n{ex_text}"
        system = "Reply with only the complete function in one ```python code block."
        if multi:
            system = ("You may test code with the tool below before answering. " + system + "\nTools:\n"
                      + tools_prompt([RUN_TOOL]))
        bug = None
        if multi:  # which demonstration shows an error -> diagnosis -> fix
            bug = ["missing_return", "name_typo", None][rng.randrange(3)] if difficulty == 2 else \
                ["missing_return", "name_typo"][rng.randrange(2)]
        if bug == "missing_return" and _passes(_with_bug(p, p.ref, bug), p.name, examples):
            bug = "name_typo"  # the examples would not expose this bug: show one they do expose
        return {"messages": [{"role": "system", "content": system}, {"role": "user", "content": user}],
                "tools": [RUN_TOOL] if multi else [], "max_turns": 6 if multi else 1,
                "tests": {"fn": p.name, "cases": [a for a, _ in hidden], "expected": [v for _, v in hidden]},
                "answer": p.ref, "meta": {"examples": examples, "bug": bug}}

    # ---- oracle --------------------------------------------------------------------------------
    def _check_script(self, task: Task, code: str) -> str:
        asserts = "\n".join(f"assert {_call_text(self.p, a)} == {v!r}, {_call_text(self.p, a)}"
                            for a, v in task.meta["examples"])
        return f"{code}\n\n{asserts}\nprint('examples pass')\n"

    def oracle(self, task: Task) -> Iterator[dict]:
        ref, bug = task.answer, task.meta.get("bug")
        if task.tools:
            if bug == "missing_return":
                obs = yield {"role": "assistant", "content": "Let me test a first version.",
                             "tool_calls": [{"name": "run_python", "arguments": {"code": self._check_script(task, _with_bug(self.p, ref, bug))}}]}
                note = ("The assertion failed and the call gave None: the last line assigns the result instead of "
                        "returning it. Fixing it to return the value." if "AssertionError" in obs[0] else
                        "That did not work as expected; returning the value explicitly.")
            elif bug == "name_typo":
                obs = yield {"role": "assistant", "content": "Let me test a first version.",
                             "tool_calls": [{"name": "run_python", "arguments": {"code": self._check_script(task, _with_bug(self.p, ref, bug))}}]}
                note = (f"NameError: I defined the function under the wrong name. Renaming it to {self.p.name}."
                        if "NameError" in obs[0] else f"Renaming the function to {self.p.name}.")
            else:
                note = "Let me check the examples."
            yield {"role": "assistant", "content": note,
                   "tool_calls": [{"name": "run_python", "arguments": {"code": self._check_script(task, ref)}}]}
        yield {"role": "assistant", "content": f"```python\n{ref}\n```"}

    def tool_impls(self, task: Task, pool: Any):
        def run_python(code: str) -> str:
            r = pool.run(sandboxing.task(cmd=["python3", "main.py"], files={"main.py": code},
                                         limits=sandboxing.limits(wall_s=10.0)))
            if r.infra_error:
                raise ToolInfraError(f"sandbox failure: {r.infra_error}")
            return sandboxing.observation(r)
        return {"run_python": run_python}, None

    # ---- verifier ------------------------------------------------------------------------------
    def score(self, task: Task, trajectory: list[dict], pool: Any) -> Reward:
        code, err = extract_code(trajectory[-1].get("content") or "")
        if err:
            return Reward.fail(err)
        return grade(pool, code, task.tests)

    def format_ok(self, task: Task, text: str) -> bool:
        return extract_code(text)[1] is None


def grade(pool: Any, code: str, tests: dict, timeout_s: float = 10.0) -> Reward:
    """Run the hidden tests on `code` in one sandbox; score = fraction of cases passed, pass = all."""
    nonce = "GRADE-" + secrets.token_hex(12)
    stdin = json.dumps({"nonce": nonce, "fn": tests["fn"], "cases": tests["cases"], "expected": tests["expected"],
                        "timeout": timeout_s})
    r = pool.run(sandboxing.task(cmd=["python3", "-I", "_grader.py"], stdin=stdin,
                                 files={"_grader.py": GRADER, "_child.py": CHILD, "solution.py": code},
                                 limits=sandboxing.limits(wall_s=timeout_s + 10, memory_mb=512)))
    if r.infra_error:
        return Reward.infra(f"sandbox: {r.infra_error}")
    lines = [ln for ln in (r.stdout or "").split("\n") if ln.startswith(nonce + " ")]
    if not lines:
        return Reward.fail("the grader did not report (killed by the solution, or out of time/memory)",
                           exit_code=r.exit_code, timed_out=r.timed_out, stderr=sandboxing.clip(r.stderr, 300))
    rep = json.loads(lines[-1][len(nonce) + 1:])
    total = max(1, rep["total"])
    ok = rep["passed"] == rep["total"] and "error" not in rep
    return Reward(1.0 if ok else rep["passed"] / total, ok, rep)


def domains() -> list[CodeDomain]:
    return [CodeDomain(p) for p in PROBLEMS]
