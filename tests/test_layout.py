"""The import rules between the top-level folders, read off the source (AST, nothing imported), so a stage can be
run, tested and replaced without the others:

- a stage (pretrain_ckpt, sft, rl, eval, serving, launch, notebooks) imports itself, model/ and domains/ only;
  rl and eval may also import sandbox/ (they run sandboxed verifiers); no stage imports another stage;
- model/ imports nothing but itself: it knows no tasks (domains/) and no stage;
- domains/ imports model/ and itself, never a stage; it reaches sandbox/ only lazily (inside a function), and
  outside its tests only through domains/sandboxing.py, so the pure-Python families work without sandbox/
  (domains/sandboxing.py's docstring, 608b1ca) and the contract lives in one place (DESIGN.md: one client);
- sandbox/ imports nothing of the project;
- tests/ (the cross-stage tests) may import anything; a stage's own tests may also import tests/ (shared fixtures).

Every import counts: top-level, lazy (inside a function), `if TYPE_CHECKING:`, relative (resolved), and
importlib.import_module / __import__ with a literal name.
"""
from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
STAGES = {"pretrain_ckpt", "sft", "rl", "eval", "serving", "launch", "notebooks"}
SHARED = {"model", "domains", "sandbox"}
FOLDERS = STAGES | SHARED | {"tests"}
ALLOWED = {**{s: {s, "model", "domains"} | ({"sandbox"} if s in ("rl", "eval") else set()) for s in STAGES},
           "model": {"model"}, "domains": {"domains", "model", "sandbox"}, "sandbox": {"sandbox"}, "tests": FOLDERS}
# Known violations, each waiting on a change in a file this test's author does not own. The test fails when one
# is fixed (delete its entry then) as well as when any other violation appears.
PENDING: set[tuple[str, str]] = set()  # (file, module) violations known and being fixed


def _imports(path: Path, source: str | None = None):
    """(module, line, lazy) for every import in the file; relative imports resolved against its package."""
    rel = path.relative_to(ROOT) if source is None else path
    tree = ast.parse(source if source is not None else path.read_text(), str(rel))
    package = list(rel.parts[:-1])

    def visit(node, lazy):
        for child in ast.iter_child_nodes(node):
            inner = lazy or isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda))
            if isinstance(child, ast.Import):
                for a in child.names:
                    yield a.name, child.lineno, lazy
            elif isinstance(child, ast.ImportFrom):
                if child.level:
                    base = package[:max(0, len(package) - child.level + 1)]
                    names = [child.module] if child.module else [a.name for a in child.names]
                    for mod in (".".join(base + [n]) for n in names):  # `from .. import x` past the top names x
                        yield mod, child.lineno, lazy
                else:
                    yield child.module, child.lineno, lazy
            elif (isinstance(child, ast.Call) and child.args and isinstance(child.args[0], ast.Constant)
                  and isinstance(child.args[0].value, str)
                  and (isinstance(child.func, ast.Attribute) and child.func.attr == "import_module"
                       or isinstance(child.func, ast.Name) and child.func.id in ("import_module", "__import__"))):
                yield child.args[0].value, child.lineno, lazy
            yield from visit(child, inner)

    yield from visit(tree, False)


def violations(rel: Path, source: str | None = None) -> list[tuple[str, str, str]]:
    """(file, module, why) for each import of the file that breaks the rules."""
    owner = rel.parts[0]
    in_tests = "tests" in rel.parts[1:-1] or rel.name == "conftest.py"
    allowed = ALLOWED[owner] | ({"tests"} if in_tests and owner in STAGES else set())
    out = []
    for mod, line, lazy in _imports(ROOT / rel if source is None else rel, source):
        top = mod.split(".")[0]
        if top not in FOLDERS or top == owner:
            continue
        where = f"{rel}:{line}"
        if top not in allowed:
            out.append((str(rel), mod, f"{where}: {owner}/ may not import {top}/ (allowed: {sorted(allowed)})"))
        elif owner == "domains" and top == "sandbox":
            if not lazy:
                out.append((str(rel), mod, f"{where}: domains/ imports sandbox/ only inside a function"))
            elif not in_tests and rel.as_posix() != "domains/sandboxing.py":
                out.append((str(rel), mod, f"{where}: domains/ reaches sandbox/ through domains/sandboxing.py"))
    return out


def _sources():
    for folder in sorted(FOLDERS):
        for p in sorted((ROOT / folder).rglob("*.py")):
            if "__pycache__" not in p.parts:
                yield p.relative_to(ROOT)


def test_every_python_folder_has_a_rule():
    """A new top-level folder of Python code has to be placed in the rules above before it passes."""
    folders = {p.parent.name for p in ROOT.glob("*/*.py")} | {p.parent.name for p in ROOT.glob("*/__init__.py")}
    assert folders - FOLDERS == set(), "add the folder to STAGES or SHARED in tests/test_layout.py"


def test_imports_follow_the_layout():
    found = [v for rel in _sources() for v in violations(rel)]
    new = [why for f, mod, why in found if (f, mod) not in PENDING]
    assert new == [], "imports across folders that break the layout rules:\n" + "\n".join(new)
    fixed = PENDING - {(f, mod) for f, mod, _ in found}
    assert not fixed, f"fixed, so delete them from PENDING in tests/test_layout.py: {sorted(fixed)}"


@pytest.mark.parametrize("rel, source, bad", [
    ("sft/x.py", "import rl.policy", True),
    ("sft/x.py", "def f():\n    from serving import quality", True),  # lazy counts
    ("sft/x.py", "import importlib\nimportlib.import_module('eval.cli')", True),
    ("sft/x.py", "from model import manifest\nfrom domains import chat\nimport sft.config", False),
    ("sft/x.py", "import sandbox", True),
    ("rl/x.py", "from sandbox import Pool", False),
    ("eval/x.py", "def f():\n    import sandbox", False),
    ("model/x.py", "def f():\n    from domains import chat", True),
    ("model/x.py", "from launch.cluster import ClusterConfig", True),
    ("model/sub/x.py", "from ... import domains", True),  # relative import resolved to the top
    ("model/sub/x.py", "from .. import manifest", False),
    ("domains/x.py", "from rl import policy", True),
    ("domains/x.py", "import sandbox", True),  # top-level: domains/ must import without sandbox/
    ("domains/families/x.py", "def f():\n    import sandbox", True),  # not through domains/sandboxing.py
    ("domains/sandboxing.py", "def f():\n    from sandbox import Pool", False),
    ("domains/tests/conftest.py", "def f():\n    from sandbox.tiers import TIERS", False),
    ("sandbox/x.py", "def f():\n    from domains import chat", True),
    ("sandbox/x.py", "from model import manifest", True),
    ("serving/tests/conftest.py", "from tests.trained_fixtures import run", False),
    ("serving/x.py", "from tests.trained_fixtures import run", True),  # only a stage's tests share tests/
    ("tests/x.py", "import rl.policy, serving, sandbox", False),
])
def test_the_checker(rel, source, bad):
    assert bool(violations(Path(rel), source)) == bad
