"""RL's evaluation settings (the protocol itself: domains/tests/test_evaluate_*.py)."""
from __future__ import annotations

import pytest

from model.config import ConfigError
from rl.config import RLConfig


@pytest.mark.parametrize("ev", [{"samples": -1}, {"samples": 4, "temperature": 0.0}])
def test_bad_sampling_settings_are_refused_by_name(ev):
    with pytest.raises(ConfigError, match="eval.samples"):
        RLConfig.from_dict({"eval": ev})


def test_greedy_is_the_default_protocol():
    e = RLConfig.from_dict({}).eval
    assert e.samples == 0 and e.families == []
