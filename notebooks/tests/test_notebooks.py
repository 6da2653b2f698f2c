"""Figures: every notebook runs headless from results/reference alone, fresh results win, missing results
are skipped by name, the documented layouts draw every figure, a broken file fails the run; the
reference snapshot copies files unchanged with the manifests they measured."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import nbformat
import pytest

ROOT = Path(__file__).resolve().parents[2]
REFERENCE = ROOT / "results" / "reference"
# results file -> the figure it feeds (the reference panel needs none: it always draws the reported values)
FEEDS = {"bench/sandbox.json": "sandbox_latency_throughput", "bench/train.json": "train_throughput",
         "base/eval.json": "pass_rate_by_family", "sft/eval.json": "pass_rate_by_family",
         "rl/eval.json": "pass_rate_by_family", "rl/metrics.jsonl": "rl_curves", "bench/fast.json": "fast_vs_standard"}
ALL_FIGURES = {"pass_rate_by_family", "sandbox_latency_throughput", "train_throughput", "reference_panel",
               "rl_domain_scaling", "rl_curves", "rl_scheduler_ablation", "longctx_grid", "longctx_rope_scaling",
               "fast_vs_standard", "rl_mismatch"}


def figures(results: Path, figs: Path, *only: str) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "notebooks", "--results", str(results), "--figures", str(figs)]
    for o in only:
        args += ["--only", o]
    return subprocess.run(args, cwd=ROOT, env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True,
                          text=True, timeout=900)


def notebook_text(figs: Path, name: str) -> str:
    nb = nbformat.read(figs / f"{name}.ipynb", as_version=4)
    return "".join(o.get("text", "") for c in nb.cells for o in c.get("outputs", []))


@pytest.fixture(scope="module")
def from_reference(tmp_path_factory):
    """`make figures` on a tree whose only results are a copy of results/reference/."""
    tmp = tmp_path_factory.mktemp("nb_ref")
    shutil.copytree(REFERENCE, tmp / "results" / "reference")
    r = figures(tmp / "results", tmp / "figures")
    return r, tmp


@pytest.mark.slow
def test_every_notebook_runs_from_reference_alone(from_reference):
    r, _ = from_reference
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]


@pytest.mark.slow
def test_reference_results_give_their_figures(from_reference):
    r, tmp = from_reference
    have = {rel for rel in FEEDS if (REFERENCE / rel).exists()}
    assert have, "results/reference/ holds no results at all"
    want = {FEEDS[rel] for rel in have} | {"reference_panel"}
    got = {p.stem for p in (tmp / "figures").glob("*.png")}
    assert want <= got, (want - got, r.stdout[-3000:])
    for name in got:
        assert (tmp / "figures" / f"{name}.png").stat().st_size > 10_000  # a drawn figure, not an empty canvas


@pytest.mark.slow
def test_missing_results_are_skipped_by_name(from_reference):
    r, tmp = from_reference
    for rel, fig in FEEDS.items():
        if not (REFERENCE / rel).exists():
            assert f"no results yet: {tmp / 'results' / rel}" in r.stdout
    produced = {p.stem for p in (tmp / "figures").glob("*.png")}
    fed = {FEEDS[rel] for rel in FEEDS if (REFERENCE / rel).exists()}
    assert "fast_vs_standard" in produced or "fast_vs_standard" not in fed
    assert not ({"fast_vs_standard", "rl_curves"} - fed) & produced  # nothing drawn without its results


@pytest.mark.slow
def test_fresh_results_take_precedence(tmp_path):
    res = tmp_path / "results"
    shutil.copytree(REFERENCE, res / "reference")
    (res / "bench").mkdir()
    shutil.copy(REFERENCE / "bench" / "sandbox.json", res / "bench" / "sandbox.json")
    r = figures(res, tmp_path / "figs", "02_sandbox")
    assert r.returncode == 0, r.stderr[-2000:]
    text = notebook_text(tmp_path / "figs", "02_sandbox")
    assert f"using {res / 'bench' / 'sandbox.json'}" in text and "reference" not in text.split("using ")[1].split()[0]


@pytest.mark.slow
def test_broken_results_fail_the_run(tmp_path):
    res = tmp_path / "results"
    (res / "bench").mkdir(parents=True)
    (res / "bench" / "train.json").write_text("{not json")
    r = figures(res, tmp_path / "figs", "03_train_throughput")
    assert r.returncode == 1 and "notebooks failed: ['03_train_throughput']" in r.stderr


def _eval_quick(rate: float) -> dict:
    fams = {}
    for i, f in enumerate(["math", "agent", "docs", "scene", "terminal", "all"]):
        fams[f] = {s: {"tasks": 10, "passed": round(10 * min(1.0, rate + 0.05 * i)), "infra_errors": 0,
                       "pass_rate": min(1.0, rate + 0.05 * i), "mean_turns": 1.5} for s in ("train", "heldout")}
    return {"schema": {"name": "eval.quick", "version": 1}, "created": "synthetic", "git_commit": "test",
            "per_family": fams}


def _longctx(rope, scores: dict, name: str = "eval.stage") -> dict:
    """eval/01_eval.py's file with a longctx suite, or (name eval.longctx) one of the script it replaced."""
    per_length = {str(n): {"score": s} for n, s in scores.items()}
    grid = {str(n): {f"{d:g}": {"score": s} for d in (0.0, 0.5, 1.0)} for n, s in scores.items()}
    eff = max([n for n, s in scores.items() if s >= 85.6], default=0)
    summary = {"per_length": per_length, "grid": grid, "threshold": 85.6, "effective_length": eff}
    if name == "eval.longctx":
        return {"schema": {"name": name, "version": 1}, "rope": rope, "summary": summary}
    return {"schema": {"name": name, "version": 1}, "stage": "base", "rope": rope,
            "suites": {"longctx": {"summary": summary}}}


