"""Every numbered entry script (`<stage>/NN_*.py`, and `python -m launch`) documents itself with commands that work:
its docstring opens (after the summary) with a block of commands running it as a module (`python -m sft.02_train`),
every recipe it names exists in the stage whose script the command runs, every `make` target and variable it names
is the Makefile's, `--help` exits 0, and a run by path says in one line how to run it. The notebooks/NN_*.py match the pattern but are jupytext notebooks run by `python -m notebooks` (markdown
header, no arguments), so they are left out.
"""
from __future__ import annotations

import ast
import re
import subprocess
import sys
from concurrent.futures import ThreadPoolExecutor
from functools import cache
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
SCRIPTS = sorted(p.relative_to(ROOT).as_posix() for p in ROOT.glob("*/[0-9][0-9]_*.py")
                 if p.parent.name != "notebooks") + ["launch/__main__.py"]
COMMAND = re.compile(r"^(#|python |torchrun |make |\.venv(-launch)?/bin/python |[A-Z_]+=\S* )")
SCRIPT_MODULE = re.compile(r"-m (pretrain_ckpt|sft|rl|eval|serving|launch)\b")


def module(script: str) -> str:
    """sft/02_train.py -> sft.02_train; launch/__main__.py -> launch."""
    return script.removesuffix(".py").removesuffix("/__main__").replace("/", ".")


def doc(script: str) -> str:
    return ast.get_docstring(ast.parse((ROOT / script).read_text())) or ""


def command_lines(text: str) -> list[str]:
    """The docstring's indented lines (a backslash-newline in a docstring already joins two lines)."""
    return [line.strip() for line in text.splitlines() if line.startswith("    ")]


@cache
def make_database() -> tuple[set[str], set[str]]:
    """(targets, variables) that the Makefile and its stage fragments define."""
    out = subprocess.run(["make", "-p", "-n", "help"], cwd=ROOT, capture_output=True, text=True, timeout=120).stdout
    targets = {m.group(1) for m in re.finditer(r"^([a-zA-Z][\w./-]*):(?![:=])", out, re.M)}
    variables = {m.group(1) for m in re.finditer(r"^([A-Z][A-Z0-9_]*) :?= ", out, re.M)}
    return targets, variables


@pytest.mark.parametrize("script", SCRIPTS)
def test_docstring_opens_with_commands_that_run_the_script(script):
    paragraphs = re.split(r"\n\s*\n", doc(script))
    assert len(paragraphs) > 1, f"{script}: no docstring, or no command block after its summary line"
    block = paragraphs[1].splitlines()
    assert all(ln.startswith("    ") for ln in block), f"{script}: the paragraph after the summary is not commands"
    lines = command_lines(paragraphs[1])
    assert all(COMMAND.match(ln) for ln in lines), f"{script}: not a command or comment: {lines}"
    me = f"-m {module(script)}"
    assert any(me in ln for ln in lines if not ln.startswith("#")), f"{script}: its command block never runs it"


@pytest.mark.parametrize("script", SCRIPTS)
def test_recipes_named_in_the_docstring_exist(script):
    own, text = script.split("/")[0], doc(script)
    missing = []
    for line in command_lines(text) + re.findall(r"`([^`]+)`", text):  # commands, and `...` spans in the prose
        stage = (SCRIPT_MODULE.search(line.split(" -- ", 1)[-1]) or [None, own])[1]  # the stage of the script it runs
        missing += [f"{stage}/recipes/{name}.yaml" for name in re.findall(r"--recipe[ =]([\w.-]+)", line)]
    missing += re.findall(r"\b\w+/recipes/[\w.-]+\.yaml", text)  # recipe files named by path anywhere
    missing = [m for m in missing if not (ROOT / m).is_file()]
    assert not missing, f"{script} names recipes that do not exist: {sorted(set(missing))}"


@pytest.mark.parametrize("script", SCRIPTS)
def test_make_targets_and_variables_named_in_the_docstring_exist(script):
    targets, variables = make_database()
    text = doc(script)
    calls = re.findall(r"`(?:[A-Z_]+=\S* )*make ([^`]+)`", text)
    calls += [m for ln in command_lines(text) for m in re.findall(r"^(?:[A-Z_]+=\S* )*make (.+)$", ln)]
    bad = []
    for call in calls:
        for word in call.split("#")[0].split():
            name, eq, _ = word.partition("=")
            if word.startswith("-") or "<" in word:
                continue
            if eq and name not in variables or not eq and word not in targets:
                bad.append(word)
    for var in re.findall(r"\b([A-Z][A-Z_]+)=\S* make\b", text):
        if var not in variables:
            bad.append(var + "=")
    assert not bad, f"{script} names make targets/variables that do not exist: {bad}"


def test_help_exits_0():
    """`--help` of every script, in parallel (several import torch/megatron before parsing: ~10 s each)."""
    def run(script):
        r = subprocess.run([sys.executable, "-m", module(script), "--help"], cwd=ROOT, capture_output=True, text=True, timeout=240)
        return script, r.returncode, r.stderr[-1500:]

    with ThreadPoolExecutor(4) as ex:
        failed = [f"{s}: exit {rc}\n{err}" for s, rc, err in ex.map(run, SCRIPTS) if rc != 0]
    assert not failed, "\n".join(failed)


@pytest.mark.parametrize("script", ["sft/02_train.py", "eval/02_compare.py"])
def test_a_run_by_path_says_how_to_run_it(script):
    """`python sft/02_train.py` cannot import the project (no sys.path inserts): one line names the module form."""
    r = subprocess.run([sys.executable, script, "--help"], cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert r.returncode != 0 and r.stderr.strip().splitlines() == [
        f"error: run it from the repository root as a module: python -m {module(script)} ..."], r.stderr
