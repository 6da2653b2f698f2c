"""RL experiments at an equal step budget, evaluated on the held-out domains: domain scaling, scheduler ablation, seeds.

    # domain scaling: train on k training domains (family-stratified seeded choice), k in {1, 4, 16, 64, all}
    python -m rl.02_experiments domain_scaling --in checkpoints/sft --data data/domains \
        --out results/rl/experiments/domain_scaling.json --ks 1,4,16,64,all --seeds 0
    # scheduler ablation: uniform sampling vs the pass-rate-aware scheduler
    python -m rl.02_experiments scheduler --in checkpoints/sft --data data/domains \
        --out results/rl/experiments/scheduler.json --seeds 0,1
    # seed spread: the recipe as it is, once per seed (train.seed = 1234 + seed: seed 0 is `make rl`'s own run)
    python -m rl.02_experiments seeds --in checkpoints/sft --data data/domains \
        --out results/rl/experiments/seeds.json --seeds 0,1,2
    # mismatch lab: one source of engine/trainer mismatch at a time x one correction (make rl-mismatch-lab)
    python -m rl.02_experiments mismatch --in checkpoints/sft --data data/domains \
        --out results/rl/experiments/mismatch.json --sources stale0,stale1,stale2,stale4,bf16,int8,flip10 \
        --corrections none,tis,mis,replay --seeds 0,1
    # micro (minutes): add --recipe micro_cpu; cluster: --recipe qwen3_30b_a3b_h200x8 --launch "torchrun --nproc-per-node 8"

Each arm is one rl/01_train.py run with the same recipe and train.steps; only the arm's setting and the seed
change. The mismatch lab's sources: stale<k> (rollout.max_staleness k: the engine k weight versions behind), bf16
(the engine in bfloat16, the trainer in float32), int8 (the engine W8A8 int8, requantized at every sync,
rollout.quantization; its activations in the dtype this machine's int8 kernels take: bfloat16 with AMX) and
flip<p> (the engine's router forced to flip on p% of its decisions, rollout.router_flip_frac); its corrections:
none (algo.tis_cap 0), tis (truncated IS, cap 2), mis (masked IS, band [0.5, 2]), seq_mis (the band on the
trajectory's product of ratios), replay (routing replay: the update routes every token to the engine's experts,
rl/routing.py; no IS weight). Every flip<p> arm and every replay
arm records the engine's routing, so its metrics log the share of tokens the trainer routes otherwise. Whatever
the source, the held-out evaluation runs a float32, unquantized, unflipped engine (RolloutConfig.evaluates_itself).
Layout (arm names:
k<K>_s<S> for domain scaling, <uniform|pass_rate>_s<S> for the scheduler, s<S> for seeds, <source>_<correction>_s<S>
for the mismatch lab):
    <out>                       summary (model/results.py schema): per arm the held-out pass rate at the end, the
                                parent's under the same protocol (eval.at_start), the paired delta, curve summary
    <out without .json>/<arm>/  the arm's metrics.jsonl and eval.json (what the notebooks plot)
    <--work>/<arm>/             the arm's checkpoint (default: checkpoints/rl_experiments/<experiment>/, never
                                under results/, so a results snapshot holds no weights)
A finished arm (its manifest exists) is not rerun, so an interrupted experiment resumes arm by arm.
"""
from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m rl.02_experiments ...")

from model import cli, manifest, results  # noqa: E402
from model.config import ConfigError  # noqa: E402

ROOT = Path(__file__).resolve().parent.parent


def arms(a) -> list[tuple[str, list[str]]]:
    seeds = [int(s) for s in a.seeds.split(",") if s.strip()]
    out = []
    for seed in seeds:
        base = [f"train.seed={1234 + seed}"]
        if a.experiment == "domain_scaling":
            for k in a.ks.split(","):
                k = k.strip()
                if k != "all" and not k.isdigit():
                    raise ConfigError(f"--ks entry {k!r}: use integers or 'all'")
                out.append((f"k{k}_s{seed}", base + [f"sched.num_domains={0 if k == 'all' else int(k)}"]))
        elif a.experiment == "seeds":
            out.append((f"s{seed}", base))
        elif a.experiment == "mismatch":
            for src in a.sources.split(","):
                src = src.strip()
                src_sets = source_sets(src)
                for cor in a.corrections.split(","):
                    cor = cor.strip()
                    if cor not in CORRECTIONS:
                        raise ConfigError(f"--corrections entry {cor!r}: use one of {', '.join(CORRECTIONS)}")
                    out.append((f"{src}_{cor}_s{seed}", base + src_sets + CORRECTIONS[cor]))
        else:
            for mode in ("uniform", "pass_rate"):
                out.append((f"{mode}_s{seed}", base + [f"sched.mode={mode}"]))
    return out


SOURCES = {"bf16": ["rollout.dtype=bfloat16"]}  # besides stale<k>, flip<p> and int8
CORRECTIONS = {"none": ["algo.tis_cap=0"], "tis": ["algo.tis_cap=2"],
               "mis": ["algo.tis_cap=0", "algo.mis_low=0.5", "algo.mis_high=2"],
               "seq_mis": ["algo.tis_cap=0", "algo.mis_low=0.5", "algo.mis_high=2", "algo.is_level=sequence"],
               "replay": ["algo.tis_cap=0", "rollout.record_routing=true", "algo.routing_replay=true"]}
MISMATCH_KEYS = ("mismatch_abs", "mismatch_kl", "tis_capped_frac", "is_masked_frac", "staleness",
                 "routing_differ_frac", "rollout_s")


