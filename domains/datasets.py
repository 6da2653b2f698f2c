"""`python -m domains datasets`: HF datasets (save_to_disk) for SFT, RL and eval, plus a manifest written last.

    .venv/bin/python -m domains datasets --out data/domains --sft-per-domain 50 --rl-per-domain 50 \\
        --eval-per-domain 10 --seed 0 --max-difficulty 1 [--corpus-per-domain 20] [--families math,agent] [--overwrite]

Layout of DIR (built in DIR.tmp-<pid>, renamed into place when complete):
    sft/   train domains: domain, family, split, difficulty, seed, messages (JSON: prompt + oracle trajectory)
    rl/    train domains: domain, family, split, difficulty, seed, task (Task JSON), prompt (messages JSON)
    eval/  train + held-out domains, seeds disjoint from sft/rl: same columns as rl/
    corpus/ train domains: domain, family, split, difficulty, seed, text (oracle demonstration as a plain
           transcript, chat.render_plain): mid-training text for the base corpus (pretrain_ckpt/01_corpus.py
           --domains); never a held-out domain, so held-out results stay a test of generalization
    manifest.json  stage "data", config, seed, git commit, counts per family and split, sha256 of every file
Seeds: sft uses base + [0, 1e6), rl base + [1e6, 2e6), eval base + [2e6, 3e6), corpus base + [3e6, 4e6) with
base = seed * 1e7, so they never overlap. Difficulty cycles through the domain's levels <= --max-difficulty.
"""
from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

from domains.chat import render_plain
from domains.core import Domain

SFT_OFFSET, RL_OFFSET, EVAL_OFFSET, CORPUS_OFFSET, STRIDE = 0, 1_000_000, 2_000_000, 3_000_000, 10_000_000
DEMO_KINDS = ("sft", "corpus")  # rows that carry a verified oracle demonstration (messages or plain text)


def seeds_for(kind: str, seed: int, n: int) -> list[int]:
    off = {"sft": SFT_OFFSET, "rl": RL_OFFSET, "eval": EVAL_OFFSET, "corpus": CORPUS_OFFSET}[kind]
    if n > RL_OFFSET:
        raise ValueError(f"at most {RL_OFFSET} rows per domain and kind, got {n}")
    return [seed * STRIDE + off + i for i in range(n)]


def _levels(d: Domain, max_difficulty: int) -> list[int]:
    lv = [x for x in d.difficulties if x <= max_difficulty]
    return lv or [min(d.difficulties)]


def _git_commit() -> str | None:
    try:
        return subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True, timeout=10,
                              cwd=Path(__file__).resolve().parent).stdout.strip() or None
    except Exception:  # noqa: BLE001 - provenance is best effort outside a checkout
        return None


def _sha256(p: Path) -> str:
    h = hashlib.sha256()
    with open(p, "rb") as f:
        for chunk in iter(lambda: f.read(1 << 20), b""):
            h.update(chunk)
    return h.hexdigest()


def _row(d: Domain, kind: str, s: int, difficulty: int, pool: Any) -> dict:
    t = d.generate(s, difficulty)
    row = {"domain": d.name, "family": d.family, "split": d.split, "difficulty": t.difficulty, "seed": s}
    if kind in DEMO_KINDS:
        for _ in range(3):  # an infra_error says nothing about the demo: retry a transient sandbox failure
            traj = d.solve(t, pool)
            r = d.verify(t, traj, pool)
            if not r.infra_error:
                break
        if not r.passed:  # never train on a demonstration its own verifier rejects
            raise RuntimeError(f"oracle demonstration failed verification: {d.name} seed {s}: {r.to_dict()}")
        if kind == "sft":
            row["messages"] = json.dumps(t.messages + traj)
        else:  # pretraining text: the same demonstration as a plain transcript, no chat special tokens
            row["text"] = render_plain(t.messages + traj)
    else:
        row["task"] = t.to_json()
        row["prompt"] = json.dumps(t.messages)
    return row


