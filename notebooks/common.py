"""Shared helpers of the figure notebooks: where results come from, skipping honestly, saving figures.

Each results file is read from the fresh `results/` when present, else from `results/reference/`
(committed results of a real run). A figure whose results exist in neither place is skipped with a
printed `no results yet: <path>`; nothing is ever drawn from made-up numbers.
Environment (set by `python -m notebooks`): NB_RESULTS, NB_REFERENCE, NB_FIGURES.
"""
from __future__ import annotations

import json
import math
import os
from pathlib import Path

import matplotlib

matplotlib.use("Agg")  # headless; figures go to files only
import matplotlib.pyplot as plt  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
RESULTS = Path(os.environ.get("NB_RESULTS", ROOT / "results"))
REFERENCE = Path(os.environ.get("NB_REFERENCE", RESULTS / "reference"))
FIGURES = Path(os.environ.get("NB_FIGURES", ROOT / "figures"))
FAMILIES = ["math", "structured", "retrieval", "docs", "scene", "agent", "code", "terminal"]
STAGE_COLORS = {"base": "#9e9e9e", "sft": "#4c72b0", "rl": "#dd8452", "fast": "#55a868"}

plt.rcParams.update({"figure.dpi": 110, "axes.grid": True, "grid.alpha": 0.3, "axes.spines.top": False,
                     "axes.spines.right": False, "font.size": 10})


def find(rel: str) -> Path | None:
    """results/<rel> if present, else results/reference/<rel>; None (and a printed note) if neither."""
    for base in (RESULTS, REFERENCE):
        p = base / rel
        if p.exists():
            print(f"using {p}")
            return p
    skip(RESULTS / rel)
    return None


def find_all(pattern: str) -> list[Path]:
    """Files matching the glob under results/, else under results/reference/ (never a mix of both)."""
    for base in (RESULTS, REFERENCE):
        hits = sorted(p for p in base.glob(pattern) if base == REFERENCE or REFERENCE not in p.parents)
        if hits:
            print("using " + ", ".join(str(h) for h in hits))
            return hits
    skip(RESULTS / pattern)
    return []


def skip(path, why: str = "no results yet") -> None:
    print(f"{why}: {path}")


def load(path: Path) -> dict:
    return json.loads(Path(path).read_text())


def load_jsonl(path: Path) -> list[dict]:
    return [json.loads(ln) for ln in Path(path).read_text().splitlines() if ln.strip()]


def schema(doc: dict) -> str:
    s = doc.get("schema")
    return s.get("name", "") if isinstance(s, dict) else str(s or "")


def source(path: Path, doc: dict | None = None) -> str:
    """One line naming where a figure's numbers come from: file, git commit, date, machine."""
    try:
        rel = Path(path).resolve().relative_to(RESULTS.resolve().parent)
    except ValueError:
        rel = Path(path)
    if not doc:
        return str(rel)
    m = doc.get("machine") or {}
    mach = ", ".join(x for x in (f"{m['cores']} cores" if m.get("cores") else "", m.get("gpu") or "") if x)
    return f"{rel} · git {str(doc.get('git_commit', '?'))[:12]} · {str(doc.get('created', '?'))[:16]} · {mach}"


def wilson(passed: int, n: int) -> tuple[float, float]:
    """95% Wilson interval of a pass rate: the evaluation protocol's (domains/evaluate.py); nan when nothing was scored
    (no error bar rather than a bar over [0, 1])."""
    from domains.evaluate import wilson as protocol_wilson

    return (math.nan, math.nan) if n <= 0 else protocol_wilson(passed, n)


def save(fig, name: str, sources: list[str]) -> Path:
    """Write figures/<name>.png with the sources as a footer."""
    FIGURES.mkdir(parents=True, exist_ok=True)
    fig.text(0.01, 0.005, "source: " + " | ".join(sources), fontsize=7, color="#555555", ha="left", va="bottom",
             wrap=True)
    fig.tight_layout(rect=(0, 0.04, 1, 1))
    out = FIGURES / f"{name}.png"
    fig.savefig(out, dpi=110)
    plt.close(fig)
    print(f"wrote {out}")
    return out
