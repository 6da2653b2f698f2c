"""RoPE scaling study: effective length of one checkpoint with no scaling, linear and YaRN at 2-8x training length.

    python -m eval.03_rope_study --in checkpoints/base --out results/eval/rope_study.json            # tiny
    python -m eval.03_rope_study --in /work/chain_micro/base --out /tmp/rope.json --train-len 128 \
        --factors 2,4 --set longctx.per_cell=1 --set "longctx.depths=[0.5]"                          # micro
    python -m eval.03_rope_study --in checkpoints/rl --out results/eval/rope_study.json --recipe longctx_1m_h200x8

For every variant (none, linear:F, yarn:F for each factor F) it runs eval/01_eval.py --suites longctx --rope
VARIANT in its own process (one vLLM engine per process) at prompt lengths train_len x {1, 2, 4, 8} - max_tokens,
so prompt + answer fill exactly that many positions (a factor-F variant is defined up to train_len x F positions:
eval/rope.py), on the recipe's long-context tasks, and records the per-length mean score, the effective length
(RULER threshold 85.6) and the mean token NLL of the last quarter of each prompt (`tail_nll`: how well the model
still reads text at those positions, a signal even where a weak model scores 0 everywhere). The variants only
rewrite config.json (eval/rope.py); "none" is plain RoPE extrapolation past the training length.
"""
from __future__ import annotations

import json
import subprocess
import sys
import tempfile
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m eval.03_rope_study ...")

from eval import cli  # noqa: E402
from model import results  # noqa: E402
from model.cli import input_errors  # noqa: E402
from model.config import ConfigError  # noqa: E402

HERE = Path(__file__).resolve().parent


def main(argv=None) -> int:
    ap = cli.parser(__doc__)
    ap.add_argument("--train-len", type=int, help="training sequence length (default: the manifest's "
                                                  "config.train.seq_length, else max_position_embeddings)")
    ap.add_argument("--factors", default="2,4,8", help="scaling factors to study, comma separated (> 1)")
    ap.add_argument("--multiples", default="1,2,4,8", help="lengths as multiples of --train-len")
    a = ap.parse_args(argv)
    with input_errors(ValueError, KeyError, FileNotFoundError):
        if a.endpoint:
            raise ConfigError("the RoPE study rewrites a checkpoint's config: use --in, not --endpoint")
        cfg = cli.resolve(a, need_tokenizer=True)
        m = json.loads((a.inp / "manifest.json").read_text())
        conf = json.loads((a.inp / "hf" / "config.json").read_text())
        train_len = a.train_len or ((m.get("config") or {}).get("train") or {}).get("seq_length") \
            or conf["max_position_embeddings"]
        factors = [float(x) for x in a.factors.split(",")]
        multiples = [int(x) for x in a.multiples.split(",")]
        if any(f <= 1 for f in factors) or any(x < 1 for x in multiples):
            raise ConfigError(f"--factors {a.factors} must be > 1 and --multiples {a.multiples} >= 1")
        max_tokens = int(cfg["longctx"].get("max_tokens", 64))
        lengths = [train_len * x - max_tokens for x in multiples]
        if min(lengths) < 64:
            raise ConfigError(f"train_len {train_len} x {min(multiples)} leaves {min(lengths)} prompt tokens after "
                              f"longctx.max_tokens={max_tokens}: lower max_tokens or raise --multiples")
    variants = ["none"] + [f"{k}:{f:g}" for f in factors for k in ("linear", "yarn")]
    study = {}
    with tempfile.TemporaryDirectory(prefix="rope-study-") as tmp:
        for v in variants:
            out = Path(tmp) / f"{v.replace(':', '_')}.json"
            cmd = [sys.executable, "-m", "eval.01_eval", "--suites", "longctx", "--in", str(a.inp), "--out", str(out),
                   "--recipe", a.recipe, "--rope", v, "--rope-original", str(train_len),
                   *[x for s in a.overrides for x in ("--set", s)], "--set", f"longctx.lengths={lengths}",
                   "--set", "longctx.nll=true"]
            if a.tokenizer:
                cmd += ["--tokenizer", str(a.tokenizer)]
            r = subprocess.run(cmd, capture_output=True, text=True, cwd=HERE.parent)
            if r.returncode:
                study[v] = {"error": (r.stderr.strip().splitlines() or ["?"])[-1]}
                print(f"{v:<10} failed: {study[v]['error']}", file=sys.stderr)
                continue
            s = json.loads(out.read_text())["suites"]["longctx"]["summary"]
            study[v] = {"effective_length": s["effective_length"], "per_length": {
                n: {"score": x["score"], "recall": x["recall"], "errors": x["errors"], "tail_nll": x.get("tail_nll")}
                for n, x in s["per_length"].items()}}
            cells = "  ".join(f"{n}:{'-' if x['score'] is None else format(x['score'], '.1f')}/"
                              f"{'-' if x['tail_nll'] is None else format(x['tail_nll'], '.3f')}"
                              f"{'' if not x['errors'] else ' (' + str(x['errors']) + ' err)'}"
                              for n, x in sorted(study[v]["per_length"].items(), key=lambda kv: int(kv[0])))
            print(f"{v:<10} effective {study[v]['effective_length']:>6}   score/tail NLL per length: {cells}")
    results.write(a.out, "eval.rope_study", {"train_len": train_len, "lengths": lengths, "factors": factors,
                                             "tasks": cfg["longctx"].get("tasks"), "variants": study}, measured=a.inp)
    print(f"-> {a.out}")
    return 0 if all("error" not in v for v in study.values()) else 1


if __name__ == "__main__":
    sys.exit(main())
