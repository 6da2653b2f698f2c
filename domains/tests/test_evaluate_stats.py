"""The evaluation protocol's statistics: pass rate over scored samples, Wilson intervals over tasks, pass@k,
paired before/after deltas (domains/evaluate.py)."""
from __future__ import annotations

import pytest

from domains.evaluate import paired_delta, pass_at_k, pass_at_k_one, summarize, wilson


def rec(i, passed, samples=4, family="math", split="heldout", infra=0, domain=None, errors=0):
    return {"item": i, "domain": domain or f"{family}.d{i}", "family": family, "split": split, "samples": samples,
            "passed": passed, "errors": errors, "infra_errors": infra, "tool_retries": 0, "cut": 0, "turns": samples}


def test_wilson_matches_the_textbook_value_and_keeps_the_rate_inside():
    lo, hi = wilson(1, 96)
    assert lo == pytest.approx(0.00184, abs=1e-4) and hi == pytest.approx(0.0567, abs=1e-4)
    for k, n in ((0, 11), (6, 6), (0, 1)):
        lo, hi = wilson(k, n)
        assert 0 <= lo <= k / n <= hi <= 1


def test_sampled_pass_rate_is_the_mean_over_scored_samples():
    t = summarize([rec(0, 3), rec(1, 0), rec(2, 1, infra=2), rec(3, 2, family="retrieval")])
    m = t["math"]["heldout"]
    assert (m["tasks"], m["samples"], m["passed"], m["infra_errors"]) == (3, 12, 4, 2)
    assert m["pass_rate"] == pytest.approx(4 / 10)
    assert t["all"]["heldout"]["pass_rate"] == pytest.approx(6 / 14)


def test_interval_counts_tasks_not_samples():
    # 8 tasks x 64 samples: as wide as 8 independent trials, not 512
    t = summarize([rec(i, 32, samples=64) for i in range(8)])
    lo, hi = t["all"]["heldout"]["ci95"]
    assert (lo, hi) == pytest.approx(wilson(4, 8))
    assert hi - lo > 0.5


def test_paired_delta_sees_a_shift_that_single_intervals_cannot_separate():
    before = [rec(i, i % 4) for i in range(40)]
    after = [rec(i, i % 4 + 1) for i in range(40)]  # every task passes one more of its 4 samples
    b, a = summarize(before)["all"]["heldout"], summarize(after)["all"]["heldout"]
    assert a["ci95"][0] < b["ci95"][1]  # the two Wilson intervals overlap
    d = paired_delta(before, after)["all"]["heldout"]
    assert d["delta"] == pytest.approx(0.25)
    assert 0 < d["ci95"][0] <= d["delta"] <= d["ci95"][1]
    assert (d["better"], d["worse"], d["tasks"]) == (40, 0, 40)


def test_paired_delta_of_identical_evaluations_is_exactly_zero():
    recs = [rec(i, i % 3) for i in range(10)]
    d = paired_delta(recs, recs)["math"]["heldout"]
    assert d["delta"] == 0 and d["ci95"] == [0, 0] and d["better"] == d["worse"] == 0


def test_paired_delta_skips_tasks_without_scored_samples():
    d = paired_delta([rec(0, 1), rec(1, 0)], [rec(0, 2), rec(1, 0, infra=4)])["all"]["heldout"]
    assert d["tasks"] == 1 and d["delta"] == pytest.approx(0.25)


def test_paired_delta_refuses_different_items():
    with pytest.raises(ValueError, match="same eval items"):
        paired_delta([rec(0, 1, domain="math.a")], [rec(0, 1, domain="math.b")])


def test_domain_interval_is_wider_when_the_gain_sits_in_one_domain():
    before = [rec(i, 0, domain=f"math.d{i % 5}") for i in range(40)]
    after = [rec(i, 4 if i % 5 == 0 else 0, domain=f"math.d{i % 5}") for i in range(40)]  # only math.d0 improves
    d = paired_delta(before, after)["all"]["heldout"]
    assert d["domains"] == 5 and (d["domains_better"], d["domains_worse"]) == (1, 0)
    assert d["ci95_domains"][0] < d["ci95"][0] and d["ci95_domains"][1] >= d["ci95"][1]
    assert d["ci95_domains"][0] == 0  # resamples without math.d0 exist: no gain


def test_target_errors_are_counted_and_left_out_of_the_rate():
    t = summarize([rec(0, 2, errors=2), rec(1, 0, errors=4)])["math"]["heldout"]
    assert (t["errors"], t["scored"], t["pass_rate"]) == (6, 2, 1.0)


def test_pass_at_k_is_the_unbiased_estimator_over_tasks_with_k_scored_samples():
    assert pass_at_k_one(4, 0, 1) == 0.0 and pass_at_k_one(4, 4, 1) == 1.0
    assert pass_at_k_one(4, 1, 1) == pytest.approx(0.25) and pass_at_k_one(4, 1, 4) == 1.0
    assert pass_at_k_one(5, 2, 2) == pytest.approx(1 - 3 / 10)
    p = pass_at_k([rec(0, 1), rec(1, 0, infra=2)], [1, 4])["all"]
    assert p["pass@1"] == pytest.approx(0.125) and p["tasks_scored@4"] == 1 and p["pass@4"] == 1.0


def test_summary_groups_by_any_record_field():
    recs = [dict(rec(0, 1), dimension="recall"), dict(rec(1, 3), dimension="tools")]
    t = summarize(recs, by=("dimension",))
    assert set(t) == {"recall", "tools", "all"} and t["all"]["passed"] == 4 and t["all"]["mean_turns"] == 1.0
