"""Shared pieces of the peer benchmarks: the steady-state rate, the section-wise results file, the missing-venv
error."""
from __future__ import annotations

import json

import pytest

from model import peers
from model.config import ConfigError


def test_steady_rate_leaves_out_the_warmup_steps():
    # step k's line at time t; the first two steps are slow (start-up), then 2 s per step and 100 units each
    pts = [(10.0, 1, 500.0), (30.0, 2, 500.0), (32.0, 3, 100.0), (34.0, 4, 100.0), (36.0, 5, 100.0)]
    r = peers.steady(pts, warmup=2)
    assert r["per_s"] == pytest.approx(300 / 6)
    assert r["step_s_median"] == pytest.approx(2.0)
    assert r["steps"] == 3


def test_steady_refuses_too_few_steps():
    with pytest.raises(RuntimeError, match="step lines"):
        peers.steady([(1.0, 1, 1.0), (2.0, 2, 1.0)], warmup=2)


def test_write_section_keeps_the_other_sections(tmp_path):
    out = tmp_path / "peers.json"
    peers.write_section(out, "sft", {"x": 1})
    peers.write_section(out, "grpo", {"y": 2})
    peers.write_section(out, "sft", {"x": 3})
    doc = json.loads(out.read_text())
    assert {k: {kk: v for kk, v in s.items() if kk in ("x", "y")} for k, s in doc["sections"].items()} == \
        {"sft": {"x": 3}, "grpo": {"y": 2}}
    assert all("git_commit" in s and "created" in s for s in doc["sections"].values())


def test_a_missing_peer_environment_names_the_fix(tmp_path):
    with pytest.raises(ConfigError, match="make peers-venv"):
        peers.peer_python(tmp_path / "nope")


def test_timed_lines_stamp_each_line_and_raise_on_failure():
    import sys

    lines = peers.timed_lines([sys.executable, "-c", "import time; print('a'); time.sleep(0.3); print('b')"])
    assert [x for _, x in lines] == ["a", "b"]
    assert lines[1][0] - lines[0][0] >= 0.25
    with pytest.raises(RuntimeError, match="boom"):
        peers.timed_lines([sys.executable, "-c", "import sys; sys.exit('boom')"])
