"""Before/after table of two evaluation results (01_eval.py files, any suites), task by task.

    python -m eval.02_compare results/eval/sft.json results/eval/rl.json
    make eval-compare EVAL_BEFORE=sft EVAL_AFTER=rl      # the same, from results/eval/<stage>.json

Prints the regression set per task (pass|fail/turns, changed tasks marked *), pass rate and mean turns per
dimension, and, when both files have them, the long-context mean score per length and held-out pass@k.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.02_compare ...")

from model import cli  # noqa: E402
from model.config import ConfigError  # noqa: E402


def _suite(doc: dict, name: str) -> dict | None:
    """A suite's block: eval.stage files hold it under suites; files of the single-suite scripts that 01_eval
    replaced (schemas eval.longctx, eval.regression, eval.heldout) at top level, and are still read."""
    if "suites" in doc:
        return doc["suites"].get(name)
    return doc if doc.get("schema", {}).get("name") == f"eval.{name}" else None


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("before", type=Path, help="results file of the earlier checkpoint")
    ap.add_argument("after", type=Path, help="results file of the later checkpoint")
    a = ap.parse_args(argv)
    docs = []
    with cli.input_errors():
        for p in (a.before, a.after):
            try:
                docs.append(json.loads(p.read_text()))
            except (OSError, json.JSONDecodeError) as e:
                raise ConfigError(f"{p}: {type(e).__name__}; pass results files written by eval/01_eval.py") from None
    from eval import regression

    a, b = (_suite(d, "regression") for d in docs)
    if a and b:
        print(regression.compare(a, b)[0])
    la, lb = (_suite(d, "longctx") for d in docs)
    if la and lb:
        print("\nlong-context mean score per length (before -> after)")
        pa, pb = la["summary"]["per_length"], lb["summary"]["per_length"]
        for n in sorted(set(pa) | set(pb), key=int):
            f = lambda v: "-" if v is None or v.get("score") is None else f"{v['score']:.1f}"  # noqa: E731
            print(f"  {n:>8}: {f(pa.get(n)):>6} -> {f(pb.get(n)):>6}")
        print(f"  effective length: {la['summary']['effective_length']} -> {lb['summary']['effective_length']}")
    ha, hb = (_suite(d, "heldout") for d in docs)
    if ha and hb:
        print("\nheld-out pass@k per family (before -> after)")
        for fam in sorted(set(ha["summary"]) | set(hb["summary"])):
            sa, sb = ha["summary"].get(fam, {}), hb["summary"].get(fam, {})
            ks = sorted({k for k in list(sa) + list(sb) if k.startswith("pass@")})
            cells = [f"{k} {'-' if sa.get(k) is None else f'{100 * sa[k]:.1f}'} -> "
                     f"{'-' if sb.get(k) is None else f'{100 * sb[k]:.1f}'}" for k in ks]
            print(f"  {fam:<12} " + "   ".join(cells))
    if not (a and b) and not (la and lb) and not (ha and hb):
        cli.fail("the two files share no suite to compare")
    return 0


if __name__ == "__main__":
    sys.exit(main())
