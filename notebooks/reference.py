"""Snapshot results files into results/reference/ (committed), with the manifests of what they measured.

    python -m notebooks.reference bench/sandbox.json bench/train.json     # paths relative to --results
    python -m notebooks.reference --all                                   # every *.json / *.jsonl under results/
    python -m notebooks.reference --results /tmp/run --reference results/reference bench/train.json
    make reference                                                        # the same as --all

Copies each file unchanged to results/reference/<same path> and records it in
results/reference/index.json: sha256, schema, created, git commit, the command that makes it (when
known) and, for results that measured a checkpoint (`measured.path`), that checkpoint's manifest.json,
copied to results/reference/manifests/ after checking its hash against `measured.manifest_sha256`.
The notebooks fall back to these files when results/ has no fresh ones. Numbers are never edited here.
"""
from __future__ import annotations

import datetime
import hashlib
import json
import shutil
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m notebooks.reference ...")

from model import cli  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
MAKERS = {  # results path -> the command that writes it (documentation in the index)
    "bench/sandbox.json": "python -m sandbox.bench --out results/bench/sandbox.json",
    "bench/train.json": "python -m pretrain_ckpt.bench_train --out results/bench/train.json",
    "bench/train_smollm2_cpu.json": "make bench-train RECIPE=smollm2_cpu",
    "bench/train_smollm2_cpu_bf16.json": "make bench-train RECIPE=smollm2_cpu BENCH_DTYPE=bf16",
    "bench/peers.json": "make bench-peers",
    "bench/peers_smollm2_cpu.json": "make bench-peers RECIPE=smollm2_cpu BENCH_PEERS_STEPS=8 BENCH_PEERS_GRPO_STEPS=5 "
                                    "BENCH_PEERS_ROUNDS=1",
    "bench/rl.json": "make bench-rl",
    "base/eval.json": "python -m sft.03_eval --in checkpoints/base --data data/domains --out results/base/eval.json",
    "sft/eval.json": "python -m sft.03_eval --in checkpoints/sft --data data/domains --out results/sft/eval.json",
}


def sha256(p: Path) -> str:
    return hashlib.sha256(Path(p).read_bytes()).hexdigest()


def snapshot(results: Path, rels: list[str], ref: Path | None = None) -> dict:
    """Check every file first, then copy: a bad file leaves results/reference/ as it was."""
    ref = ref or results / "reference"
    index_path = ref / "index.json"
    index = json.loads(index_path.read_text()) if index_path.exists() else {"files": {}}
    plan = []
    for rel in rels:
        src = results / rel
        if not src.is_file():
            raise FileNotFoundError(f"{src} does not exist: run what makes it first ({MAKERS.get(rel, 'see its stage')})")
        entry: dict = {"sha256": sha256(src), "copied": datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds"),
                       "made_by": MAKERS.get(rel)}
        if src.suffix == ".json":
            doc = json.loads(src.read_text())
            entry.update(schema=doc.get("schema"), created=doc.get("created"), git_commit=doc.get("git_commit"),
                         machine=doc.get("machine"))
            meas = doc.get("measured") or {}
            mp = Path(meas["path"]) / "manifest.json" if meas.get("path") else None
            if mp is not None:
                if not mp.is_file() or sha256(mp) != meas.get("manifest_sha256"):
                    raise ValueError(f"{src}: the manifest it measured ({mp}) is missing or changed since; rerun the "
                                     "measurement on the current checkpoint")
                entry["manifest"] = "manifests/" + rel.replace("/", "__") + ".manifest.json"
                plan.append((mp, ref / entry["manifest"]))
        entry["copied_from"] = str(src)
        plan.append((src, ref / rel))
        index["files"][rel] = entry
    for src, dst in plan:
        dst.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(src, dst)
    for rel in rels:
        print(f"reference: {rel} ({index['files'][rel]['sha256'][:12]})")
    index_path.parent.mkdir(parents=True, exist_ok=True)
    tmp = index_path.with_suffix(".tmp")
    tmp.write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")
    tmp.replace(index_path)
    return index


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("files", nargs="*", help="results files, relative to --results")
    ap.add_argument("--all", action="store_true", help="every *.json and *.jsonl under --results (reference/ excluded)")
    ap.add_argument("--results", type=Path, default=ROOT / "results", help="results directory to copy from")
    ap.add_argument("--reference", type=Path, default=None, help="destination (default: <results>/reference)")
    a = ap.parse_args(argv)
    rels = list(a.files)
    if a.all:
        rels += sorted(str(p.relative_to(a.results)) for p in a.results.rglob("*") if p.suffix in (".json", ".jsonl")
                       and p.is_file() and "reference" not in p.relative_to(a.results).parts[:1])
    if not rels:
        ap.error("name results files or pass --all")
    with cli.input_errors(FileNotFoundError, ValueError):
        snapshot(a.results, rels, a.reference)
    return 0


if __name__ == "__main__":
    sys.exit(main())
