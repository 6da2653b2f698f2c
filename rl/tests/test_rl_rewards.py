"""Verifiers that raise or hang become infra errors, never passes, and do not hold up the others."""
from __future__ import annotations

import time

import domains
from domains.core import Reward
from rl.config import RewardConfig
from rl.rewards import score_all
from rl.tests.toy_domains import register
from rl.trajectory import Rollout

TOY = {d.name: d for d in register()}


def roll(name, text="ok"):
    d = TOY[name]
    return Rollout(d, d.generate(1, 0), messages=[{"role": "assistant", "content": text}])


def test_raising_and_hanging_verifiers_are_infra_errors():
    rs = [roll("toy.parity", "ok"), roll("toy.raises"), roll("toy.hangs"), roll("toy.parity", "odd")]
    t0 = time.monotonic()
    out = score_all(rs, None, RewardConfig(timeout_s=0.5, workers=2))
    assert time.monotonic() - t0 < 10
    assert out[0].passed and out[0].infra_error is None
    assert out[1].infra_error and "RuntimeError" in out[1].infra_error and not out[1].passed
    assert out[2].infra_error and "hung" in out[2].infra_error and not out[2].passed
    assert not out[3].passed and out[3].infra_error is None


def test_hung_verifiers_do_not_block_the_lane():
    rs = [roll("toy.hangs") for _ in range(2)] + [roll("toy.parity") for _ in range(20)]
    t0 = time.monotonic()
    out = score_all(rs, None, RewardConfig(timeout_s=0.5, workers=2))
    assert time.monotonic() - t0 < 10
    assert all(o.passed for o in out[2:])


def test_builtin_verifier_result_is_passed_through():
    d = domains.get("math.gcd")
    t = d.generate(5, 0)
    good = Rollout(d, t, messages=d.solve(t))
    out = score_all([good], None, RewardConfig())
    assert isinstance(out[0], Reward) and out[0].passed
