"""One evaluation protocol: the same checkpoint gets the same pass counts through every stage that evaluates it.

The checkpoint is tests/trained_fixtures.target (a micro model that passes the memorised eval tasks: identical
zeros would prove nothing). Callers: sft/03_eval.py (the quick eval of `make eval-sft`), rl/01_train.py's
evaluation of its parent before step 1 (eval.at_start), eval/01_eval.py's quick suite, and serving's pass-rate
check (bench_fast: the served configuration in its own engine process). Each runs domains/evaluate.py on the
same items with the same settings; each must give every item the same counts.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from tests.trained_fixtures import run

pytestmark = pytest.mark.slow

PER_DOMAIN, MAX_TOKENS = 1, 32
KEYS = ("domain", "split", "samples", "passed", "errors", "infra_errors")
SERVING = f"""
import json, sys
from pathlib import Path
from domains import evaluate
from serving.server import engine_process
items = evaluate.eval_items(Path(sys.argv[2]), {PER_DOMAIN})
with engine_process(Path(sys.argv[1])) as eng:
    recs = evaluate.run(evaluate.EngineTarget(eng), items, None, max_tokens={MAX_TOKENS}, slots=2)
Path(sys.argv[3]).write_text(json.dumps(recs))
"""


def _items(recs: list[dict]) -> list[tuple]:
    return [tuple(r[k] for k in KEYS) for r in recs]


@pytest.fixture(scope="module")
def by_caller(target, memorised, tmp_path_factory) -> dict[str, list[tuple]]:
    d = tmp_path_factory.mktemp("one_protocol")
    out: dict[str, list[tuple]] = {}
    r = run([sys.executable, "-m", "sft.03_eval", "--in", str(target), "--data", str(memorised), "--out", str(d / "q.json"),
             "--per-domain", str(PER_DOMAIN), "--max-tokens", str(MAX_TOKENS)])
    assert r.returncode == 0, r.stderr[-3000:]
    out["sft/03_eval"] = _items(json.loads((d / "q.json").read_text())["items"])
    r = run([sys.executable, "-m", "rl.01_train", "--in", str(target), "--data", str(memorised), "--out", str(d / "rl"),
             "--results", str(d / "rl_results"), "--recipe", "micro_cpu", "--set", "train.steps=1",
             "--set", "eval.at_start=true", "--set", f"eval.per_domain={PER_DOMAIN}",
             "--set", f"eval.max_tokens={MAX_TOKENS}", "--set", "eval.splits=[train,heldout]",
             "--set", "sched.families=[math]"])
    assert r.returncode == 0, r.stderr[-3000:]
    out["rl at_start"] = _items(json.loads((d / "rl_results" / "eval.json").read_text())["items_at_start"])
    r = run([sys.executable, "-m", "eval.01_eval", "--in", str(target), "--data", str(memorised), "--out",
             str(d / "e.json"), "--recipe", "micro_cpu", "--suites", "quick", "--set", f"quick.per_domain={PER_DOMAIN}",
             "--set", f"quick.max_tokens={MAX_TOKENS}"])
    assert r.returncode == 0, r.stderr[-3000:]
    out["eval quick"] = _items(json.loads((d / "e.json").read_text())["suites"]["quick"]["items"])
    r = run([sys.executable, "-c", SERVING, str(target), str(memorised), str(d / "s.json")])
    assert r.returncode == 0, r.stderr[-3000:]
    out["serving"] = _items(json.loads((d / "s.json").read_text()))
    return out


def test_the_checkpoint_passes_tasks_so_equal_counts_mean_something(by_caller):
    recs = by_caller["sft/03_eval"]
    assert len(recs) > 0 and sum(r[3] for r in recs) > 0, recs


@pytest.mark.parametrize("caller", ["rl at_start", "eval quick", "serving"])
def test_every_caller_gives_every_item_the_same_counts(by_caller, caller):
    assert by_caller[caller] == by_caller["sft/03_eval"]
