"""Pool behaviour on the strongest tier: results, files, limits flags, batch/async faces, audit log."""
from __future__ import annotations

import json
import logging
import subprocess

import pytest

from sandbox import Limits, Result, Task


def test_exit_code_stdout_stderr(best_pool):
    r = best_pool.run(Task(script="echo out; echo err >&2; exit 3"))
    assert (r.exit_code, r.signal, r.stdout, r.stderr) == (3, None, "out\n", "err\n")
    assert r.infra_error is None and not r.timed_out and r.tier == best_pool.tier


def test_signal_death_is_reported_as_signal(best_pool):
    r = best_pool.run(Task(script="kill -SEGV $$"))
    assert r.exit_code is None and r.signal == 11


def test_command_not_found_is_a_task_error_not_infra(best_pool):
    r = best_pool.run(Task(cmd=["no-such-command-xyz"]))
    assert r.exit_code == 127 and r.infra_error is None


def test_files_are_placed_and_diffed(best_pool):
    r = best_pool.run(Task(script="cat a/in.txt; echo new > c.txt; echo more >> b.txt; rm a/in.txt; touch same.txt",
                           files={"a/in.txt": "hello", "b.txt": "x", "same.txt": "s"}))
    assert r.stdout == "hello"
    assert r.files == {"created": ["c.txt"], "modified": ["b.txt"], "deleted": ["a/in.txt"]}


def test_collect_returns_capped_text(best_pool):
    r = best_pool.run(Task(script="echo result > out.txt; head -c 5000 /dev/zero | tr '\\0' a > big.txt",
                           collect=["out.txt", "big.txt", "missing.txt"], limits=Limits(collect_bytes=100)))
    assert r.read_files["out.txt"] == "result\n"
    assert r.read_files["big.txt"] == "a" * 100
    assert "missing.txt" not in r.read_files


def test_stdin_and_env_reach_the_task(best_pool):
    r = best_pool.run(Task(cmd=["python3", "-c", "import os,sys; print(sys.stdin.read().upper(), os.environ['MY_VAR'])"],
                           stdin="abc", env={"MY_VAR": "v1"}))
    assert r.stdout == "ABC v1\n"


def test_output_truncation_flags_each_stream(best_pool):
    r = best_pool.run(Task(script="head -c 3000 /dev/zero | tr '\\0' o; head -c 10 /dev/zero | tr '\\0' e >&2",
                           limits=Limits(output_bytes=1000)))
    assert r.stdout_truncated and len(r.stdout) == 1000
    assert not r.stderr_truncated and r.stderr == "e" * 10
    assert r.limit_hit == "output"


def test_python3_is_the_pinned_debian_interpreter(best_pool):
    r = best_pool.run(Task(cmd=["python3", "-c", "import sys; print(sys.executable, sys.version_info[:2])"]))
    want = subprocess.run(["/usr/bin/python3", "-c", "import sys; print(sys.version_info[:2])"],
                          capture_output=True, text=True).stdout.strip()
    assert r.stdout.split(" ", 1)[1].strip() == want
    assert r.stdout.startswith("/usr/bin/python3")


def test_env_hash_is_stable_and_recorded(best_pool):
    a = best_pool.run(Task(cmd=["true"]))
    b = best_pool.run(Task(cmd=["true"]))
    assert a.env_hash and a.env_hash == b.env_hash == best_pool.rt.env_hash


def test_cpu_and_memory_are_measured(best_pool):
    r = best_pool.run(Task(cmd=["python3", "-c", "x=bytearray(64<<20)\nfor i in range(3_000_000): pass"]))
    assert r.cpu_s > 0.05
    assert 60 < r.peak_memory_mb < 200


def test_map_preserves_order(best_pool):
    rs = best_pool.map([Task(cmd=["python3", "-c", f"print({i})"]) for i in range(12)])
    assert [r.stdout for r in rs] == [f"{i}\n" for i in range(12)]


def test_submit_returns_future(best_pool):
    fut = best_pool.submit(Task(script="echo fut"))
    assert fut.result(timeout=30).stdout == "fut\n"


def test_work_dir_is_wiped_between_tasks(best_pool):
    best_pool.map([Task(script="echo x > leftover.txt")] * 2)
    rs = best_pool.map([Task(script="ls -A")] * 2)
    assert [r.stdout for r in rs] == ["", ""]


def test_infra_error_is_not_a_task_failure(best_pool, monkeypatch):
    slot = best_pool.slots[0]

    def broken(*a, **k):
        raise subprocess.SubprocessError("simulated exec failure")
    for s in best_pool.slots:
        monkeypatch.setattr(s, "spawn", broken)
    r = best_pool.run(Task(cmd=["true"]))
    assert r.infra_error and "simulated" in r.infra_error
    assert r.exit_code is None and not r.ok
    monkeypatch.undo()
    assert best_pool.run(Task(cmd=["true"])).exit_code == 0 and slot is best_pool.slots[0]