def build_rows(domains: list[Domain], kind: str, per_domain: int, seed: int, max_difficulty: int, pool: Any,
               workers: int = 4) -> list[dict]:
    jobs = [(d, s, _levels(d, max_difficulty)[i % len(_levels(d, max_difficulty))])
            for d in domains for i, s in enumerate(seeds_for(kind, seed, per_domain))]
    if kind not in DEMO_KINDS or not any(d.needs_sandbox for d in domains):
        return [_row(d, kind, s, k, pool) for d, s, k in jobs]
    with ThreadPoolExecutor(max(1, workers)) as ex:  # sandbox demos wait on subprocesses; map keeps the order
        return list(ex.map(lambda j: _row(j[0], kind, j[1], j[2], pool), jobs))


def write_datasets(out: str, domains: list[Domain], sft_per_domain: int, rl_per_domain: int, eval_per_domain: int,
                   seed: int, max_difficulty: int, pool: Any = None, overwrite: bool = False,
                   config: dict | None = None, workers: int = 4, corpus_per_domain: int = 0) -> dict:
    dest = Path(out)
    if dest.exists() and any(dest.iterdir()):
        if not overwrite:
            raise FileExistsError(f"{dest} exists and is not empty: pass --overwrite or choose another --out")
        if not (dest / "manifest.json").exists():
            raise FileExistsError(f"{dest} has no manifest.json, so `domains datasets` did not write it; "
                                  "refusing to replace it")
    tmp = dest.parent / f"{dest.name}.tmp-{os.getpid()}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(parents=True)
    try:
        return _write_into(tmp, dest, domains, sft_per_domain, rl_per_domain, eval_per_domain, seed, max_difficulty,
                           pool, config, workers, corpus_per_domain)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)  # only left over if we failed before the rename


def _write_into(tmp: Path, dest: Path, domains: list[Domain], sft_per_domain: int, rl_per_domain: int,
                eval_per_domain: int, seed: int, max_difficulty: int, pool: Any, config: dict | None,
                workers: int, corpus_per_domain: int = 0) -> dict:
    from datasets import Dataset  # lazy: the library itself does not need datasets

    t0 = time.time()
    train = [d for d in domains if d.split == "train"]
    plan = {"sft": (train, sft_per_domain), "rl": (train, rl_per_domain), "eval": (domains, eval_per_domain),
            "corpus": (train, corpus_per_domain)}
    parts, part_seconds = {}, {}
    for name, (doms, n) in plan.items():  # timed per part: where `make data` spends its minutes
        t_part = time.time()
        parts[name] = build_rows(doms, name, n, seed, max_difficulty, pool, workers)
        part_seconds[name] = round(time.time() - t_part, 1)
    counts: dict[str, Any] = {}
    for name, rows in parts.items():
        if rows:
            Dataset.from_list(rows).save_to_disk(str(tmp / name))
        else:
            (tmp / name).mkdir()
        counts[name] = {"rows": len(rows),
                        "by_family": dict(sorted(Counter(r["family"] for r in rows).items())),
                        "by_split": dict(sorted(Counter(r["split"] for r in rows).items()))}
    files = {str(p.relative_to(tmp)): _sha256(p) for p in sorted(tmp.rglob("*")) if p.is_file()}
    manifest = {"stage": "data", "config": config or {}, "seed": seed, "git_commit": _git_commit(),
                "created_unix": int(time.time()), "seconds": round(time.time() - t0, 1), "seconds_by_part": part_seconds,
                "domains": {"train": sorted(d.name for d in train),
                            "heldout": sorted(d.name for d in domains if d.split == "heldout")},
                "counts": counts, "files": files}
    with open(tmp / "manifest.json.part", "w") as f:
        json.dump(manifest, f, indent=1, sort_keys=True)
    os.replace(tmp / "manifest.json.part", tmp / "manifest.json")  # manifest last: its presence means complete
    if dest.exists():
        old = dest.parent / f"{dest.name}.old-{os.getpid()}"
        os.replace(dest, old)
        os.replace(tmp, dest)
        shutil.rmtree(old, ignore_errors=True)
    else:
        os.replace(tmp, dest)
    return manifest
