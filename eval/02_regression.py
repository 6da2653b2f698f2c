"""Regression set: 32 fixed tasks (terminal, docs, scene, agent), domain-verified; pass rate and mean steps.

    python -m eval.02_regression --in checkpoints/sft --out results/eval/regression_sft.json
    python -m eval.02_regression --in /work/chain_micro/sft --out /tmp/reg.json --recipe micro_cpu
    python -m eval.02_regression --endpoint http://127.0.0.1:8000/v1 --out results/eval/regression_served.json
    # before/after table of two checkpoints (runs both, or pass two results files to 05_compare.py)
    python -m eval.02_regression --in checkpoints/rl --baseline checkpoints/sft --out results/eval/regression_rl.json

The set is eval/regression_set.yaml (domain, seed, difficulty per task). Terminal tasks run in the sandbox pool.
"""
from __future__ import annotations

import subprocess
import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.02_regression ...")

from eval import cli  # noqa: E402
from model import results  # noqa: E402
from model.cli import input_errors  # noqa: E402
from model.manifest import verify  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--baseline", type=Path, help="second checkpoint: run it too and print the before/after table")
    a = ap.parse_args(argv)
    with input_errors(ValueError, FileNotFoundError):
        cfg = cli.resolve(a)
        from eval import regression

        regression.load_set(cfg["regression"].get("set", "eval/regression_set.yaml"), cfg["regression"].get("only"))
        if a.baseline:
            verify(a.baseline)
    if a.baseline:  # the baseline in its own process: one vLLM engine per process
        base_out = a.out.with_name(a.out.stem + ".baseline.json")
        r = subprocess.run([sys.executable, "-m", "eval.02_regression", "--in", str(a.baseline), "--out",
                            str(base_out), "--recipe", a.recipe, *[x for s in a.overrides for x in ("--set", s)]],
                           cwd=Path(__file__).resolve().parents[1])
        if r.returncode:
            return r.returncode
    from eval import suites, targets

    target = targets.make(a)
    out = suites.run(target, cfg, ["regression"])["regression"]
    results.write(a.out, "eval.regression", {"target": target.name, **out}, measured=a.inp)
    for dim, s in out["summary"].items():
        pr = "n/a" if s["pass_rate"] is None else f"{100 * s['pass_rate']:.1f}%"
        print(f"{dim:<10} pass {pr:>7} ({s['passed']}/{s['scored']})  mean turns {s['mean_turns']:.2f}  "
              f"errors {s['errors']}  infra {s['infra_errors']}")
    if a.baseline:
        import json

        print(regression.compare(json.loads(base_out.read_text()), out)[0])
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
