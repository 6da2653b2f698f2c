"""Evaluation of one checkpoint or endpoint (what `make eval` runs): long-context suite, regression set, held-out
pass@k (and, with --suites ...,quick --data DIR, the quick eval of the stages on the same items).

    python -m eval.01_eval --in checkpoints/sft --out results/eval/sft.json --recipe tiny_cpu
    python -m eval.01_eval --in /work/chain_micro/sft --out /tmp/sft.json --recipe micro_cpu
    # one suite (longctx, regression, heldout, or quick with --data data/domains), on a checkpoint or an endpoint
    python -m eval.01_eval --in checkpoints/rl --out /tmp/regression_rl.json --suites regression
    python -m eval.01_eval --endpoint http://127.0.0.1:8000/v1 --out /tmp/heldout_served.json --suites heldout \
        --set heldout.n=16 --set "heldout.k=[1,4,16]"
    # cluster: a served 1M-context model (eval/recipes/longctx_1m_h200x8.yaml holds the vLLM server settings)
    python -m eval.01_eval --endpoint http://127.0.0.1:8000/v1 --tokenizer /models/served/ \
        --out results/eval/served.json --recipe longctx_1m_h200x8 --suites longctx
    # RoPE override of the checkpoint's config (what 03_rope_study.py runs per variant): YaRN x4 over 256 tokens
    python -m eval.01_eval --in checkpoints/base --suites longctx --rope yarn:4 --rope-original 256 \
        --out /tmp/yarn4.json
    # before/after of two checkpoints: evaluate each, then compare the two files task by task
    python -m eval.02_compare /tmp/regression_sft.json /tmp/regression_rl.json

One target (one vLLM engine) serves every suite. Writes schema "eval.stage" v1 (documented in eval/README.md):
one block per suite run under `suites`, the RoPE override (or null) under `rope`. Exit 0 even when tasks failed
to generate: those are recorded as errors.
"""
from __future__ import annotations

import sys
import tempfile
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.01_eval ...")

from eval import cli  # noqa: E402
from model import results  # noqa: E402
from model.cli import input_errors  # noqa: E402
from model.config import ConfigError  # noqa: E402


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--suites", default="longctx,regression,heldout", help="comma list of suites to run")
    ap.add_argument("--data", type=Path, help="domains datasets (has eval/) for the quick suite (sft/03_eval's items)")
    ap.add_argument("--rope", help="RoPE override of --in's config.json: none | linear:F | yarn:F (eval/rope.py)")
    ap.add_argument("--rope-original", type=int,
                    help="training length the --rope factor is relative to (default: max_position_embeddings)")
    a = ap.parse_args(argv)
    names = [s for s in a.suites.split(",") if s]
    with input_errors(ValueError, FileNotFoundError, KeyError):
        from eval import suites

        bad = sorted(set(names) - set(suites.SUITES))
        if bad or not names:
            raise ConfigError(f"--suites {a.suites!r}: choose from {','.join(suites.SUITES)}")
        cfg = cli.resolve(a, need_tokenizer="longctx" in names)
        if a.rope_original and not a.rope:
            raise ConfigError("--rope-original is the training length of a --rope factor: pass --rope too")
        if a.rope:
            from eval import rope

            if a.endpoint:
                raise ConfigError("--rope rewrites a checkpoint's config: use it with --in, not --endpoint")
            rope.parse(a.rope)
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
                raise ConfigError("--suites quick reads the domains datasets' eval split: pass --data data/domains")
            from model import manifest

            manifest.verify(a.data, stage="data")
    import json

    from eval import targets

    stage = json.loads((a.inp / "manifest.json").read_text())["stage"] if a.inp else None
    with tempfile.TemporaryDirectory(prefix="eval-rope-") as tmp:  # the RoPE variant lives while its engine runs
        target, rope_info = _rope_target(a, cfg, names, Path(tmp)) if a.rope else (targets.make(a), None)
        out = suites.run(target, cfg, names, tokenizer=tok, data=a.data)
    doc = results.write(a.out, "eval.stage", {"stage": stage, "target": target.name, "dtype": getattr(target, "dtype", None), "recipe": a.recipe,
                                              "rope": rope_info, "suites": out}, measured=a.inp)
    from eval import heldout, longctx, regression

    for name, suite in (("longctx", longctx), ("regression", regression), ("heldout", heldout)):
        if name in out:
            print(f"{name}:\n{suite.table(out[name]['summary'])}")
    if "quick" in out:
        print("quick: " + ", ".join(f"{split} {c['passed']}/{c['scored']}"
                                    for split, c in out["quick"]["summary"]["all"].items()))
    errors = sum(_errors(v) for v in out.values())
    if errors:
        print(f"warning: {errors} task(s) got no usable reply from {target.name}; see 'error' in {a.out}",
              file=sys.stderr)
    print(f"-> {a.out} ({doc['schema']['name']} v{doc['schema']['version']})")
    return 0


def _rope_target(a, cfg: dict, names: list[str], tmp: Path):
    """(vLLM target on a copy of --in/hf whose config.json carries the --rope override, what the override set)."""
    import json

    from eval import rope, targets

    kind, factor = rope.parse(a.rope)
    conf = json.loads((a.inp / "hf" / "config.json").read_text())
    original = a.rope_original or conf["max_position_embeddings"]
    a.max_model_len = a.max_model_len or conf["max_position_embeddings"]
    if "longctx" in names:  # room for the longest prompt and its answer
        lc = cfg["longctx"]
        a.max_model_len = max(a.max_model_len, max(int(n) for n in lc["lengths"]) + int(lc["max_tokens"]))
    variant = rope.make_variant(a.inp / "hf", tmp / "hf", kind, factor, original, a.max_model_len)
    limit = rope.supported_len(kind, factor, original)
    if limit is not None:  # longer prompts are recorded as errors (over max_model_len), never run past the cache
        a.max_model_len = min(a.max_model_len, limit)
    info = {"type": kind, "factor": factor, "original_max_position_embeddings": original, "supported_len": limit,
            "max_model_len": a.max_model_len}
    return targets.VLLMTarget(variant, max_model_len=a.max_model_len, dtype=a.dtype, kv_cache_gib=a.kv_cache_gib,
                              tensor_parallel_size=a.tp), info


def _errors(suite: dict) -> int:
    return sum(1 for r in suite.get("rows", suite.get("items", [])) if r.get("error") or r.get("errors"))


if __name__ == "__main__":
    sys.exit(main())