def source_sets(src: str) -> list[str]:
    """The recipe overrides of one mismatch source of the lab."""
    if src in SOURCES:
        return SOURCES[src]
    if src == "int8":  # W8A8 int8 weights; activations in the dtype this machine's int8 kernels take
        from model.quantize import serve_dtype

        return ["rollout.quantization=w8a8_int8", f"rollout.dtype={serve_dtype()[0]}"]
    if src.startswith("stale") and src[5:].isdigit():
        return [f"rollout.max_staleness={int(src[5:])}"]
    if src.startswith("flip") and src[4:].isdigit() and 0 < int(src[4:]) < 100:
        return ["rollout.record_routing=true", f"rollout.router_flip_frac={int(src[4:]) / 100}"]
    raise ConfigError(f"--sources entry {src!r}: use stale<k> (k >= 0), flip<p> (0 < p < 100), int8 or "
                      f"{', '.join(SOURCES)}")


def arm_paths(out: Path, work: Path, name: str) -> tuple[Path, Path]:
    """(checkpoint dir, results dir) of one arm: weights under work/, metrics and eval next to the summary."""
    return work / name, out.with_suffix("") / name


def _mean(xs: list) -> float | None:
    return sum(xs) / len(xs) if xs else None


def summarize(run_dir: Path, ckpt: Path) -> dict:
    m = manifest.verify(ckpt, stage="rl")
    lines = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    half = lines[len(lines) // 2:]
    return {"heldout_pass_rate": m["metrics"].get("heldout_pass_rate"),
            "heldout_pass_rate_at_start": m["metrics"].get("heldout_pass_rate_at_start"),
            "heldout_delta": m["metrics"].get("heldout_delta"),  # paired vs the parent, with intervals
            "eval": m["metrics"].get("eval"), "domains": len(m["scheduler"]),
            "train_reward_second_half": sum(x["reward"] for x in half) / max(len(half), 1),
            "train_pass_rate_second_half": sum(x["pass_rate"] for x in half) / max(len(half), 1),
            "zero_var_frac_mean": sum(x["zero_var_frac"] for x in lines) / max(len(lines), 1),
            # per-token engine/trainer statistics, over the steps that trained tokens
            **{f"{k}_mean": _mean([x[k] for x in lines if x.get("action_tokens") and k in x]) for k in MISMATCH_KEYS},
            "reward_curve": [x["reward"] for x in lines],
            "steps": len(lines), "manifest_sha256": manifest.manifest_hash(ckpt)}


def main(argv=None) -> int:
    ap = cli.parser(__doc__, inp="parent checkpoint (checkpoints/sft)", data="domains datasets (data/domains)",
                    out="results JSON (results/rl/experiments/<name>.json)")
    ap.add_argument("experiment", choices=["domain_scaling", "scheduler", "seeds", "mismatch"], help="which experiment")
    ap.add_argument("--work", type=Path, default=None,
                    help="arm checkpoints (default: checkpoints/rl_experiments/<experiment>/)")
    cli.recipe_args(ap, "rl", recipe_help="rl/recipes/<name>.yaml for every arm",
                    set_help="recipe override for every arm (e.g. train.steps=10)")
    ap.add_argument("--ks", default="1,4,16,64,all", help="domain counts for domain_scaling")
    ap.add_argument("--seeds", default="0", help="comma-separated seeds (each arm runs once per seed)")
    ap.add_argument("--sources", default="stale0,stale1,stale2,stale4,bf16,int8,flip10",
                    help="mismatch sources of the mismatch lab: stale<k>, bf16, int8, flip<p>")
    ap.add_argument("--corrections", default="none,tis,mis,replay", help="corrections of the mismatch lab: "
                                                                  + ", ".join(CORRECTIONS))
    ap.add_argument("--launch", default=sys.executable, help="launcher, e.g. 'torchrun --nproc-per-node 8'")
    a = ap.parse_args(argv)
    with cli.input_errors():
        manifest.verify(a.inp)
        todo = arms(a)
    work = a.work or ROOT / "checkpoints" / "rl_experiments" / a.experiment
    rows, t0 = {}, time.perf_counter()
    env = dict(os.environ, PYTHONPATH=str(ROOT) + os.pathsep + os.environ.get("PYTHONPATH", ""))
    for name, sets in todo:
        ckpt, run_dir = arm_paths(a.out, work, name)
        run_dir.mkdir(parents=True, exist_ok=True)
        ckpt.parent.mkdir(parents=True, exist_ok=True)
        if not (ckpt / "manifest.json").exists():
            cmd = shlex.split(a.launch) + ["-m", "rl.01_train", "--in", str(a.inp), "--data", str(a.data), "--out",
                                           str(ckpt), "--results", str(run_dir), "--recipe", a.recipe]
            cmd += [x for s in a.overrides + sets for x in ("--set", s)]
            print(f"[{name}] {' '.join(shlex.quote(c) for c in cmd)}", flush=True)
            r = subprocess.run(cmd, env=env, cwd=ROOT)
            if r.returncode:
                print(f"error: arm {name} failed (exit {r.returncode}); rerun to resume it", file=sys.stderr)
                return r.returncode
        rows[name] = {"overrides": sets, **summarize(run_dir, ckpt)}
        print(f"[{name}] held-out pass rate {rows[name]['heldout_pass_rate']} "
              f"(parent {rows[name]['heldout_pass_rate_at_start']})", flush=True)
    results.write(a.out, f"rl.experiment.{a.experiment}",
                  {"experiment": a.experiment, "recipe": a.recipe, "overrides": a.overrides, "arms": rows,
                   "seconds": time.perf_counter() - t0}, measured=a.inp)
    print(f"-> {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
