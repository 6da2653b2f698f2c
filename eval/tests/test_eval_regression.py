"""Regression set and held-out pass@k: well-formed, oracle replays pass (verified by the domains), empty fails."""
from __future__ import annotations

import json
import sys
from collections import Counter

import pytest

import domains
from eval import heldout, regression, suites
from eval.tests.conftest import ROOT, EmptyTarget, OracleTarget, run


@pytest.fixture(scope="module")
def pool():
    with suites.sandbox_pool(2) as p:
        yield p


@pytest.fixture(scope="module")
def spec():
    return regression.load_set("eval/regression_set.yaml")


def test_set_has_20_to_50_tasks_over_the_four_dimensions(spec):
    assert 20 <= len(spec) <= 50
    dims = Counter(s["dimension"] for s in spec)
    assert set(dims) == {"terminal", "docs", "scene", "agent"} and min(dims.values()) >= 5
    fams = {s["dimension"]: domains.get(s["domain"]).family for s in spec}
    assert fams == {"terminal": "terminal", "docs": "docs", "scene": "scene", "agent": "agent"}


@pytest.fixture(scope="module")
def oracle_result(spec, pool):
    items = [(domains.get(s["domain"]), domains.get(s["domain"]).generate(s["seed"], s["difficulty"])) for s in spec]
    return regression.run(OracleTarget(items, pool), {"sandbox_slots": 2}, pool, log=lambda *_: None)


def test_oracle_passes_every_task_with_its_recorded_steps(spec, oracle_result):
    rows = oracle_result["rows"]
    assert [r["passed"] for r in rows] == [True] * len(spec), [r for r in rows if not r["passed"]]
    assert [r["turns"] for r in rows] == [s["oracle_steps"] for s in spec]
    assert oracle_result["summary"]["all"]["pass_rate"] == 1.0


def test_empty_replies_fail_every_task(pool):
    r = regression.run(EmptyTarget(), {"sandbox_slots": 2}, pool, log=lambda *_: None)
    assert r["summary"]["all"]["passed"] == 0 and r["summary"]["all"]["scored"] == len(r["rows"])
    assert r["summary"]["all"]["mean_turns"] == 1.0


def test_compare_marks_flipped_tasks(oracle_result, pool):
    empty = regression.run(EmptyTarget(), {"sandbox_slots": 2, "only": list(range(8))}, pool, log=lambda *_: None)
    text, changed = regression.compare(empty, oracle_result)
    assert changed == 8
    assert "fail/1" in text and "pass/2" in text and "absent" in text


def test_compare_script_prints_the_before_after_table(tmp_path, oracle_result):
    a, b = tmp_path / "a.json", tmp_path / "b.json"
    a.write_text(json.dumps({"schema": {"name": "eval.stage"}, "suites": {"regression": oracle_result}}))
    flipped = json.loads(json.dumps(oracle_result))
    flipped["rows"][0].update(passed=False, turns=1)
    b.write_text(json.dumps({"schema": {"name": "eval.stage"}, "suites": {"regression": flipped}}))
    r = run([sys.executable, "-m", "eval.02_compare", str(a), str(b)])
    assert r.returncode == 0, r.stderr
    line = next(x for x in r.stdout.splitlines() if x.startswith("terminal-0"))
    assert line.split()[2:] == ["pass/2", "fail/1", "*"]


def test_compare_reads_a_file_of_the_regression_only_script(tmp_path, oracle_result):
    """Before 01_eval folded it in, 02_regression.py wrote the suite at top level (eval.regression): still read."""
    a, b = tmp_path / "old.json", tmp_path / "new.json"
    a.write_text(json.dumps({"schema": {"name": "eval.regression", "version": 1}, **oracle_result}))
    b.write_text(json.dumps({"schema": {"name": "eval.stage", "version": 1}, "suites": {"regression": oracle_result}}))
    r = run([sys.executable, "-m", "eval.02_compare", str(a), str(b)])
    assert r.returncode == 0 and "0 task(s) changed" in r.stdout, r.stdout + r.stderr


def test_compare_reads_the_committed_reference_files():
    """results/reference/eval/ predates turns (rows say steps, summaries mean_steps): every suite still compares."""
    ref = ROOT / "results" / "reference" / "eval"
    r = run([sys.executable, "-m", "eval.02_compare", str(ref / "sft.json"), str(ref / "rl.json")])
    assert r.returncode == 0, r.stderr
    assert "task(s) changed" in r.stdout and "effective length" in r.stdout and "pass@1" in r.stdout


def test_heldout_uses_only_heldout_domains_and_oracle_scores_1(pool):
    cfg = {"families": ["math", "agent", "terminal"], "max_domains": 2, "per_domain": 1, "n": 2, "k": [1, 2],
           "sandbox_slots": 2}
    items = heldout.select(cfg)
    assert items and all(d.split == "heldout" for d, _ in items)
    r = heldout.run(OracleTarget(items, pool), cfg, pool, log=lambda *_: None)
    assert r["summary"]["all"]["pass@1"] == 1.0 and r["summary"]["all"]["pass@2"] == 1.0
    assert all(x["n"] == 2 for x in r["rows"])
    r0 = heldout.run(EmptyTarget(), cfg, pool, log=lambda *_: None)
    assert r0["summary"]["all"]["pass@2"] == 0.0


def test_broken_endpoint_gives_errors_not_fails(fake_openai, pool):
    from eval.targets import EndpointTarget

    t = EndpointTarget(fake_openai(mode="garbage").url, retries=0)
    r = regression.run(t, {"only": [8, 16, 24]}, pool, log=lambda *_: None)  # docs, scene, agent
    assert all(x["error"].startswith("bad response") and x["passed"] is None for x in r["rows"])
    assert r["summary"]["all"]["errors"] == 3 and r["summary"]["all"]["pass_rate"] is None
    h = heldout.run(t, {"families": ["math", "agent"], "max_domains": 1, "n": 2, "k": [1, 2]}, pool, log=lambda *_: None)
    assert h["summary"]["all"]["samples_errors"] == 2 * len(h["rows"]) and h["summary"]["all"]["pass@1"] is None
