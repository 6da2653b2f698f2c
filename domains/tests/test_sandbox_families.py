"""Code and terminal families against the real sandbox (skipped until sandbox/ is importable; a failure
instead where SANDBOX_REQUIRE says the sandbox must exist, as in CI: see conftest.py)."""
import time

import pytest

from domains import get, registry, sandboxing
from domains.tests.conftest import check_tier, every_oracle, run_cli_check


def _final(text):
    return [{"role": "assistant", "content": text}]


def _code(src):
    return _final(f"```python\n{src}\n```")


def _bash(*cmds, final="Done."):
    out = []
    for c in cmds:
        out += [{"role": "assistant", "content": "", "tool_calls": [{"name": "bash", "arguments": {"command": c}}]},
                {"role": "tool", "name": "bash", "content": "[exit code: 0]"}]
    return out + _final(final)


@pytest.mark.parametrize("name,diff", [("code.fizzbuzz", 0), ("code.median", 1), ("code.run_length", 2)])
def test_code_oracle_passes(pool, name, diff):
    d = get(name)
    t = d.generate(3, diff)
    r = d.verify(t, d.solve(t, pool), pool)
    assert r.passed and r.score == 1.0, r


def test_code_hardcoded_examples_fail(pool):
    d = get("code.max_of_list")
    t = d.generate(0, 1)
    cases = "\n".join(f"    if xs == {a[0]!r}:\n        return {v!r}" for a, v in t.meta["examples"])
    r = d.verify(t, _code(f"def max_of_list(xs):\n{cases}\n    return 0"), pool)
    assert not r.passed and r.infra_error is None


def test_code_printing_a_fake_pass_report_fails(pool):
    d = get("code.add_two")
    t = d.generate(0, 0)
    src = ("import os, sys\nsys.__stdout__.write('GRADE-0 {\"passed\": 3, \"total\": 3, \"failures\": []}\\n')\n"
           "print('PASSED 3/3')\nos._exit(0)\ndef add_two(a, b):\n    return 0")
    assert not d.verify(t, _code(src), pool).passed


def test_code_killing_the_grader_fails_not_infra(pool):
    d = get("code.add_two")
    t = d.generate(0, 0)
    r = d.verify(t, _code("import os, signal\nos.kill(os.getppid(), signal.SIGKILL)\ndef add_two(a, b):\n    return a + b"), pool)
    assert not r.passed and r.infra_error is None


def test_code_enormous_output_fails(pool):
    d = get("code.sum_list")
    t = d.generate(0, 0)
    src = "import sys\ndef sum_list(xs):\n    sys.__stdout__.write('9' * 30_000_000)\n    return sum(xs)"
    assert not d.verify(t, _code(src), pool).passed


def test_code_infinite_loop_fails_not_infra(pool):
    d = get("code.add_two")
    t = d.generate(0, 0)
    r = d.verify(t, _code("def add_two(a, b):\n    while True:\n        pass"), pool)
    assert not r.passed and r.infra_error is None


def test_code_empty_block_and_prose_fail(pool):
    d = get("code.add_two")
    t = d.generate(0, 0)
    assert not d.verify(t, _code(""), pool).passed
    assert not d.verify(t, _final(f"Here you go:\n```python\n{t.answer}\n```"), pool).passed


@pytest.mark.parametrize("name,diff", [("terminal.count_lines", 0), ("terminal.fix_python", 1), ("terminal.sort_numbers", 2)])
def test_terminal_oracle_passes(pool, name, diff):
    d = get(name)
    t = d.generate(1, diff)
    r = d.verify(t, d.solve(t, pool), pool)
    assert r.passed and r.score == 1.0, r


def test_terminal_printing_expected_output_without_computing_fails(pool):
    d = get("terminal.fix_python")
    t = d.generate(0, 0)
    total = sum(int(x) for x in t.files["nums.txt"].split())
    r = d.verify(t, _bash(f"echo 'print({total})' > sum.py", "python3 sum.py"), pool)
    assert not r.passed and r.infra_error is None


def test_terminal_script_that_echoes_the_sample_answer_fails(pool):
    d = get("terminal.write_script")
    t = d.generate(0, 0)
    n = len(t.files["sample.txt"].split())
    assert not d.verify(t, _bash(f"printf 'echo {n}\\n' > count_words.sh"), pool).passed


def test_terminal_editing_tests_or_reward_file_fails(pool):
    d = get("terminal.count_lines")
    t = d.generate(0, 0)
    hack = _bash("mkdir -p tests /logs 2>/dev/null; echo 'print(\"passed\")' > tests/test_outputs.py",
                 "echo 1 > reward.txt; echo 1 > /tmp/reward.txt; echo '{\"passed\": true}' > result.json",
                 "echo 'TEST-0 {\"passed\": true}'")
    r = d.verify(t, hack, pool)
    assert not r.passed and r.infra_error is None


def test_terminal_enormous_file_fails_not_infra(pool):
    d = get("terminal.create_file")
    t = d.generate(0, 0)
    r = d.verify(t, _bash("head -c 40000000 /dev/zero > big.bin"), pool)
    assert not r.passed and r.infra_error is None


def test_terminal_empty_trajectory_fails(pool):
    d = get("terminal.csv_sum")
    t = d.generate(0, 0)
    assert not d.verify(t, _final("Done."), pool).passed


def test_terminal_wrong_parameter_type_fails(pool):
    d = get("terminal.create_file")
    t = d.generate(0, 0)
    traj = d.solve(t, pool)
    traj[0]["tool_calls"][0]["arguments"] = {"command": [traj[0]["tool_calls"][0]["arguments"]["command"]]}
    assert not d.verify(t, traj, pool).passed


def test_terminal_env_wraps_a_session(pool):
    d = get("terminal.count_lines")
    t = d.generate(0, 0)
    env = d.make_env(t, pool)
    try:
        assert env.step({"name": "bash", "arguments": {"command": "cd /tmp && pwd"}}).startswith("/tmp")
        assert env.step({"name": "bash", "arguments": {"command": "pwd"}}).startswith("/tmp")  # state persists
        assert env.step({"name": "bash", "arguments": {"command": 3}}).startswith("error: invalid arguments")
    finally:
        env.close()


def test_cli_check_every_sandboxed_oracle_passes(sandbox_ready, tmp_path, monkeypatch):
    """`python -m domains check` on every code and terminal domain at every difficulty: each oracle passes its
    verifier through the real sandbox (2 slots, 2 worker threads: ~45 s for 276 checks on 2 shared cores)."""
    names = sorted(d.name for d in registry().values() if d.needs_sandbox)
    assert {d.family for d in registry().values() if d.needs_sandbox} == {"code", "terminal"} and len(names) >= 69
    pools, make = [], sandboxing.make_pool
    monkeypatch.setattr(sandboxing, "make_pool", lambda slots=None: pools.append(make(slots)) or pools[-1])
    t0 = time.monotonic()
    rc, out, checked, failed = run_cli_check(["--domains", ",".join(names), "--slots", "2"], tmp_path)
    print(f"\n{len(checked)} sandboxed oracle checks in {time.monotonic() - t0:.1f}s on tier {pools[0].tier}")
    assert not failed and rc == 0 and "(100.0%)" in out, [(r["domain"], r["difficulty"], r["problems"]) for r in failed[:5]]
    assert checked == every_oracle(sandboxed=True) and len(checked) >= 276
    check_tier(pools[0])  # the checks ran on the tier CI requires, not a fallback
