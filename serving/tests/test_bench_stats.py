"""bench_fast's ratio interval and goal verdict: pure functions on made-up tok/s runs, no engines."""
from __future__ import annotations

import random

import pytest

from serving.bench_fast import ratio_interval, verdict

REPS = 6


def runs(ratio: float, noise: float, seed: int, load: list[float] | None = None) -> tuple[list[float], list[float]]:
    """(fast, standard) tok/s over REPS reps: fast = ratio x standard, each run scaled by its rep's shared load
    factor (1 if none) and by its own uniform noise of +-`noise`."""
    rng = random.Random(seed)
    load = load or [1.0] * REPS
    std = [100 * f * (1 + rng.uniform(-noise, noise)) for f in load]
    fast = [ratio * 100 * f * (1 + rng.uniform(-noise, noise)) for f in load]
    return fast, std


def test_clear_3x_effect_meets_a_2x_goal():
    iv = ratio_interval(*runs(3.0, 0.03, seed=0))
    assert verdict(iv, goal=2.0) == "met", iv


def test_clear_1_5x_effect_does_not_meet_a_2x_goal():
    iv = ratio_interval(*runs(1.5, 0.03, seed=0))
    assert verdict(iv, goal=2.0) == "not met", iv


def test_noisy_effect_around_2x_is_unresolved():
    fast = [160.0 if i % 2 else 250.0 for i in range(REPS)]  # reps alternate 1.6x and 2.5x, median ratio 2.05
    iv = ratio_interval(fast, [100.0] * REPS)
    assert iv["ratio"] > 2.0  # the point estimate alone would have claimed the goal
    assert verdict(iv, goal=2.0).startswith("unresolved"), iv


def test_a_single_rep_claims_nothing():
    iv = ratio_interval([300.0], [100.0])  # 3x, but one pair has no spread to judge it by
    assert iv["ratio"] == 3.0 and verdict(iv, goal=2.0).startswith("unresolved"), iv


def shared_load(seed: int) -> list[float]:
    """A load factor per rep that slows both sides of the rep alike (they ran back to back)."""
    rng = random.Random(seed)
    return [rng.uniform(0.3, 1.0) for _ in range(REPS)]


def test_paired_resampling_cancels_a_shared_load_swing():
    # per-rep tok/s swings over 3x, yet within a rep fast/standard stays 2x +- 2%: the interval must stay near 2
    iv = ratio_interval(*runs(2.0, 0.01, seed=1, load=shared_load(1)))
    assert 1.9 < iv["low"] <= 2.0 <= iv["high"] < 2.1, iv


def test_the_tight_interval_comes_from_the_pairing():
    # the same runs with the pairs broken (standard's reps rotated one place): what resampling each side on its own
    # sees, since the load factors no longer cancel. The interval is much wider, as an unpaired bootstrap's would be.
    fast, std = runs(2.0, 0.01, seed=1, load=shared_load(1))
    paired, broken = ratio_interval(fast, std), ratio_interval(fast, std[1:] + std[:1])
    assert broken["high"] - broken["low"] > 10 * (paired["high"] - paired["low"]), (paired, broken)
    assert broken["low"] < 2.0 - 0.5 and broken["high"] > 2.0 + 0.5, broken


def test_interval_is_fixed_by_its_seed():
    fast, std = runs(2.0, 0.2, seed=2)
    assert ratio_interval(fast, std, seed=7) == ratio_interval(fast, std, seed=7)
    # and the seed is what fixes it: another seed draws other resamples, so other bounds on these continuous runs
    assert ratio_interval(fast, std, seed=7) != ratio_interval(fast, std, seed=8)


def test_natural_rep_is_tokens_over_summed_seconds_of_answers_that_end():
    from serving.bench_fast import natural_rep

    class Worker:  # answers of 3 and 5 tokens in 1 s and 3 s, one accepted proposal in 4 drafts
        calls: list = []

        def timed_generate(self, prompts, max_tokens, ignore_eos=False):
            self.calls.append((prompts, max_tokens, ignore_eos))
            n = 3 if prompts == ["a"] else 5
            return {"token_ids": [list(range(n))], "seconds": n / 3 if n == 3 else 3.0,
                    "spec": {"spec_decode_num_drafts": 2, "spec_decode_num_accepted_tokens": n == 3}}

    w = Worker()
    r = natural_rep(w, ["a", "b"], max_tokens=64)
    assert r["tokens"] == 8 and r["seconds"] == pytest.approx(4.0) and r["tok_s"] == pytest.approx(2.0)
    assert r["acceptance_length"] == pytest.approx(1.25)
    assert all(not ignore for _, _, ignore in w.calls) and all(len(p) == 1 for p, _, _ in w.calls)  # batch 1, ends
