"""The fast variant: W8A8-quantized target + a draft model distilled from the target, one servable directory.

    # tiny CPU (target = the post-trained checkpoint; the draft learns its greedy answers)
    python -m serving.02_fast --in checkpoints/sft --data data/domains --out checkpoints/fast --recipe tiny_cpu
    # micro (tests, seconds)
    python -m serving.02_fast --in checkpoints/sft --data data/domains --out /tmp/fast --recipe micro_cpu
    # the draft's training on 2 processes (torchrun is used for the draft step only)
    python -m serving.02_fast --in checkpoints/rl --data data/domains --out checkpoints/fast --nproc 2
    # cluster (8 H200: FP8 target, larger draft)
    python -m serving.02_fast --in checkpoints/rl --data data/domains --out checkpoints/fast \
        --recipe qwen3_30b_a3b_h200x8 --nproc 8

Steps: (1) quantize the target's hf/ into <out>/hf (compressed-tensors W8A8, serving/quantize.py);
(2) the unquantized target answers rl-split prompts greedily in vLLM; (3) a small dense draft is
trained on those answers with Megatron-Core (serving/draft.py, model/loop.py) into <out>/draft/;
(4) <out>/serving.json holds the vLLM arguments (speculative_config -> draft/hf), so
`python -m serving.03_serve --in <out>` serves it; manifest.json (stage "fast", parent = --in) last.
With speculative.method=ngram steps 2-3 are skipped (prompt-lookup proposals, no model).
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m serving.02_fast ...")

from model import cli, manifest, recipe  # noqa: E402
from model.config import ConfigError  # noqa: E402
from serving import card, quantize, server  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("draft", "ngram")


def validate(cfg: dict) -> dict:
    """Cross-field rules of the serving recipe, before any work; returns the resolved quant/spec choices."""
    q, sp = cfg["quant"], cfg["speculative"]  # keys and defaults: serving/config.py
    scheme = q["scheme"]
    if scheme not in quantize.SCHEMES:
        raise ConfigError(f"quant.scheme={scheme!r}: use one of {sorted(quantize.SCHEMES)}")
    import torch

    if scheme == "w8a8_fp8" and not torch.cuda.is_available():
        raise ConfigError("quant.scheme=w8a8_fp8 needs a GPU (vLLM-CPU has no fp8 kernel): use w8a8_int8 on CPU")
    dtype, dtype_why = quantize.serve_dtype()  # what serving.json says: every engine runs the variant in it
    ok, why = quantize.experts_supported(dtype)
    experts = q["experts"]
    if experts == "auto":
        experts = ok
    elif experts is True and not ok:
        raise ConfigError(f"quant.experts=true but {why}; set quant.experts=auto or false")
    alpha = q["smooth_alpha"]
    if not (isinstance(alpha, (int, float)) and 0 <= alpha < 1) or (alpha and q["calib_prompts"] < 1):
        raise ConfigError(f"quant.smooth_alpha={alpha} must be in [0, 1) (0 = off), with quant.calib_prompts >= 1 "
                          f"(got {q['calib_prompts']})")
    method = sp["method"]
    if method not in METHODS:
        raise ConfigError(f"speculative.method={method!r}: use one of {list(METHODS)}")
    k = sp["num_speculative_tokens"]
    if not (isinstance(k, int) and 1 <= k <= 8):
        raise ConfigError(f"speculative.num_speculative_tokens={k} must be an integer in [1, 8]")
    lo, hi = sp["prompt_lookup_min"], sp["prompt_lookup_max"]
    if method == "ngram" and not (isinstance(lo, int) and isinstance(hi, int) and 1 <= lo <= hi):
        raise ConfigError(f"speculative.prompt_lookup_min={lo}, prompt_lookup_max={hi}: need integers 1 <= min <= max")
    return {"scheme": scheme, "experts": bool(experts), "experts_reason": why, "method": method, "k": k, "lookup": [lo, hi], "smooth_alpha": alpha,
            "dtype": dtype, "dtype_reason": dtype_why}


def run(cmd: list[str]) -> str:
    """A step in its own process (vLLM and torch.distributed change the process they run in)."""
    from model.parallel import single_process_env

    env = dict(single_process_env(), PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    r = subprocess.run(cmd, cwd=ROOT, env=env, stdout=subprocess.PIPE, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"step failed (exit {r.returncode}): {' '.join(cmd)}")
    sys.stdout.write(r.stdout[-4000:])
    return r.stdout


def main(argv=None) -> int:
    ap = cli.parser(__doc__, "serving", inp="target checkpoint (sft, rl or export) with hf/",
                    out="fast variant directory to create")
    ap.add_argument("--data", type=Path, default=None,
                    help="domains datasets (prompts for the draft; needed for method=draft)")
    cli.recipe_args(ap, "serving", set_help="recipe override")
    ap.add_argument("--results", type=Path, default=Path("results"), help="folder searched for the target's results files")
    ap.add_argument("--nproc", type=int, default=1, help="processes for the draft's training (torchrun when > 1)")
    a = ap.parse_args(argv)
    with cli.input_errors():
        cfg = recipe.load_recipe("serving", a.recipe, a.overrides)  # a mistyped key fails before any input is read
        m = manifest.verify(a.inp)  # the one full check of the target; the draft steps get its manifest hash
        target_sha = manifest.manifest_hash(a.inp)
        hf_conf = a.inp / "hf" / "config.json"
        if not hf_conf.is_file():
            raise ConfigError(f"{a.inp} has no hf/config.json: export it first (serving/01_export.py)")
        if "quantization_config" in json.loads(hf_conf.read_text()):
            raise ConfigError(f"{a.inp}/hf is already quantized: pass the unquantized target")
        choice = validate(cfg)
        if choice["method"] == "draft" or choice["smooth_alpha"]:
            if a.data is None:
                raise ConfigError("speculative.method=draft and quant.smooth_alpha > 0 need --data <domains datasets> "
                                  "(distillation and calibration prompts)")
            manifest.verify(a.data, stage="data")
        if a.nproc < 1:
            raise ConfigError(f"--nproc {a.nproc} must be >= 1")
    t0 = time.perf_counter()
    try:
        with manifest.staging(a.out) as tmp:
            maxima, alpha = None, choice["smooth_alpha"]
            if alpha:  # activation maxima of the unquantized target on training prompts (never eval)
                from serving import smooth
                from serving.draft import domain_prompts

                maxima = smooth.activation_maxima(a.inp / "hf", domain_prompts(
                    a.data, cfg["quant"]["calib_prompts"], cfg["distill"]["seed"]))
            qstats = quantize.quantize_hf_dir(a.inp / "hf", tmp / "hf", choice["scheme"], choice["experts"],
                                              smooth_alpha=alpha, maxima=maxima)
            print(f"quantized {qstats['quantized_tensors']} tensors ({choice['scheme']}, experts "
                  f"{'quantized' if choice['experts'] else 'kept: ' + choice['experts_reason']})", flush=True)
            metrics: dict = {"quant": qstats}
            extra: dict = {"quant_experts_reason": choice["experts_reason"],
                           "serve_dtype_reason": choice["dtype_reason"]}
            k = choice["k"]
            if choice["method"] == "draft":
                from safetensors.torch import load_file

                d = cfg["distill"]
                gen = run([sys.executable, "-m", "serving.draft", "generate", "--target", str(a.inp),
                           "--target-verified", target_sha, "--data", str(a.data), "--out", str(tmp / "distill"),
                           "--num-prompts", str(d["num_prompts"]), "--max-tokens", str(d["max_tokens"]),
                           "--seed", str(d["seed"])])
                metrics["distill"] = json.loads(gen.strip().splitlines()[-1])
                launch = [sys.executable] if a.nproc == 1 else [sys.executable, "-m", "torch.distributed.run", "--standalone",
                                                                 "--nproc-per-node", str(a.nproc)]
                sets = [x for o in a.overrides for x in ("--set", o)]
                run(launch + ["-m", "serving.draft", "train", "--target", str(a.inp), "--target-verified", target_sha,
                              "--data", str(tmp / "distill"), "--out", str(tmp / "draft"), "--recipe", a.recipe, *sets])
                shutil.rmtree(tmp / "distill")
                dm = manifest.verify(tmp / "draft", stage="draft")
                metrics["draft"] = {k2: dm["metrics"].get(k2) for k2 in ("final_train_loss", "val_loss", "steps", "tokens")}
                metrics["draft"]["parameters"] = sum(v.numel() for v in load_file(str(tmp / "draft/hf/model.safetensors")).values())
                extra["draft_manifest_sha256"] = manifest.manifest_hash(tmp / "draft")
                spec = {"method": "draft_model", "model": "draft/hf", "num_speculative_tokens": k}
            else:
                spec = {"method": "ngram", "num_speculative_tokens": k, "prompt_lookup_max": choice["lookup"][1],
                        "prompt_lookup_min": choice["lookup"][0]}
            scfg = {"model": "hf", "dtype": choice["dtype"], "speculative_config": spec}
            (tmp / server.SERVING_JSON).write_text(json.dumps(scfg, indent=2) + "\n")
            name = f"fast-{target_sha[:8]}"
            raw = " ".join(["python"] + server.command(tmp, name=name)[1:]).replace(str(tmp.resolve()), str(a.out))
            (tmp / "hf" / "README.md").write_text(card.render(
                name, json.loads((tmp / "hf" / "config.json").read_text()), card.provenance(a.inp),
                card.evaluations(a.results, target_sha),
                f"python -m serving.03_serve --in {a.out}\n# the same server, directly:\n{raw}")
                + f"\nFast variant of `{a.inp}`: {choice['scheme']} target"
                  f"{'' if choice['experts'] else ' (experts unquantized: ' + choice['experts_reason'] + ')'}, "
                  f"speculative decoding {spec['method']} with {k} proposed tokens. Evaluation numbers above are the "
                  "parent's (standard variant); serving/bench_fast.py measures both.\n")
            metrics["wall_s"] = time.perf_counter() - t0
            manifest.write_manifest(tmp, stage="fast", parent=a.inp, config={**cfg, "resolved": choice},
                                    seed=cfg["train"]["seed"], metrics=metrics,
                                    model_config=m.get("model_config"), extra=extra)
            manifest.publish(tmp, a.out)
    except (RuntimeError, ValueError) as e:  # a step failed (a ConfigError is a ValueError): exit 1, not bad input
        print(f"error: {e}", file=sys.stderr)
        return 1
    print(f"fast variant -> {a.out} ({metrics['wall_s']:.0f} s): {json.dumps(metrics)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
