"""serving/stage.mk: the stage that export and fast read is decided once, before any rule runs."""
from __future__ import annotations

import re
import subprocess

import pytest

from serving.tests.conftest import ROOT


def dry_run(goal: str, ckpt, *extra: str) -> tuple[str, str]:
    """(the fast manifest's prerequisites, the stage 02_fast.py reads) from `make -n -p GOAL` on an empty CKPT."""
    out = subprocess.run(["make", "-n", "-p", goal, f"CKPT={ckpt}", *extra], cwd=ROOT, capture_output=True,
                         text=True, timeout=120).stdout
    prereq = re.search(rf"^{re.escape(str(ckpt))}/fast/manifest.json: (.*)$", out, re.M).group(1)
    cmd = re.search(r"-m serving\.02_fast --in (\S+)", out).group(1)
    return prereq, cmd


@pytest.mark.parametrize("goal,stage", [("demo", "rl"), ("fast", "sft")])
def test_fast_depends_on_the_stage_it_reads(tmp_path, goal, stage):
    prereq, cmd = dry_run(goal, tmp_path)  # nothing built yet: a fresh clone
    assert f"{tmp_path}/{stage}/manifest.json" in prereq.split(), prereq
    assert cmd == f"{tmp_path}/{stage}", cmd  # under -j, fast cannot start beside the RL it will read
