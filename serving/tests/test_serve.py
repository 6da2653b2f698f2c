"""The OpenAI-compatible server: starts, answers a chat completion through the chat template, stops cleanly."""
from __future__ import annotations

import re
import sys

import pytest

from serving.tests.conftest import run


@pytest.mark.slow
def test_fast_variant_serves_a_chat_completion_and_shuts_down(fast, tmp_path):
    r = run([sys.executable, "-m", "serving.03_serve", "--in", str(fast), "--port", "0", "--smoke",
             "--log", str(tmp_path / "server.log")], timeout=600)
    assert r.returncode == 0, r.stdout[-2000:] + r.stderr[-2000:]
    assert "--speculative-config" in r.stdout  # the draft model is part of the served engine
    assert re.search(r"serving \S+ at http://127\.0\.0\.1:\d+/v1", r.stdout)
    assert re.search(r'smoke: \{"content": .*"completion_tokens": [1-9]', r.stdout)
    assert re.search(r"process group \d+ gone", r.stdout)


def test_bad_input_is_one_line_error(tmp_path):
    r = run([sys.executable, "-m", "serving.03_serve", "--in", str(tmp_path / "missing"), "--smoke"])
    assert r.returncode == 2
    assert r.stderr.strip().count("\n") == 0 and "no such checkpoint directory" in r.stderr


def test_group_alive_ignores_zombies_but_sees_live_members():
    import signal
    import subprocess

    from serving import server
    live = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        assert server.group_alive(live.pid, grace_s=0.5)
        live.send_signal(signal.SIGKILL)  # not reaped yet: a zombie, as under a PID 1 that never reaps
        assert not server.group_alive(live.pid, grace_s=5.0)
    finally:
        live.kill()
        live.wait()
