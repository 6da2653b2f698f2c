"""model/cli.py, the command line every entry script shares: its error wrapper, its parser, and the rule, read off
the source, that entry scripts leave bad input to it.

Bad input (a ConfigError, a CheckpointError, or a type a script names for its own checks) is one line
`error: <message>` on stderr and exit status 2; anything else keeps its traceback. An entry script does not print its
own error line for bad input, exit 2 itself or build its own ArgumentParser, and it stops a run by path with the
module form of its command before its first project import.
"""
from __future__ import annotations

import re
from pathlib import Path

import pytest

from model import cli
from model.config import ConfigError
from model.manifest import CheckpointError

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("model", "domains", "sandbox", "pretrain_ckpt", "sft", "rl", "eval", "serving", "launch", "notebooks")
# Files that keep their own bad-input handling, each with the reason.
OWN = {"model/cli.py": "the wrapper itself",
       "sandbox/cli.py": "sandbox/ imports nothing of the project (tests/test_layout.py)",
       "sandbox/bench.py": "sandbox/ imports nothing of the project (tests/test_layout.py)",
       **{s: "the peer arm of bench-peers: runs by path in TRL's environment (.venv-peers), no model/"
          for s in ("sft/peer_trl.py", "rl/peer_trl_grpo.py")}}
PEERS = {"sft/peer_trl.py", "rl/peer_trl_grpo.py"}  # run by path in another venv: no run-by-path guard either
# Known violations, waiting on a file another change owns. The test fails once one is fixed: delete its entry then.
PENDING: set[str] = set()
RULES = {  # what an entry script leaves to model/cli.py
    "exits 2 itself": re.compile(r"\breturn 2\b|\bexit\(2\)|SystemExit\(2\)"),
    "stops with its own error line": re.compile(r"SystemExit\(f?[\"']error:"),
    "prints its own error line for ConfigError/CheckpointError":
        re.compile(r"except\b[^:\n]*\b(ConfigError|CheckpointError)\b[^:\n]*:\s*\n\s*print\(f?[\"']error:"),
    "builds its own ArgumentParser": re.compile(r"\bArgumentParser\("),
}
GUARD = ('if not __package__:  # run by path: the project\'s packages import from the repository root, as modules\n'
         '    sys.exit("error: run it from the repository root as a module: python -m {module} ...")\n')
PROJECT_IMPORT = re.compile(rf"^(from|import) ({'|'.join(FOLDERS)})\b", re.M)


def sources() -> list[str]:
    return sorted(p.relative_to(ROOT).as_posix() for f in FOLDERS for p in (ROOT / f).rglob("*.py")
                  if "tests" not in p.relative_to(ROOT).parts)


def entry_scripts() -> list[str]:
    """Every module run as a program: `python -m <module>` of a file with a __main__ block, or a package's
    __main__.py (sandbox/ aside: it imports nothing of the project, so it runs from anywhere)."""
    return [s for s in sources() if not s.startswith("sandbox/") and s not in PEERS
            and (s.endswith("/__main__.py") or 'if __name__ == "__main__":' in (ROOT / s).read_text())]


def broken_rules(text: str) -> list[str]:
    return [why for why, rule in RULES.items() if rule.search(text)]


# ---- the rule, at grep level ---------------------------------------------------------------------------------
def test_no_script_handles_bad_input_itself():
    found = {s: broken_rules((ROOT / s).read_text()) for s in sources() if s not in OWN}
    bad = {s: why for s, why in found.items() if why and s not in PENDING}
    assert not bad, f"use model/cli.py (parser, input_errors, fail) instead: {bad}"
    fixed = sorted(s for s in PENDING if not found.get(s))
    assert not fixed, f"{fixed} follow the rule now: delete them from PENDING"


