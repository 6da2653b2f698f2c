"""The Makefile's chain is safe under `make -j`: every input of a step is decided before any rule runs and is
made before the step reads it. Checked on make's own dry run of a fresh clone (`make -n -p --trace GOAL`): for each
step, every other step writing what it reads is one of its (transitive) prerequisites. Cheap: no command runs.
"""
from __future__ import annotations

import re
import shlex
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# flags naming what a step reads; --out (and rl's --results) name what it writes
READS = ("--in", "--data", "--base", "--corpus", "--tokenizer", "--fast", "--metrics", "--results")
WRITES = {"--out"}
WRITES_BY_SCRIPT = {"rl/01_train.py": {"--results"}}
# the model cards of fast and export list the results files measuring their target that exist when written: a
# writer of those may come before or after the card (the sequential demo's order: after), never beside it
CARD_SCRIPTS = ("serving/02_fast.py", "serving/01_export.py")


def dry_run(tmp: Path, *goals: str, extra: tuple = ()) -> tuple[dict, dict]:
    """({target: (prerequisites, order-only)}, {target: its command's words}) of make's plan on an empty tree."""
    args = [f"CKPT={tmp}/ck", f"DATA={tmp}/data", f"RESULTS={tmp}/r", f"FIGURES={tmp}/f", "RECIPE=micro_cpu", *extra]
    out = subprocess.run(["make", "-n", "-p", "--trace", *goals, *args], cwd=ROOT, capture_output=True, text=True,
                         timeout=120).stdout
    graph, cmds, target = {}, {}, None
    for line in out.splitlines():
        m = re.match(r"^\S+:\d+: (?:update target '([^']+)'|target '([^']+)' does not exist)", line)
        if m:
            target = m.group(1) or m.group(2)
            cmds[target] = []
            continue
        if line.startswith("# Make data base"):
            target = None
        elif target is not None and line.strip():
            cmds[target] += shlex.split(line.rstrip("\\"))
        m = re.match(r"^([^\s#:=][^:=]*?):(?![:=])\s*(.*)$", line)
        if m and target is None:
            normal, _, order = m.group(2).partition("|")
            graph[m.group(1)] = (normal.split(), order.split())
    return graph, cmds


def script_of(words: list[str]) -> str:
    """The stage script a command runs (`python -m sft.02_train` -> sft/02_train.py), or ''."""
    mods = [b for a, b in zip(words, words[1:]) if a == "-m" and "." in b and not b.startswith("torch.")]
    return mods[0].replace(".", "/") + ".py" if mods else ""


def scripts_of(cmds: dict) -> list[str]:
    """The scripts of a plan's commands, in order; `python -m domains` counts as "domains"."""
    return [s for words in cmds.values() for a, b in zip(words, words[1:]) if a == "-m"
            for s in [script_of([a, b]) or (b if b == "domains" else "")] if s]


def ancestors(graph: dict, target: str) -> set[str]:
    seen, todo = set(), [target]
    while todo:
        for p in (lambda n, o: n + o)(*graph.get(todo.pop(), ([], []))):
            if p not in seen:
                seen.add(p)
                todo.append(p)
    return seen


def io(words: list[str]) -> tuple[list[str], list[str]]:
    """(paths read, paths written) of one command, from its flags."""
    script = script_of(words)
    writes = WRITES | WRITES_BY_SCRIPT.get(script, set())
    r, w = [], []
    for flag, value in zip(words, words[1:]):
        if flag in writes:
            w.append(value)
        elif flag in READS:
            r.append(value)
    return r, w


def overlaps(a: str, b: str) -> bool:
    return a == b or a.startswith(b.rstrip("/") + "/") or b.startswith(a.rstrip("/") + "/")


def races(graph: dict, cmds: dict) -> list[str]:
    """Each (reader, writer) pair of steps that make may run in either order or side by side."""
    steps = {t: io(words) for t, words in cmds.items()}
    out = []
    for reader, (reads, _) in steps.items():
        card = next((words[words.index("--in") + 1] for words in [cmds[reader]]
                     if script_of(words) in CARD_SCRIPTS), None)  # the card's target
        before = ancestors(graph, reader)
        for writer, (_, writes) in steps.items():
            if writer == reader:
                continue
            for r in reads:
                if not any(overlaps(r, w) for w in writes) or writer in before:
                    continue
                if card and r.endswith("/r") and (card not in cmds[writer] or reader in ancestors(graph, writer)):
                    continue  # results of other checkpoints, or the target's evals after the card (sequential demo)
                out.append(f"{reader} reads {r}, written by {writer}, which is not made before it")
    return out


