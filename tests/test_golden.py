"""tests/golden.py on synthetic runs: what it ignores (timings, paths, manifest hashes) and what it must catch."""
from __future__ import annotations

import json
from pathlib import Path

import pytest

from tests import golden


def _write(p: Path, obj) -> None:
    p.parent.mkdir(parents=True, exist_ok=True)
    p.write_text("\n".join(json.dumps(x) for x in obj) + "\n" if p.suffix == ".jsonl" else json.dumps(obj))


def make_run(root: Path, loss: float = 2.5, passed: int = 3, step_s: float = 0.1, created: str = "2026-12-04T01:00:00",
             weights: bytes = b"w") -> Path:
    """The files extract() reads, plus a manifest that names its own path and a binary checkpoint file."""
    rows = [{"step": 0, "val_loss": 3.0}, {"step": 1, "loss": loss, "grad_norm": 1.0, "lr": 1e-3, "skipped": False}]
    for st in ("base", "sft"):
        _write(root / f"ck/{st}/metrics.jsonl", rows)
        (root / f"ck/{st}/weights.bin").write_bytes(weights)
        _write(root / f"ck/{st}/manifest.json", {"created": created, "config": {"out": str(root / f"ck/{st}")},
                                                 "metrics": {"wall_s_this_run": step_s * 9}})
        _write(root / f"results/{st}/eval.json", {"created": created, "seconds": step_s,
                                                  "per_family": {"all": {"train": {"passed": passed, "tasks": 9}}}})
    _write(root / "results/rl/metrics.jsonl", [{"step": 1, "reward": 0.25, "grad_norm": 0.5, "rollout_s": step_s}])
    _write(root / "results/rl/eval.json", {"per_family": {"all": {"passed": passed}}, "per_family_at_start": {},
                                           "paired_delta": None})
    for st in ("base", "sft", "rl", "fast"):
        _write(root / f"results/eval/{st}.json", {"suites": {"heldout": {"summary": {"passed": passed},
                                                                         "seconds": step_s}}})
    return root


def test_same_runs_in_two_directories_are_identical_whatever_their_timings(tmp_path):
    a = make_run(tmp_path / "a")
    b = make_run(tmp_path / "b", step_s=7.0, created="2026-12-05T09:30:00")
    assert golden.differences(golden.normalized(a), golden.normalized(b)) == []


@pytest.mark.parametrize("change", [{"loss": 2.5 + 1e-4}, {"passed": 4}, {"weights": b"x"}],
                         ids=["loss", "count", "weights"])
def test_a_changed_loss_count_or_weight_is_a_difference(tmp_path, change):
    a, b = make_run(tmp_path / "a"), make_run(tmp_path / "b", **change)
    assert golden.differences(golden.normalized(a), golden.normalized(b))
    assert golden.main(["same", str(a), str(b)]) == 1


def test_golden_check_fails_when_a_curve_moves_beyond_its_tolerance(tmp_path):
    g = tmp_path / "golden.json"
    golden.write(make_run(tmp_path / "ref"), g)
    assert golden.check(make_run(tmp_path / "same"), g) == []
    assert golden.check(make_run(tmp_path / "tiny", loss=2.5 * (1 + 1e-8)), g) == []  # inside rel 1e-6
    moved = golden.check(make_run(tmp_path / "moved", loss=2.5 * (1 + 1e-5)), g)
    assert moved and "curves/base[1]/loss" in moved[0], moved
    assert golden.check(make_run(tmp_path / "count", passed=2), g)


def test_a_run_with_no_files_is_refused_not_identical(tmp_path):
    # rglob does not follow links below the run directory: two runs whose ck/ and results/ were symlinks compared
    # 0 files and were "identical"
    real_a, real_b = make_run(tmp_path / "real_a"), make_run(tmp_path / "real_b", loss=9.0)
    for run, real in ((tmp_path / "a", real_a), (tmp_path / "b", real_b)):
        run.mkdir()
        for sub in ("ck", "results"):
            (run / sub).symlink_to(real / sub)
    with pytest.raises(SystemExit, match="holds links"):
        golden.main(["same", str(tmp_path / "a"), str(tmp_path / "b")])
    for run in (tmp_path / "a", tmp_path / "b"):  # one real file beside the same linked folder in both runs
        (run / "results").unlink()
        make_run(run / "x")
        (run / "x/ck").rename(run / "real_ck")
    with pytest.raises(SystemExit, match="holds links"):  # the linked ck/ would be skipped on both sides
        golden.main(["same", str(tmp_path / "a"), str(tmp_path / "b")])
    (tmp_path / "empty").mkdir()
    with pytest.raises(SystemExit, match="holds no files"):
        golden.main(["same", str(real_a), str(tmp_path / "empty")])


def test_torch_dist_metadata_is_compared_unpickled(tmp_path):
    import pickle

    a, b, c = (make_run(tmp_path / x) for x in "abc")
    for run, meta in ((a, {"x": 1, "y": 2}), (b, {"y": 2, "x": 1}), (c, {"x": 1, "y": 3})):
        (run / "ck/sft/mcore").mkdir()
        (run / "ck/sft/mcore/.metadata").write_bytes(pickle.dumps(meta))  # a and b: equal, other bytes
    assert (a / "ck/sft/mcore/.metadata").read_bytes() != (b / "ck/sft/mcore/.metadata").read_bytes()
    assert golden.differences(golden.normalized(a), golden.normalized(b)) == []
    assert golden.differences(golden.normalized(a), golden.normalized(c)) == ["/ck/sft/mcore/.metadata/y: '2' != '3'"]