@pytest.mark.parametrize("text,why", [
    ('    except ConfigError as e:\n        print(f"error: {e}", file=sys.stderr)\n', "prints its own error line"),
    ("        return 2\n", "exits 2 itself"),
    ('        raise SystemExit(f"error: {x} is unknown")\n', "stops with its own error line"),
    ("    ap = argparse.ArgumentParser(description=__doc__)\n", "builds its own ArgumentParser"),
])
def test_the_rules_catch_what_they_name(text, why):
    assert any(r.startswith(why) for r in broken_rules(text)), why


def test_a_step_failure_may_still_print_its_own_line_and_exit_1():
    """Not bad input: a failed step or server says so and exits 1 (serving/02_fast.py, serving/03_serve.py)."""
    step_failure = '    except (RuntimeError, ValueError) as e:\n        print(f"error: {e}")\n        return 1\n'
    assert not broken_rules(step_failure)


def test_every_entry_script_stops_a_run_by_path_before_its_first_project_import():
    scripts = entry_scripts()
    assert {"sft/02_train.py", "launch/__main__.py", "model/plan.py", "domains/__main__.py"} <= set(scripts)
    bad = []
    for s in scripts:
        text = (ROOT / s).read_text()
        module = s.removesuffix(".py").removesuffix("/__main__").replace("/", ".")
        guard = text.find(GUARD.format(module=module))
        first = PROJECT_IMPORT.search(text)
        if guard < 0 or first and first.start() < guard:
            bad.append(s)
    assert not bad, f"these lack the run-by-path guard (model/cli.py's docstring) before their project imports: {bad}"


# ---- the wrapper ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize("exc", [ConfigError("train.stpes is not a key of train"),
                                 CheckpointError("ckpt: no manifest.json; build it first")])
def test_bad_input_is_one_stderr_line_and_exit_2(capsys, exc):
    with pytest.raises(SystemExit) as e:
        with cli.input_errors():
            raise exc
    out = capsys.readouterr()
    assert e.value.code == 2 and out.err == f"error: {exc}\n" and out.out == ""


def test_a_scripts_own_input_types_and_prefix(capsys):
    with pytest.raises(SystemExit) as e:
        with cli.input_errors(FileNotFoundError, prefix="--domains: "):
            raise FileNotFoundError("x.json not found\n  pass a file")
    assert e.value.code == 2 and capsys.readouterr().err == "error: --domains: x.json not found; pass a file\n"


@pytest.mark.parametrize("exc", [RuntimeError("a bug"), KeyError("k"), ValueError("not named by the script")])
def test_an_unexpected_exception_is_not_swallowed(capsys, exc):
    with pytest.raises(type(exc)) as e:
        with cli.input_errors(FileNotFoundError):
            raise exc
    assert e.value is exc and capsys.readouterr().err == ""


def test_fail_and_a_clean_block(capsys):
    with cli.input_errors():
        x = 1
    assert x == 1 and capsys.readouterr().err == ""
    with pytest.raises(SystemExit) as e:
        cli.fail("mixture names families ['nope']")
    assert e.value.code == 2 and capsys.readouterr().err == "error: mixture names families ['nope']\n"


# ---- the parser ----------------------------------------------------------------------------------------------
def test_parser_path_and_recipe_arguments():
    ap = cli.parser("Doc.\n\n    python -m sft.02_train", "sft", ["data"], inp="parent", model_config="json", out="dir")
    cli.recipe_args(ap, "sft", "data.num_demos=500")
    a = ap.parse_args(["--in", "a", "--model-config", "b", "--out", "c", "--set", "x.y=1", "--set", "z=2"])
    assert (a.inp, a.model_config, a.out) == (Path("a"), Path("b"), Path("c"))
    assert a.recipe == "tiny_cpu" and a.overrides == ["x.y=1", "z=2"]
    text = ap.format_help()
    assert "    python -m sft.02_train" in text  # the docstring as written
    assert "--set KEY=VALUE" in text and "e.g. --set data.num_demos=500" in text and "sft/recipes/<name>.yaml" in text
    assert "recipe fields (sft/recipes/<name>.yaml" in text and "num_demos" in text and "  train:" not in text
    with pytest.raises(SystemExit):  # a path option is required
        ap.parse_args(["--in", "a", "--out", "c"])