@pytest.mark.parametrize("goals", [("demo",), ("rl", "eval"), ("fast", "eval", "figures"), ("export", "eval-sft"),
                                   ("sft", "eval-rope", "bench-longctx"), ("rl", "bench-rl")])
def test_every_step_reads_only_what_is_made_before_it(tmp_path, goals):
    graph, cmds = dry_run(tmp_path, *goals)
    assert len(cmds) > 3, cmds  # the dry run planned the chain
    assert races(graph, cmds) == []


def test_demo_evaluates_every_checkpoint_it_builds_after_building_it(tmp_path):
    graph, cmds = dry_run(tmp_path, "demo")
    for stage in ("base", "sft", "rl", "fast"):
        res = f"{tmp_path}/r/eval/{stage}.json"
        assert res in graph["eval"][0] and f"{tmp_path}/ck/{stage}/manifest.json" in ancestors(graph, res)
    # the card of fast comes before the full eval of its target (the sequential order), and figures come last
    assert f"{tmp_path}/ck/fast/manifest.json" in ancestors(graph, f"{tmp_path}/r/eval/rl.json")
    assert {"eval", "eval-sft", "rl", "fast"} <= ancestors(graph, "figures")


def test_eval_builds_no_checkpoint_it_finds(tmp_path):
    """An imported base (no tokenizer, corpus or data beside it) is evaluated, not retrained over the import."""
    (tmp_path / "ck" / "base").mkdir(parents=True)
    (tmp_path / "ck" / "base" / "manifest.json").write_text("{}")
    graph, cmds = dry_run(tmp_path, "eval")
    scripts = scripts_of(cmds)
    assert scripts == ["eval/01_eval.py"], scripts


