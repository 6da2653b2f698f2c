"""ParallelConfig.validate refuses impossible layouts with one-line errors that name the numbers."""
from __future__ import annotations

import pytest

from model.config import ConfigError, ModelConfig, ParallelConfig

DENSE = ModelConfig(num_layers=4, vocab_size=512, hidden_size=64, head_dim=16, ffn_hidden_size=128)
MOE = ModelConfig(num_layers=4, vocab_size=512, hidden_size=64, head_dim=16, moe_ffn_hidden_size=64, num_experts=8)

CASES = [  # id, model, parallel config, world size, seq length, substrings the message must contain
    ("world_not_divisible", DENSE, ParallelConfig(tp=2, pp=2), 6, None, ["world size 6", "TP*PP*CP", "4"]),
    ("gbs_not_divisible", DENSE, ParallelConfig(tp=1, micro_batch_size=3, global_batch_size=8), 2, None,
     ["global_batch_size=8", "3*2=6", "set parallel.micro_batch_size=2 (rows per DP rank: 4)", "multiple of 6"]),
    ("gbs_not_divisible_no_smaller_micro_batch", DENSE, ParallelConfig(micro_batch_size=4, global_batch_size=6), 4,
     None, ["global_batch_size=6", "4*4=16", "set parallel.global_batch_size to a multiple of 16"]),
    ("groups_not_divisible_by_tp", DENSE, ParallelConfig(tp=4, global_batch_size=8), 4, None,
     ["num_query_groups=2", "TP=4"]),
    ("layers_not_divisible_by_pp", DENSE, ParallelConfig(pp=3, micro_batch_size=1, global_batch_size=3), 3, None,
     ["num_layers=4", "PP=3"]),
    ("experts_not_divisible_by_ep", MOE, ParallelConfig(ep=3, micro_batch_size=1, global_batch_size=3), 3, None,
     ["num_experts=8", "EP=3"]),
    ("moe_tp_without_sp", MOE, ParallelConfig(tp=2, micro_batch_size=1, global_batch_size=1), 2, None,
     ["TP=2", "sp"]),
    ("sp_without_tp", DENSE, ParallelConfig(sp=True), 1, None, ["sp=true", "tp > 1"]),
    ("ep_on_dense", DENSE, ParallelConfig(ep=2), 2, None, ["EP=2", "num_experts"]),
    ("seq_not_divisible_under_sp", DENSE, ParallelConfig(tp=2, sp=True, micro_batch_size=1, global_batch_size=1),
     2, 63, ["seq_length=63", "TP=2"]),
    ("tp_zero", DENSE, ParallelConfig(tp=0), 1, None, ["tp=0", ">= 1"]),
]


@pytest.mark.parametrize("model,par,world,seq,needles", [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_invalid_layout_gives_one_line_error_naming_the_numbers(model, par, world, seq, needles):
    with pytest.raises(ConfigError) as ei:
        par.validate(model, world, seq)
    msg = str(ei.value)
    assert "\n" not in msg, msg
    missing = [n for n in needles if n not in msg]
    assert not missing, f"message {msg!r} lacks {missing}"


@pytest.mark.parametrize("model,par,world", [
    (DENSE, ParallelConfig(tp=2, pp=2, micro_batch_size=2, global_batch_size=8), 8),
    (MOE, ParallelConfig(tp=2, ep=2, sp=True, micro_batch_size=1, global_batch_size=2), 4),
    (MOE, ParallelConfig(ep=2, micro_batch_size=2, global_batch_size=8), 2),
], ids=["dense_tp2_pp2_dp2", "moe_tp2_sp_ep2", "moe_ep2"])
def test_valid_layouts_pass(model, par, world):
    par.validate(model, world, seq_length=64)
