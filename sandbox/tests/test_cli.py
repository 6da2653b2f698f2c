"""`python -m sandbox run`: one task in a fresh sandbox, Result as JSON; clear usage errors."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def cli(*args, stdin=None):
    return subprocess.run([sys.executable, "-m", "sandbox", *args], capture_output=True, text=True, cwd=REPO,
                          input=stdin, timeout=120)


@pytest.mark.usefixtures("root")
def test_cli_run_prints_result_json():
    p = cli("run", "--wall-s", "5", "--file", "a.py=print(6*7)", "--collect", "a.py", "--", "python3", "a.py")
    assert p.returncode == 0, p.stderr
    r = json.loads(p.stdout)
    assert r["stdout"] == "42\n" and r["exit_code"] == 0 and r["read_files"]["a.py"] == "print(6*7)"
    assert r["tier"] in ("bwrap", "unshare", "rlimit")


@pytest.mark.usefixtures("root")
def test_cli_task_failure_is_in_json_not_in_our_exit_code():
    p = cli("run", "--script", "exit 5")
    assert p.returncode == 0 and json.loads(p.stdout)["exit_code"] == 5


def test_cli_without_command_explains_usage():
    p = cli("run", "--wall-s", "1")
    assert p.returncode != 0 and "give a command after --" in p.stderr


def test_cli_bad_limit_names_the_field():
    p = cli("run", "--memory-mb", "0", "--", "true")
    assert p.returncode != 0 and "memory_mb" in p.stderr
