"""Held-out domains: pass@k per family (n samples per task at temperature T; unbiased estimator).

    python -m eval.03_heldout --in checkpoints/rl --out results/eval/heldout_rl.json
    python -m eval.03_heldout --in /work/chain_micro/sft --out /tmp/ho.json --recipe micro_cpu
    python -m eval.03_heldout --endpoint http://127.0.0.1:8000/v1 --out results/eval/heldout_served.json \
        --set heldout.n=16 --set "heldout.k=[1,4,16]"

Tasks: every held-out domain (domains split "heldout") x per_domain seeds from 6_000_000 at the recipe's
difficulty, each as n independent seeded rollouts under the one evaluation protocol (domains/evaluate.py).
"""
from __future__ import annotations

import sys

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.03_heldout ...")

from eval import cli  # noqa: E402
from model import results  # noqa: E402
from model.cli import input_errors  # noqa: E402
from model.config import ConfigError  # noqa: E402


def main(argv=None) -> int:
    a = cli.parser(__doc__).parse_args(argv)
    with input_errors(ValueError, FileNotFoundError, KeyError):
        cfg = cli.resolve(a)
        from eval import heldout

        heldout.select(cfg["heldout"])
        h = cfg["heldout"]
        if any(int(k) > int(h.get("n", 4)) or int(k) < 1 for k in h.get("k", [1])):
            raise ConfigError(f"heldout.k={h.get('k')} must be within 1..heldout.n={h.get('n', 4)}")
    from eval import suites, targets

    target = targets.make(a)
    out = suites.run(target, cfg, ["heldout"])["heldout"]
    results.write(a.out, "eval.heldout", {"target": target.name, **out}, measured=a.inp)
    ks = [f"pass@{k}" for k in h.get("k", [1])]
    print(f"{'family':<12}{'tasks':>6}" + "".join(f"{k:>10}" for k in ks) + f"{'errors':>8}")
    for f, s in out["summary"].items():
        print(f"{f:<12}{s['tasks']:>6}" + "".join(f"{'-' if s[k] is None else format(100 * s[k], '.1f'):>10}" for k in ks)
              + f"{s['samples_errors']:>8}")
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
