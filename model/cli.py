"""The command line every entry script shares: its stage arguments, and bad input as one line with exit status 2.

    import sys
    from pathlib import Path

    if not __package__:  # run by path: the project's packages import from the repository root, as modules
        sys.exit("error: run it from the repository root as a module: python -m rl.01_train ...")

    from model import cli, loop, manifest, recipe  # noqa: E402
    from model.config import ConfigError  # noqa: E402


    def main(argv=None) -> int:
        ap = cli.parser(__doc__, "rl", inp="parent checkpoint (checkpoints/sft)",
                        data="domains datasets with rl/ and eval/ (data/domains)",
                        out="output checkpoint directory (checkpoints/rl)")
        ap.add_argument("--results", type=Path, default=Path("results/rl"), help="where metrics.jsonl and eval.json go")
        cli.recipe_args(ap, "rl", "train.steps=4 --set sched.mode=uniform")
        a = ap.parse_args(argv)
        with cli.input_errors(ValueError):  # the checks before any work: a failure is `error: <message>`, exit 2
            loaded = recipe.load_recipe("rl", a.recipe, a.overrides)  # a mistyped key fails before any input is read
            parent = manifest.verify(a.inp)
            if not (a.data / "rl").is_dir():
                raise ConfigError(f"{a.data}: missing rl/; write it with `python -m domains datasets`")
        ...  # the work: an exception here is a bug or an infrastructure failure, and keeps its traceback

A script states an input check's failure by raising ConfigError (or CheckpointError for an input directory), never by
printing its own `error:` line (tests/test_cli.py holds every entry script to that). `input_errors` exits the way
argparse does on a usage error, SystemExit(2), so a caller in the same process sees the same status as a shell.

The run-by-path guard cannot live here: run by path (`python rl/01_train.py`), Python puts rl/ first on sys.path
instead of the repository root, so no project module imports, this one included. Each script keeps the two lines
above, verbatim but for its module name, before its first project import (tests/test_cli.py checks that too).

Pure Python (no torch): the cluster launcher runs it from its own venv (.venv-launch).
"""
from __future__ import annotations

import argparse
import contextlib
import sys
from pathlib import Path
from typing import NoReturn

from model import sections
from model.config import ConfigError
from model.manifest import CheckpointError

INPUT_ERRORS = (ConfigError, CheckpointError)  # bad input anywhere in the project: a recipe, a flag, an input dir


def parser(doc: str, stage: str | None = None, fields: list[str] | None = None, *, prog: str | None = None,
           **paths: str) -> argparse.ArgumentParser:
    """A parser whose --help prints `doc` as written, then for a `stage` its recipe fields (those of the sections
    `fields`, default all but cluster: model/sections.py), and the required path options `paths` (path_args)."""
    ap = argparse.ArgumentParser(prog=prog, description=doc, epilog=stage and sections.epilog(stage, fields),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    path_args(ap, **paths)
    return ap


def path_args(ap: argparse.ArgumentParser, **paths: str) -> None:
    """Required path options, in order, each with its help: inp="..." is --in (a.inp), any other name --name."""
    for name, text in paths.items():
        flag = "--in" if name == "inp" else "--" + name.replace("_", "-")
        ap.add_argument(flag, dest=name, type=Path, required=True, help=text)


def recipe_args(ap: argparse.ArgumentParser, stage: str, example: str | None = None, *,
                default: str | None = "tiny_cpu", recipe_help: str | None = None, set_help: str | None = None) -> None:
    """--recipe (a.recipe) and the repeatable --set KEY=VALUE (a.overrides) of a stage's recipe; `example` is shown in
    --set's help as `e.g. --set <example>`."""
    ap.add_argument("--recipe", default=default, help=recipe_help or f"{stage}/recipes/<name>.yaml or a path")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help=set_help or "override a recipe value" + (f", e.g. --set {example}" if example else ""))


@contextlib.contextmanager
def input_errors(*also: type[BaseException], prefix: str = ""):
    """Within the block, a ConfigError or CheckpointError (or one of `also`, the types a script's own checks or the
    libraries it validates with raise for bad input) becomes one line `error: <prefix><message>` on stderr and exit
    status 2 (SystemExit); nothing else is written. Any other exception passes through with its traceback."""
    try:
        yield
    except (*INPUT_ERRORS, *also) as e:
        lines = [ln.strip() for ln in str(e).splitlines() if ln.strip()]  # one line, even from a library's message
        print(f"error: {prefix}{'; '.join(lines)}", file=sys.stderr)
        raise SystemExit(2) from None


def fail(message: str) -> NoReturn:
    """A check of the input that can only run after some work (it reads the data): the same line and exit 2."""
    with input_errors():
        raise ConfigError(message)
