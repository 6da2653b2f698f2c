"""Reproducibility of the micro chain: two runs give the same files, and a run matches the committed golden.

    python -m tests.golden same  RUN_A RUN_B                      # make reproduce-check (exit 1 on any difference)
    python -m tests.golden write RUN results/reference/golden/micro_chain.json     # make golden
    python -m tests.golden check RUN results/reference/golden/micro_chain.json     # what tests/test_chain.py asserts

A RUN is what `make demo RECIPE=micro_cpu CKPT=RUN/ck DATA=RUN/data RESULTS=RUN/results FIGURES=RUN/figures`
writes. `same` compares every file of the two runs: binary files byte for byte (checkpoint weights, datasets,
figures), JSON/JSONL/text after these normalisations, each for a stated reason (EXCLUDED).
The golden holds the curves (base and SFT per-step loss, grad norm, lr, held-out losses; RL per-step reward,
pass rate, loss, grad norm, KL, mismatch) and every eval count of the run, with the host's CPU kernel level:
floating-point results differ between kernel levels (AVX2 vs AVX512), so a golden is checked on its own level.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path

# What `same` does not compare, and why. Everything else must be identical.
EXCLUDED = {
    "created, created_unix": "the time a file was written",
    "keys ending in _s or _s_this_run, 'seconds', tok_per_s*": "wall-clock timings and rates: they depend on the "
                                                                "machine's load, not on what was computed",
    "the run directory's path": "two runs live in two directories (replaced by <RUN>)",
    "staging suffixes .tmp-<pid>": "a staging directory is named by the writer's pid",
    "manifest sha256 values (full and 8/12/16-hex prefixes)": "a manifest holds its creation time, so its hash "
                                                              "differs between runs; each is replaced by the name of "
                                                              "the manifest it hashes, whose content is compared in full",
    "ISO timestamps and timing values (name=value) in text files": "the model card's provenance table prints them",
    "a manifest's sha256 of a text file": "the text file is compared itself, after the normalisations above",
    "the bytes of torch_dist mcore/.metadata (and their sha256 in manifests)": "the pickle of equal Metadata differs "
                                                                              "in byte order between runs; compared "
                                                                              "unpickled instead",
    "figures/*.png": "each figure's footer prints its sources' paths and creation times (provenance by design); the "
                     "results files they are drawn from and the executed notebooks are compared",
}
TIMING = re.compile(r"(_s|_s_this_run|^seconds.*|^tok_per_s.*|^created(_unix)?)$")
TEXT = {".json", ".jsonl", ".ipynb", ".md", ".yaml", ".yml", ".txt", ".log"}
ISO_TIME = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)?")
TIMING_VALUE = re.compile(r"\b(\w*(?:_s|_s_this_run|tok_per_s\w*))=[0-9.e+-]+")
TOL = {"rel": 1e-6, "abs": 1e-9}  # same kernel level: runs were bit-identical here; the margin is for printing only


def _manifest_names(run: Path) -> dict[str, str]:
    out = {}
    for m in sorted(run.rglob("manifest.json")):
        h = hashlib.sha256(m.read_bytes()).hexdigest()
        name = f"<manifest:{m.parent.relative_to(run)}>"
        for n in (64, 16, 12, 8):
            out[h[:n]] = name
    return out


def _normalize_text(s: str, run: Path, names: dict[str, str]) -> str:
    s = s.replace(str(run.resolve()), "<RUN>").replace(str(run), "<RUN>")
    s = re.sub(r"\.tmp-\d+", ".tmp-<pid>", s)
    s = TIMING_VALUE.sub(lambda m: f"{m.group(1)}=<timing>", ISO_TIME.sub("<time>", s))
    return re.sub(r"\b[0-9a-f]{64}\b|\b[0-9a-f]{16}\b|\b[0-9a-f]{12}\b|\b[0-9a-f]{8}\b",
                  lambda m: names.get(m.group(0), m.group(0)), s)


def _strip(o):
    if isinstance(o, dict):
        return {k: _strip(v) for k, v in o.items() if not TIMING.search(k)}
    if isinstance(o, list):
        return [_strip(x) for x in o]
    return o


def normalized(run: Path) -> dict[str, object]:
    """Every file of a run: relative path -> normalised JSON value, normalised text, or sha256 of the bytes."""
    run = Path(run)
    names, out = _manifest_names(run), {}
    everything = list(run.rglob("*"))
    links = [str(p.relative_to(run)) for p in everything if p.is_symlink()]
    if links:  # rglob does not walk a linked folder: its files would be left out of both sides, silently
        raise SystemExit(f"error: {run} holds links ({', '.join(links[:3])}): compare the directories a run wrote")
    found = sorted(p for p in everything if p.is_file())
    if not found:  # empty or missing: never "identical"
        raise SystemExit(f"error: {run} holds no files to compare: pass the directory a run wrote")
    for f in found:
        rel = str(f.relative_to(run))
        if rel.startswith("figures/") and f.suffix == ".png":
            continue
        if f.name == ".metadata" and f.parent.name == "mcore":
            import pickle

            import torch  # noqa: F401  (the pickle holds torch.distributed.checkpoint classes)

            out[rel] = pickle.loads(f.read_bytes())  # dataclasses: compared by value
            continue
        if f.suffix not in TEXT:
            out[rel] = "sha256:" + hashlib.sha256(f.read_bytes()).hexdigest()
            continue
        text = _normalize_text(f.read_text(errors="replace"), run, names)
        if f.suffix in (".json", ".ipynb"):
            out[rel] = _strip(json.loads(text))
            if f.name == "manifest.json" and isinstance(out[rel].get("files"), dict):
                out[rel]["files"] = {k: ("<compared as text>" if Path(k).suffix in TEXT else
                                         "<compared unpickled>" if k.endswith("mcore/.metadata") else v)
                                     for k, v in out[rel]["files"].items()}
        elif f.suffix == ".jsonl":
            out[rel] = [_strip(json.loads(x)) for x in text.splitlines() if x.strip()]
        else:
            out[rel] = text
    return out


def differences(a, b, path: str = "", tol: dict | None = None) -> list[str]:
    """Where two normalised values differ (floats within `tol` when given, else exactly)."""
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{path}/{k}: only in {'first' if k in a else 'second'}" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += differences(a[k], b[k], f"{path}/{k}", tol)
        return out
    if isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            return [f"{path}: {len(a)} items != {len(b)}"]
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in differences(x, y, f"{path}[{i}]", tol)]
    if tol and isinstance(a, float) and isinstance(b, (int, float)) and not isinstance(b, bool):
        ok = math.isclose(a, b, rel_tol=tol["rel"], abs_tol=tol["abs"]) or (math.isnan(a) and math.isnan(b))
        return [] if ok else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {str(a)[:120]!r} != {str(b)[:120]!r}"]


def cpu_level() -> str:
    import torch

    return torch.backends.cpu.get_cpu_capability()


RL_KEYS = ("step", "reward", "pass_rate", "loss", "grad_norm", "kl_ref", "mismatch_abs", "clip_frac", "groups_used",
           "positions", "truncated_frac", "zero_var_frac", "infra_errors")


def extract(run: Path) -> dict:
    """The curves and eval counts of one micro-chain run (the golden's content)."""
    run = Path(run)
    norm = normalized(run)
    curves = {st: norm[f"ck/{st}/metrics.jsonl"] for st in ("base", "sft")}
    curves["rl"] = [{k: r[k] for k in RL_KEYS if k in r} for r in norm["results/rl/metrics.jsonl"]]
    evals = {f"quick/{st}": norm[f"results/{st}/eval.json"]["per_family"] for st in ("base", "sft")}
    evals["quick/rl"] = {k: norm["results/rl/eval.json"][k] for k in ("per_family", "per_family_at_start", "paired_delta")}
    for st in ("base", "sft", "rl", "fast"):
        evals[f"full/{st}"] = {s: v["summary"] for s, v in norm[f"results/eval/{st}.json"]["suites"].items()}
    return {"curves": curves, "evals": evals}


def write(run: Path, out: Path) -> None:
    import subprocess

    commit = subprocess.run(["git", "rev-parse", "HEAD"], capture_output=True, text=True).stdout.strip()
    doc = {"schema": {"name": "golden.micro_chain", "version": 1}, "cpu_level": cpu_level(), "git_commit": commit,
           "recipe": "micro_cpu", "tolerance": TOL, **extract(run)}
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(doc, indent=1, sort_keys=True) + "\n")
    print(f"golden -> {out} (cpu level {doc['cpu_level']}, commit {commit[:8]})")


def check(run: Path, golden: Path) -> list[str]:
    g = json.loads(Path(golden).read_text())
    fresh = extract(run)
    return differences({"curves": g["curves"], "evals": g["evals"]}, fresh, tol=g["tolerance"])


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cmd", choices=["same", "write", "check"])
    ap.add_argument("a", type=Path, help="a run directory")
    ap.add_argument("b", type=Path, help="the second run (same) or the golden file (write, check)")
    a = ap.parse_args(argv)
    if a.cmd == "write":
        write(a.a, a.b)
        return 0
    diffs = check(a.a, a.b) if a.cmd == "check" else differences(normalized(a.a), normalized(a.b))
    for d in diffs[:200]:
        print(d)
    what = f"{a.a} vs golden {a.b}" if a.cmd == "check" else f"{a.a} vs {a.b}"
    print(f"{'identical' if not diffs else f'{len(diffs)} differences'}: {what}" +
          ("" if diffs or a.cmd == "check" else f" (excluded: {'; '.join(f'{k} ({v})' for k, v in EXCLUDED.items())})"))
    return 1 if diffs else 0


if __name__ == "__main__":
    sys.exit(main())
