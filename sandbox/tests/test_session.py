"""Persistent shell sessions: state persists, timeouts kill the command not the shell, teardown is total."""
from __future__ import annotations

import time

import pytest

from sandbox import Limits

from .conftest import assert_no_slot_processes


def test_cwd_and_env_persist_between_commands(pool):
    with pool.session(files={"d/x.txt": "hi"}) as sh:
        sh.run("cd d && export A=42")
        r = sh.run("cat x.txt; echo \" $A\"; pwd")
    assert r.stdout.startswith("hi 42\n") and r.stdout.rstrip().endswith("/d")


def test_command_output_has_no_marker_residue(best_pool):
    with best_pool.session() as sh:
        r = sh.run("printf abc; printf err >&2")
    assert (r.stdout, r.stderr, r.exit_code) == ("abc", "err", 0)


def test_command_timeout_keeps_shell_and_state(best_pool):
    with best_pool.session() as sh:
        sh.run("export KEEP=1; cd /tmp")
        t0 = time.monotonic()
        r = sh.run("sleep 30 & sleep 30", timeout_s=1)
        assert r.timed_out and time.monotonic() - t0 < 2.5
        r2 = sh.run("echo $KEEP; pwd")
    assert r2.stdout == "1\n/tmp\n" and "restarted" not in r2.stderr


def test_stuck_shell_is_replaced_and_says_so(best_pool):
    with best_pool.session(files={"keep.txt": "k"}) as sh:
        r = sh.run("while true; do :; done", timeout_s=1)
        assert r.timed_out
        r2 = sh.run("cat keep.txt")
    assert r2.stdout == "k" and "restarted" in r2.stderr


def test_session_files_diff_is_per_command(best_pool):
    with best_pool.session() as sh:
        a = sh.run("echo 1 > a")
        b = sh.run("echo 2 > b; rm a")
    assert a.files["created"] == ["a"]
    assert b.files == {"created": ["b"], "modified": [], "deleted": ["a"]}


def test_session_teardown_leaves_nothing(pool):
    with pool.session() as sh:
        sh.run("(setsid sleep 500 &); sleep 400 &")
    assert_no_slot_processes(pool)
    assert pool.run(__import__("sandbox").Task(script="ls -A")).stdout == ""


def test_closed_session_refuses_commands(best_pool):
    with best_pool.session() as sh:
        pass
    with pytest.raises(RuntimeError, match="closed"):
        sh.run("true")


def test_a_slot_whose_cleanup_fails_is_rebuilt_and_returned(best_pool, monkeypatch):
    # seen under make -j4 demo beside a test run: a SIGKILLed process outlived the 2 s grace, cleanup raised, and
    # the rebuild was called without its reason (TypeError), which ended the whole evaluation
    from sandbox.slot import Slot

    calls = []

    def fail_once(self):
        if not calls:
            calls.append(self.index)
            raise RuntimeError(f"slot {self.index}: processes survive SIGKILL: [1]")
        return real(self)

    real = Slot.cleanup
    monkeypatch.setattr(Slot, "cleanup", fail_once)
    before = best_pool._free.qsize()
    with best_pool.session() as sh:
        sh.run("true")
    assert calls and best_pool._free.qsize() == before   # the slot came back (rebuilt), nothing was lost
    monkeypatch.setattr(Slot, "cleanup", real)
    with best_pool.session() as sh:
        assert sh.run("echo ok").stdout == "ok\n"
