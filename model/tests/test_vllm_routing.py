"""The engine-side pieces of routing replay that need no engine: forced flips and matching recorded requests."""
from __future__ import annotations

import numpy as np
import torch

from model import vllm_routing


def test_flip_swaps_the_weakest_chosen_expert_for_the_best_unchosen_one():
    logits = torch.tensor([[3.0, 1.0, 2.0, 0.5], [0.1, 0.2, 0.3, 0.4]])
    ids = torch.tensor([[0, 2], [3, 2]], dtype=torch.int32)
    w, new = vllm_routing.flipped(logits, ids, torch.tensor([True, False]), renormalize=True)
    assert sorted(new[0].tolist()) == [0, 1] and new[1].tolist() == [3, 2]
    assert torch.allclose(w[0], torch.softmax(torch.tensor([3.0, 1.0]), -1))
    assert torch.allclose(w.sum(-1), torch.ones(2))


def test_flip_mask_is_a_function_of_the_logits_and_hits_about_its_share():
    g = torch.Generator().manual_seed(0)
    logits = torch.randn(20000, 8, generator=g)
    m = vllm_routing.flip_mask(logits, 0.2)
    assert abs(m.float().mean().item() - 0.2) < 0.02
    assert torch.equal(m[5000:7000], vllm_routing.flip_mask(logits[5000:7000].clone(), 0.2))  # batch-invariant
    assert not vllm_routing.flip_mask(logits, 0.0).any()


def test_routing_of_takes_its_own_request_then_one_that_computed_the_whole_sequence():
    r = lambda v, n: np.full((n, 2, 2), v, np.int16)  # noqa: E731
    recorded = {("0", 0): (np.array([1, 2, 3, 4, 5]), r(7, 5)), ("1", 0): (np.array([1, 2, 3]), r(9, 3)),
                ("1", 1): (np.array([1, 2, 3]), r(5, 3)), ("2", 0): (np.array([1, 2, 8]), r(6, 3))}
    assert (vllm_routing.routing_of(recorded, ("1", 1), [1, 2, 3, 4]) == 5).all()  # the same tokens, its own request
    assert (vllm_routing.routing_of(recorded, ("x", 0), [1, 2, 3, 4]) == 9).all()  # unknown id: exact length first
    assert vllm_routing.routing_of(recorded, ("x", 0), [1, 2, 3, 4, 5, 6]).shape == (5, 2, 2)
    assert vllm_routing.routing_of(recorded, ("2", 0), [1, 9, 3, 4]) is None
