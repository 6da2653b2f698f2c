"""model/rounding.py: stochastic rounding of float32 main params into bf16 weights, one property per test."""
from __future__ import annotations

import pytest
import torch

from model.config import ConfigError
from model.rounding import stochastic_bf16_
from model.sections import OptimConfig

N = 200_000


def _draws(value: float, seed: int = 0) -> torch.Tensor:
    src = torch.full((N,), value, dtype=torch.float32)
    dst = torch.empty(N, dtype=torch.bfloat16)
    stochastic_bf16_(dst, src, torch.Generator().manual_seed(seed))
    return dst.float()


@pytest.mark.parametrize("value", [1.0 + 2**-9, -(0.1 + 3e-5), 3e-3 + 1e-6])
def test_rounds_to_a_neighbour(value):
    got = sorted(_draws(value).unique().tolist())
    assert len(got) == 2 and got[0] < value < got[1], (value, got)
    codes = torch.tensor(got).bfloat16().view(torch.int16).tolist()
    assert abs(codes[1] - codes[0]) == 1, f"{got} are not adjacent bf16 values"


@pytest.mark.parametrize("value", [1.0 + 2**-10, -(1.0 + 2**-10), 0.1 + 3e-5])
def test_mean_equals_the_float32_value(value):
    # a quarter of a bf16 step above 1: rounding to nearest always gives 1.0, a bias of 2**-10
    mean = float(_draws(value).double().mean())
    nearest = float(torch.tensor(value).bfloat16().float())
    assert abs(mean - value) < 0.05 * abs(nearest - value), (value, mean, nearest)


def test_same_seed_same_rounding():
    assert torch.equal(_draws(1.0 + 2**-10, seed=3), _draws(1.0 + 2**-10, seed=3))
    assert not torch.equal(_draws(1.0 + 2**-10, seed=3), _draws(1.0 + 2**-10, seed=4))


def test_bf16_values_stay_exact():
    v = torch.randn(1000).bfloat16().float()
    dst = torch.empty(1000, dtype=torch.bfloat16)
    stochastic_bf16_(dst, v, torch.Generator().manual_seed(0))
    assert torch.equal(dst.float(), v)


def test_unknown_mode_is_a_config_error():
    with pytest.raises(ConfigError, match="bf16_rounding"):
        OptimConfig(bf16_rounding="up")


def test_distributed_optimizer_is_refused():
    with pytest.raises(ConfigError, match="distributed optimizer"):
        OptimConfig(bf16_rounding="stochastic", use_distributed_optimizer=True)
