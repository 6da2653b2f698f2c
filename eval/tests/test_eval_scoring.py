"""Exact-match scorer: oracle 100%, empty and shuffled 0%; aggregates and effective length."""
from __future__ import annotations

import pytest

from eval import ruler, scoring


@pytest.fixture(scope="module")
def tasks(tok):
    return [ruler.build(t, n, d, s, tok) for t in sorted(ruler.TASKS) for n in (1000, 4096)
            for d in ((0.1, 0.9) if t in ruler.DEPTH_TASKS else (None,)) for s in (0, 1)]


def _rows(tasks, replies):
    return [{"task": t.task, "length": t.length, "depth": t.depth, "error": None, **scoring.score(t.answers, r)}
            for t, r in zip(tasks, replies)]


def test_oracle_answers_score_100(tasks):
    agg = scoring.aggregate(_rows(tasks, [t.oracle() for t in tasks]))
    assert all(v["score"] == 100.0 for v in agg["per_length"].values())
    assert all(c["score"] == 100.0 for per in agg["per_task"].values() for c in per.values())
    assert agg["effective_length"] == 4096


def test_oracle_with_working_and_other_order_still_scores(tasks):
    for t in tasks:
        reply = "Let me look.\nAnswer: " + " ,  ".join(reversed([a.upper() for a in t.answers]))
        assert scoring.score(t.answers, reply)["score"] == 1.0


def test_empty_answers_score_0(tasks):
    agg = scoring.aggregate(_rows(tasks, ["" for _ in tasks]))
    assert all(v["score"] == 0.0 for v in agg["per_length"].values())
    assert agg["effective_length"] == 0


def test_shuffled_answers_score_0(tasks):
    replies = [t.oracle() for t in tasks[1:] + tasks[:1]]  # every task gets another task's oracle answer
    agg = scoring.aggregate(_rows(tasks, replies))
    assert all(v["score"] == 0.0 for v in agg["per_length"].values())


def test_partial_or_extra_items_are_not_exact(tasks):
    t = next(x for x in tasks if x.task == "niah_multivalue")
    assert scoring.score(t.answers, "Answer: " + ", ".join(t.answers[:-1]))["score"] == 0.0
    assert scoring.score(t.answers, t.oracle() + ", 1234567")["score"] == 0.0
    assert scoring.score(t.answers, " ".join(t.answers))["score"] == 0.0  # no Answer: line


def test_errors_are_counted_not_scored():
    rows = [{"task": "a", "length": 1000, "depth": 0.5, "score": 1.0, "recall": 1.0, "error": None},
            {"task": "a", "length": 1000, "depth": 0.5, "score": None, "recall": None, "error": "timeout"},
            {"task": "a", "length": 2000, "depth": 0.5, "score": None, "recall": None, "error": "timeout"}]
    agg = scoring.aggregate(rows)
    assert agg["per_length"]["1000"]["score"] == 100.0 and agg["per_length"]["1000"]["errors"] == 1
    assert agg["per_length"]["2000"]["score"] is None and agg["errors"] == 2
    assert agg["grid"]["1000"]["0.5"] == {"score": 100.0, "recall": 100.0, "n": 1, "errors": 1}


def test_effective_length_is_the_longest_length_above_threshold():
    def rows(scores):
        return [{"task": "t", "length": n, "depth": None, "score": s, "recall": s, "error": None}
                for n, ss in scores.items() for s in ss]
    agg = scoring.aggregate(rows({1000: [1, 1], 2000: [1, 0], 4000: [1, 1], 8000: [0, 0]}))
    assert agg["effective_length"] == 4000 and agg["effective_length_prefix"] == 1000