@pytest.mark.slow
def test_documented_layouts_draw_every_figure(tmp_path):
    """Synthetic files (tmp only) in the layouts the notebooks document: every placeholder becomes a figure."""
    res = tmp_path / "results"
    w = lambda rel, doc: ((res / rel).parent.mkdir(parents=True, exist_ok=True),  # noqa: E731
                          (res / rel).write_text(json.dumps(doc) if isinstance(doc, dict) else doc))
    for st, rate in (("base", 0.1), ("sft", 0.3), ("rl", 0.5)):
        w(f"{st}/eval.json", _eval_quick(rate))
    step = lambda s, pr: {"step": s, "pass_rate": pr, "zero_var_frac": 0.5 - pr / 4,  # noqa: E731
                          "per_family": {"math": {"pass_rate": pr}, "agent": {"pass_rate": None}}}
    w("rl/metrics.jsonl", "".join(json.dumps(step(s, s / 40)) + "\n" for s in range(1, 21)))
    # rl/02_experiments.py: a summary per experiment, each arm's files in <summary without .json>/<arm>/
    w("rl/experiments/domain_scaling.json", {"schema": {"name": "rl.experiment.domain_scaling", "version": 1},
        "recipe": "tiny_cpu", "arms": {f"k{k}_s{seed}": {"heldout_pass_rate": 0.2 + 0.01 * seed + 0.001 * len(k),
                                                         "heldout_pass_rate_at_start": 0.15}
                                       for k in ("1", "4", "all") for seed in (0, 1)}})
    for name in ("uniform", "pass_rate"):
        w(f"rl/experiments/scheduler/{name}_s0/metrics.jsonl",
          "".join(json.dumps(step(s, s / 50)) + "\n" for s in range(1, 11)))
    w("rl/experiments/mismatch.json", {"schema": {"name": "rl.experiment.mismatch", "version": 1},
        "recipe": "tiny_cpu", "arms": {f"{src}_{cor}_s0": {
            "mismatch_abs_mean": 1e-6 if src == "stale0" else 0.05, "is_masked_frac_mean": 0.01 * (cor == "mis"),
            "tis_capped_frac_mean": 0.02 * (cor == "tis"), "heldout_delta": {"delta": 0.01, "ci95": [-0.01, 0.03]}}
            for src in ("stale0", "stale2", "bf16") for cor in ("none", "tis", "mis")}})
    w("eval/longctx_base.json", _longctx(None, {256: 100.0, 512: 90.0, 1024: 40.0}))
    pl = lambda sc: {str(n): {"score": s, "tail_nll": 3.0 + i} for i, (n, s) in enumerate(sc.items())}  # noqa: E731
    w("eval/rope_study.json", {"schema": {"name": "eval.rope_study", "version": 1}, "train_len": 256, "variants": {
        "none": {"effective_length": 256, "per_length": pl({256: 100.0, 512: 20.0})},
        "yarn:2": {"effective_length": 512, "per_length": pl({256: 100.0, 512: 90.0})},
        "linear:2": {"error": "engine failed"}}})
    w("bench/sandbox.json", (REFERENCE / "bench" / "sandbox.json").read_text())
    w("bench/train.json", (REFERENCE / "bench" / "train.json").read_text())
    w("bench/fast.json", {"schema": {"name": "bench.fast"}, "output_tok_per_s": {
        "standard": {"1": {"median": 10.0}, "8": {"median": 50.0}}, "fast": {"1": {"median": 25.0}, "8": {"median": 90.0}}},
        "ratio_vs_standard": {"fast": {"1": 2.5, "8": 1.8}}, "mean_acceptance_length": {"fast": {"1": 2.1, "8": 2.0}},
        "pass_rate": {"standard": {"pass_rate": 0.5}, "fast": {"pass_rate": 0.49}}, "pass_rate_delta_points": -1.0})
    r = figures(res, tmp_path / "figs")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert {p.stem for p in (tmp_path / "figs").glob("*.png")} == ALL_FIGURES, r.stdout[-3000:]



