"""Full evaluation of one checkpoint (what `make eval` runs): long-context suite, regression set, held-out pass@k
(and, with --suites ...,quick --data DIR, the quick eval of the stages on the same items).

    python -m eval.04_eval --in checkpoints/sft --out results/eval/sft.json --recipe tiny_cpu
    python -m eval.04_eval --in /work/chain_micro/sft --out /tmp/sft.json --recipe micro_cpu
    python -m eval.04_eval --endpoint http://127.0.0.1:8000/v1 --tokenizer /models/served/ \
        --out results/eval/served.json --recipe longctx_1m_h200x8 --suites longctx

One target (one vLLM engine) serves every suite. Writes results/eval/<stage>.json, schema "eval.stage" v1
(documented in eval/README.md). Exit 0 even when tasks failed to generate: those are recorded as errors.
"""
from __future__ import annotations

import sys
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.04_eval ...")

from eval import cli  # noqa: E402
from model import results  # noqa: E402
from model.cli import input_errors  # noqa: E402
from model.config import ConfigError  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--suites", default="longctx,regression,heldout", help="comma list of suites to run")
    ap.add_argument("--data", type=Path, help="domains datasets (has eval/) for the quick suite: the items of sft/03_eval.py")
    a = ap.parse_args(argv)
    names = [s for s in a.suites.split(",") if s]
    with input_errors(ValueError, FileNotFoundError, KeyError):
        from eval import suites

        bad = sorted(set(names) - set(suites.SUITES))
        if bad or not names:
            raise ConfigError(f"--suites {a.suites!r}: choose from {','.join(suites.SUITES)}")
        cfg = cli.resolve(a, need_tokenizer="longctx" in names)
        tok = None
        if "longctx" in names:
            from eval import longctx
            from eval.haystack import Tokens

            longctx.plan(cfg["longctx"])
            tok = Tokens.load(a.tokenizer)
        if "regression" in names:
            from eval import regression

            regression.load_set(cfg["regression"].get("set", "eval/regression_set.yaml"), cfg["regression"].get("only"))
        if "heldout" in names:
            from eval import heldout

            heldout.select(cfg["heldout"])
        if "quick" in names:
            if a.data is None:
                raise ConfigError("--suites quick reads the domains datasets' eval split: pass --data DIR (data/domains)")
            from model import manifest

            manifest.verify(a.data, stage="data")
    import json

    from eval import targets

    stage = json.loads((a.inp / "manifest.json").read_text())["stage"] if a.inp else None
    target = targets.make(a)
    out = suites.run(target, cfg, names, tokenizer=tok, data=a.data)
    doc = results.write(a.out, "eval.stage", {"stage": stage, "target": target.name, "recipe": a.recipe,
                                              "suites": out}, measured=a.inp)
    if "longctx" in out:
        from eval import longctx

        print(longctx.table(out["longctx"]["summary"]))
    for name in ("regression", "heldout"):
        if name in out:
            print(f"{name}: " + json.dumps({k: {m: (round(x, 3) if isinstance(x, float) else x) for m, x in v.items()}
                                            for k, v in out[name]["summary"].items()}))
    if "quick" in out:
        print("quick: " + ", ".join(f"{split} {c['passed']}/{c['scored']}" for split, c in out["quick"]["summary"]["all"].items()))
    errors = sum(_errors(v) for v in out.values())
    if errors:
        print(f"warning: {errors} task(s) got no usable reply from {target.name}; see 'error' in {a.out}",
              file=sys.stderr)
    print(f"-> {a.out} ({doc['schema']['name']} v{doc['schema']['version']})")
    return 0


def _errors(suite: dict) -> int:
    return sum(1 for r in suite.get("rows", suite.get("items", [])) if r.get("error") or r.get("errors"))


if __name__ == "__main__":
    sys.exit(main())