def test_quick_eval_never_overwrites_rl_results(tmp_path):
    """results/rl/eval.json is rl/01_train.py's (schema rl.eval): sft/03_eval.py's pattern must not claim it."""
    (tmp_path / "ck" / "rl").mkdir(parents=True)
    (tmp_path / "ck" / "rl" / "manifest.json").write_text("{}")
    r = subprocess.run(["make", "-n", f"{tmp_path}/r/rl/eval.json", f"CKPT={tmp_path}/ck", f"RESULTS={tmp_path}/r"],
                       cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert "sft/03_eval.py" not in r.stdout and "No rule to make target" in r.stderr, r.stdout + r.stderr


@pytest.mark.parametrize("imported, pretrains", [(True, False), (False, True)])
def test_sft_over_an_imported_base_never_pretrains_over_it(tmp_path, imported, pretrains):
    """After `make import-base`, `make sft` fine-tunes the import: it has no corpus or tokenizer to be rebuilt
    from, so their absence must not send make to pretrain a base over it. A pretrained base without its tokenizer
    is rebuilt (the control: the same tree but for the import's provenance key)."""
    (tmp_path / "ck" / "base").mkdir(parents=True)
    key = "imported_from" if imported else "metrics"
    (tmp_path / "ck" / "base" / "manifest.json").write_text(f'{{"stage": "base", "{key}": {{}}}}')
    _, cmds = dry_run(tmp_path, "sft")
    scripts = scripts_of(cmds)
    assert "sft/02_train.py" in scripts, scripts
    assert ("pretrain_ckpt/03_pretrain.py" in scripts) is pretrains, scripts


@pytest.mark.parametrize("imported", [False, True])
def test_demo_real_runs_its_own_chain_on_the_import_in_its_own_directories(tmp_path, imported):
    """make demo-real: import SmolLM2 unless imported already, then data -> SFT -> RL -> eval of base and RL ->
    figures, every step on the smollm2_cpu recipes and under <dir>/real; nothing pretrains over the import."""
    if imported:
        (tmp_path / "ck" / "real" / "base").mkdir(parents=True)
        (tmp_path / "ck" / "real" / "base" / "manifest.json").write_text('{"stage": "base", "imported_from": {}}')
    r = subprocess.run(["make", "-n", "demo-real", f"CKPT={tmp_path}/ck", f"DATA={tmp_path}/data",
                        f"RESULTS={tmp_path}/r", f"FIGURES={tmp_path}/f"], cwd=ROOT, capture_output=True, text=True,
                       timeout=120)
    lines = r.stdout.replace("\\\n", " ").splitlines()  # a recipe line continued with a backslash is one command
    steps = [shlex.split(ln) for ln in lines if " -m " in ln and not ln.startswith("make")]
    scripts = [script_of(w) or w[w.index("-m") + 1] for w in steps]
    assert ("pretrain_ckpt/04_import_hf.py" in scripts) is not imported, r.stdout + r.stderr
    if not imported:  # a dry run imports nothing, so its second make plans over a missing base: only the import counts
        assert steps[0][-4:] == ["--base", "smollm2", "--out", f"{tmp_path}/ck/real/base"], steps[0]
        return
    assert "pretrain_ckpt/03_pretrain.py" not in scripts
    for script in ("sft/02_train.py", "rl/01_train.py", "notebooks"):
        assert script in scripts, (script, scripts)
    evals = [w[w.index("--in") + 1] for w in steps if script_of(w) == "eval/01_eval.py"]
    assert sorted(evals) == [f"{tmp_path}/ck/real/base", f"{tmp_path}/ck/real/rl"]
    for words in steps:
        paths = [w for w in words if w.startswith(str(tmp_path))]
        assert paths and all("/real" in p for p in paths), words
        if "--recipe" in words:
            assert words[words.index("--recipe") + 1] == "smollm2_cpu", words


def test_bench_fast_real_benches_the_real_rl_fast_variant_in_the_real_directories(tmp_path):
    """make bench-fast-real (= make bench-fast RECIPE=smollm2_cpu on */real): the fast variant is built from the
    real RL checkpoint with the smollm2_cpu serving recipe, and the bench compares it with that checkpoint, in bf16
    too, with the pass rates on 10 eval tasks per domain."""
    (tmp_path / "ck" / "real" / "rl").mkdir(parents=True)
    (tmp_path / "ck" / "real" / "rl" / "manifest.json").write_text('{"stage": "rl"}')
    r = subprocess.run(["make", "-n", "bench-fast-real", f"CKPT={tmp_path}/ck", f"DATA={tmp_path}/data",
                        f"RESULTS={tmp_path}/r"], cwd=ROOT, capture_output=True, text=True, timeout=120)
    lines = r.stdout.replace("\\\n", " ").splitlines()
    steps = {w[w.index("-m") + 1]: w for w in (shlex.split(ln) for ln in lines if " -m " in ln)
             if w[w.index("-m") + 1].startswith("serving.")}
    fast, bench = steps["serving.02_fast"], steps["serving.bench_fast"]
    assert fast[fast.index("--in") + 1] == f"{tmp_path}/ck/real/rl" and fast[fast.index("--recipe") + 1] == "smollm2_cpu"
    assert bench[bench.index("--fast") + 1] == f"{tmp_path}/ck/real/fast"
    assert bench[bench.index("--out") + 1] == f"{tmp_path}/r/real/bench/fast.json"
    assert "standard_bf16" in bench[bench.index("--sides") + 1] and bench[bench.index("--per-domain") + 1] == "10"


def test_the_real_recipe_on_default_directories_works_in_its_own():
    """`make bench-fast RECIPE=smollm2_cpu` (no CKPT/DATA/RESULTS) benches checkpoints/real, never the tiny default's
    checkpoints/fast with the real base's recipe; the tiny default's own bench-fast is unchanged."""
    def bench_cmd(*args):
        r = subprocess.run(["make", "-n", "bench-fast", *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        return next(shlex.split(ln) for ln in r.stdout.replace("\\\n", " ").splitlines() if "serving.bench_fast" in ln)

    real = bench_cmd("RECIPE=smollm2_cpu")
    assert real[real.index("--fast") + 1] == "checkpoints/real/fast"
    assert real[real.index("--out") + 1] == "results/real/bench/fast.json" and "--natural-requests" in real
    tiny = bench_cmd()
    assert tiny[tiny.index("--fast") + 1] == "checkpoints/fast" and "--ablations" in tiny