def test_rope_figure_from_single_variant_files_of_either_schema(tmp_path):
    """Without rope_study.json, 07 draws the RoPE figure from single-variant files: eval/01_eval.py --rope
    (eval.stage, rope set) beside an eval.longctx file of the script 01_eval replaced; the stage file is the grid."""
    res = tmp_path / "results" / "eval"
    res.mkdir(parents=True)
    for name, doc in (("base.json", _longctx(None, {256: 100.0, 512: 10.0})),
                      ("rope_none.json", _longctx({"type": "none", "factor": 1.0}, {256: 100.0, 512: 10.0})),
                      ("rope_yarn2.json", _longctx({"type": "yarn", "factor": 2.0}, {256: 100.0, 512: 90.0})),
                      ("longctx_linear2.json", _longctx({"type": "linear", "factor": 2.0}, {256: 100.0, 512: 50.0},
                                                        "eval.longctx"))):
        (res / name).write_text(json.dumps(doc))
    r = figures(tmp_path / "results", tmp_path / "figs", "07_long_context")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = notebook_text(tmp_path / "figs", "07_long_context")
    for pair in ("('base.json', 'base')", "('rope_none.json', 'no RoPE scaling')", "('rope_yarn2.json', 'yarn ×2')",
                 "('longctx_linear2.json', 'linear ×2')"):
        assert pair in text, text[-3000:]
    assert {p.stem for p in (tmp_path / "figs").glob("*.png")} == {"longctx_grid", "longctx_rope_scaling"}


def _rl_sampled(before: int, after: int) -> dict:
    cell = lambda k: {"tasks": 10, "samples": 160, "passed": k, "infra_errors": 0, "pass_rate": k / 160,  # noqa: E731
                      "ci95": [0.0, min(1.0, 3 * k / 160 + 0.05)]}
    fam = lambda k: {f: {"heldout": cell(k)} for f in ("math", "all")}  # noqa: E731
    return {"schema": {"name": "rl.eval", "version": 1}, "steps": 12,
            "protocol": {"samples": 16, "temperature": 1.0, "splits": ["heldout"], "per_domain": 5},
            "per_family_at_start": fam(before), "per_family": fam(after),
            "paired_delta": {"all": {"heldout": {"delta": (after - before) / 160, "ci95": [0.01, 0.05], "tasks": 10}}}}


def test_sampled_rl_eval_gets_its_own_panel(tmp_path):
    """An RL eval with a sampled protocol is drawn against its own step-0 (SFT) numbers, not beside greedy bars."""
    res = tmp_path / "results"
    for st, doc in (("sft", _eval_quick(0.3)), ("rl", _rl_sampled(4, 12))):
        (res / st).mkdir(parents=True)
        (res / st / "eval.json").write_text(json.dumps(doc))
    r = figures(res, tmp_path / "figs", "01_pass_rate")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    text = notebook_text(tmp_path / "figs", "01_pass_rate")
    assert "greedy stages: ['sft'] | sampled RL eval: True" in text
    assert (tmp_path / "figs" / "pass_rate_by_family.png").exists()

# --- results/reference snapshots -------------------------------------------------------------------------

def _run_ref(*args) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "notebooks.reference", *args], cwd=ROOT, capture_output=True,
                          text=True, env=dict(os.environ, PYTHONPATH=str(ROOT)))


def test_snapshot_copies_unchanged_with_the_measured_manifest(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "manifest.json").write_text('{"stage": "sft"}')
    from model.manifest import sha256_file
    doc = {**_eval_quick(0.3), "measured": {"path": str(ck), "manifest_sha256": sha256_file(ck / "manifest.json")}}
    (tmp_path / "results" / "sft").mkdir(parents=True)
    (tmp_path / "results" / "sft" / "eval.json").write_text(json.dumps(doc))
    r = _run_ref("--results", str(tmp_path / "results"), "sft/eval.json")
    assert r.returncode == 0, r.stderr
    ref = tmp_path / "results" / "reference"
    assert (ref / "sft" / "eval.json").read_bytes() == (tmp_path / "results" / "sft" / "eval.json").read_bytes()
    idx = json.loads((ref / "index.json").read_text())["files"]["sft/eval.json"]
    assert (ref / idx["manifest"]).read_text() == '{"stage": "sft"}'


def test_snapshot_refuses_a_result_whose_checkpoint_changed(tmp_path):
    ck = tmp_path / "ck"
    ck.mkdir()
    (ck / "manifest.json").write_text('{"stage": "sft", "retrained": true}')
    doc = {**_eval_quick(0.3), "measured": {"path": str(ck), "manifest_sha256": "0" * 64}}
    (tmp_path / "results" / "sft").mkdir(parents=True)
    (tmp_path / "results" / "sft" / "eval.json").write_text(json.dumps(doc))
    r = _run_ref("--results", str(tmp_path / "results"), "sft/eval.json")
    assert r.returncode == 2 and "missing or changed" in r.stderr
    assert not (tmp_path / "results" / "reference").exists()  # nothing half-copied


@pytest.mark.parametrize("passed,n", [(0, 11), (6, 6), (0, 1), (3, 56)])  # 0/11, 6/6 broke the float bounds
def test_wilson_interval_contains_the_rate(passed, n):
    from notebooks.common import wilson

    lo, hi = wilson(passed, n)
    assert 0.0 <= lo <= passed / n <= hi <= 1.0  # a zero pass rate once gave lo > 0 and a negative error bar