def test_bad_task_type_raises_clear_error(best_pool):
    with pytest.raises(TypeError, match="sandbox.Task"):
        best_pool.run("echo hi")


def test_audit_log_has_one_line_per_task(tmp_path):
    from sandbox import Pool
    path = tmp_path / "audit.jsonl"
    with Pool(slots=1, audit_log=str(path)) as pool:
        pool.run(Task(script="exit 2", id="a1"))
        pool.run(Task(cmd=["true"], limits=Limits(wall_s=3)))
    lines = [json.loads(x) for x in path.read_text().splitlines()]
    assert [x["task_id"] for x in lines] == ["a1", None]
    assert lines[0]["result"]["exit_code"] == 2 and lines[1]["limits"]["wall_s"] == 3
    assert all(x["tier"] == pool.tier and x["task_hash"] and x["env_hash"] for x in lines)


def test_tier_probe_is_logged(caplog):
    from sandbox import Pool
    with caplog.at_level(logging.INFO, logger="sandbox"):
        with Pool(slots=1) as pool:
            tier = pool.tier
    assert any(f"tier={tier}" in m and "env_hash=" in m for m in caplog.messages)


def test_forced_unknown_tier_names_the_choices():
    from sandbox import Pool
    with pytest.raises(ValueError, match="bwrap"):
        Pool(slots=1, tier="docker")


def test_result_json_roundtrip_from_real_run(best_pool):
    r = best_pool.run(Task(script="echo hi > f", collect=["f"]))
    assert Result.from_dict(json.loads(json.dumps(r.to_dict()))) == r


def test_dead_spawner_is_replaced(best_pool):
    slots = [s for s in best_pool.slots if s.spawner is not None]
    if not slots:
        pytest.skip("this tier/launch path has no spawner")
    for s in slots:
        s.spawner.popen.kill()
        s.spawner.popen.wait()
    rs = best_pool.map([Task(script="echo back")] * 4)
    assert [r.stdout for r in rs] == ["back\n"] * 4


def test_sandboxes_starting_at_once_are_bounded():
    import threading
    import time as _time

    from sandbox import Pool
    with Pool(slots=4, max_starting=1) as pool:
        live, peak, lock = [0], [0], threading.Lock()
        for s in pool.slots:
            orig = s._spawn_via_spawner if s.spawner is not None else s._spawn_direct

            def counted(*a, _orig=orig, **k):
                with lock:
                    live[0] += 1
                    peak[0] = max(peak[0], live[0])
                try:
                    _time.sleep(0.02)    # widen the window so an unbounded start would overlap
                    return _orig(*a, **k)
                finally:
                    with lock:
                        live[0] -= 1
            if s.spawner is not None:
                s._spawn_via_spawner = counted
            else:
                s._spawn_direct = counted
        rs = pool.map([Task(cmd=["true"])] * 12)
    assert all(r.exit_code == 0 for r in rs)
    assert peak[0] == 1


def test_task_dies_with_a_killed_pool_process_and_state_is_swept(tmp_path):
    """SIGKILL the process owning a pool mid-task: the task must not outlive it, and the next pool
    removes the dead pool's mounts and cgroups."""
    import os
    import signal
    import subprocess
    import sys
    import time as _time
    code = ("from sandbox import Pool, Task, Limits\nimport sys\np = Pool(slots=1)\n"
            "print(p.name, p.slots[0].uid, flush=True)\np.run(Task(script='sleep 300', limits=Limits(wall_s=600)))\n")
    repo = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    child = subprocess.Popen([sys.executable, "-c", code], stdout=subprocess.PIPE, text=True, cwd=repo)
    name, uid = child.stdout.readline().split()
    _time.sleep(1.0)
    child.send_signal(signal.SIGKILL)
    child.wait()
    deadline = _time.monotonic() + 5
    def alive():
        out = []
        for d in filter(str.isdigit, os.listdir("/proc")):
            try:
                st = open(f"/proc/{d}/status").read()
            except OSError:
                continue
            if f"Uid:\t{uid}\t" in st:   # zombies included: the spawner reaps before exiting
                out.append(d)
        return out
    while alive() and _time.monotonic() < deadline:
        _time.sleep(0.05)
    assert alive() == []
    from sandbox import Pool
    from sandbox.pool import STATE_ROOT
    assert os.path.isdir(os.path.join(STATE_ROOT, name))
    with Pool(slots=1):
        pass
    assert not os.path.exists(os.path.join(STATE_ROOT, name))


def test_pool_refuses_use_from_a_forked_child(best_pool):
    import os
    pid = os.fork()
    if pid == 0:
        try:
            best_pool.run(Task(cmd=["true"]))
            os._exit(1)
        except RuntimeError as e:
            os._exit(0 if "after fork" in str(e) else 2)
        except BaseException:
            os._exit(3)
    assert os.waitpid(pid, 0)[1] == 0
