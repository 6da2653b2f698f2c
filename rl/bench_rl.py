"""RL benchmark: rollout throughput of vLLM vs transformers `generate` (same model, prompts, sampling, token
count, in one run), weight-sync seconds (files, shared memory, a memcpy) against model bytes, and the RL step time split from a metrics file.

    python -m rl.bench_rl --in checkpoints/sft --out results/bench/rl.json [--metrics results/rl/metrics.jsonl]
    python -m rl.bench_rl --in /work/chain_micro/sft --out /tmp/rl.json --prompts 8 --samples 4 --tokens 32
    python -m rl.bench_rl --in checkpoints/sft --out results/bench/rl.json --data data/domains --staleness-steps 6

Baseline: transformers `generate` (do_sample, num_return_sequences) on the same HF directory, float32, in
this process; vLLM runs in its own process (model/vllm_engine.EngineProcess), both forced to exactly --tokens new
tokens per sample (ignore EOS). Sync: Megatron model loaded from <in>/mcore -> rl/sync.py (HF safetensors
in /dev/shm + in-place reload), timed --sync-reps times. With --data and --staleness-steps N: the RL step
time of the recipe at rollout.max_staleness 0 (lockstep) and 1 (step s+1's rollouts generated beside step s's
update), and lockstep with the update on packed trajectories (algo.pack: positions trained, update seconds, the
loss difference), three runs of rl.01_train of N steps each from --in, one after the other; the first step of
each (no batch collected ahead yet) is left out of the medians. Absolute numbers depend on the machine's load: compare
the ratios, measured back to back.
"""
from __future__ import annotations

import json
import statistics
import sys
import time
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m rl.bench_rl ...")

import torch  # noqa: E402

from model import cli  # noqa: E402
from model.config import ConfigError  # noqa: E402


def prompts(tok, n: int) -> list[list[int]]:
    import domains
    from domains import chat

    names = sorted(n_ for n_, d in domains.registry().items() if not d.needs_sandbox)
    out = []
    for i in range(n):
        d = domains.get(names[(i * 7) % len(names)])
        t = d.generate(i, min(d.difficulties))
        out.append(tok(chat.render(t.messages, add_generation_prompt=True), add_special_tokens=False)["input_ids"])
    return out


def hf_generate(hf_dir: Path, ps: list[list[int]], samples: int, tokens: int) -> float:
    from transformers import AutoModelForCausalLM

    m = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    torch.manual_seed(0)
    t0 = time.perf_counter()
    with torch.no_grad():
        for p in ps:  # one prompt x `samples` sequences per call: no padding asymmetry
            x = torch.tensor([p])
            out = m.generate(x, attention_mask=torch.ones_like(x), do_sample=True, temperature=1.0, top_k=0,
                             max_new_tokens=tokens, min_new_tokens=tokens, num_return_sequences=samples,
                             pad_token_id=0)
            assert out.shape[1] - x.shape[1] == tokens
    return time.perf_counter() - t0


def memcpy_seconds(tensors: list, reps: int) -> float:
    """Median seconds to copy every tensor into a preallocated one of the same shape and dtype."""
    dst = [torch.empty_like(t) for t in tensors]
    times = []
    for _ in range(max(reps, 1) + 1):  # the first pass warms the pages of dst
        t0 = time.perf_counter()
        for d, t in zip(dst, tensors):
            d.copy_(t)
        times.append(time.perf_counter() - t0)
    return statistics.median(times[1:])


def step_runs(a) -> dict:
    """Median RL step seconds (and their split) of the recipe in three runs of the same seeds and steps, one after
    the other: lockstep unpacked (max_staleness 0, algo.pack false; the baseline of both comparisons),
    max_staleness 1 unpacked, and lockstep with the update on packed trajectories."""
    import os
    import subprocess
    import tempfile

    from model.parallel import single_process_env

    arms = {"k0": ["rollout.max_staleness=0", "algo.pack=false"], "k1": ["rollout.max_staleness=1", "algo.pack=false"],
            "packed": ["rollout.max_staleness=0", "algo.pack=true"]}  # whatever the recipe says of either
    env = single_process_env()  # a run of its own: not this process's (destroyed) process group and its port
    runs = {}
    with tempfile.TemporaryDirectory(prefix="bench_rl_steps_") as tmp:
        for name, extra in arms.items():
            out = Path(tmp) / name
            sets = [f"train.steps={a.staleness_steps}", "eval.at_start=false", "eval.samples=0", "eval.per_domain=1",
                    f"train.save_every={a.staleness_steps}", *extra]
            cmd = [sys.executable, "-m", "rl.01_train", "--in", str(a.inp), "--data", str(a.data), "--out", str(out),
                   "--results", str(out) + ".results", "--recipe", a.recipe, *[x for s in sets for x in ("--set", s)]]
            load0 = os.getloadavg()
            r = subprocess.run(cmd, capture_output=True, text=True, env=env)
            if r.returncode:
                raise RuntimeError(f"bench run {name} ({' '.join(extra)}) failed:\n{r.stderr[-3000:]}")
            ms = [json.loads(x) for x in (Path(str(out) + ".results") / "metrics.jsonl").read_text().splitlines()]
            steady = ms[1:]  # k1's first step has no batch collected ahead yet
            runs[name] = {key: statistics.median(m[key] for m in steady)
                          for key in ("step_s", "rollout_s", "reward_s", "update_s", "sync_s", "positions",
                                      "mismatch_abs")}
            runs[name].update(steps=len(ms), timed_steps=len(steady), load_average_start=load0,
                              load_average_end=os.getloadavg(), sets=extra,
                              weight_versions=[m.get("weight_version") for m in ms],
                              rewards=[m["reward"] for m in ms], losses=[m["loss"] for m in ms])
    k0, k1, packed = runs["k0"], runs["k1"], runs["packed"]
    return {"staleness": {"k0": k0, "k1": k1, "ratio_step_s_k1_over_k0": k1["step_s"] / k0["step_s"],
                          "baseline": "the same recipe at rollout.max_staleness 0 (lockstep), unpacked, run just before"},
            "packing": {"unpacked": k0, "packed": packed,
                        "ratio_update_s_packed_over_unpacked": packed["update_s"] / k0["update_s"],
                        "ratio_positions_packed_over_unpacked": packed["positions"] / k0["positions"],
                        "ratio_step_s_packed_over_unpacked": packed["step_s"] / k0["step_s"],
                        # step 1 trains the same batch from the same weights; after it the weights differ in the
                        # 7th digit, and a sampled token can flip (one did at step 2 of a run at f83c604: 4 vs 5
                        # action tokens of one rollout), after which the batches differ
                        "step1_abs_loss_difference": abs(k0["losses"][0] - packed["losses"][0]),
                        "max_abs_loss_difference_all_steps": max(abs(x - y) for x, y in zip(k0["losses"],
                                                                                             packed["losses"])),
                        "baseline": "the same recipe unpacked (micro batches cut after their last trained position; "
                                    "the k0 run)"}}


def main(argv=None) -> int:
    ap = cli.parser(__doc__, inp="checkpoint with hf/, mcore/, tokenizer/", out="results JSON (results/bench/rl.json)")
    ap.add_argument("--metrics", type=Path, default=None, help="an RL run's metrics.jsonl for the step split")
    ap.add_argument("--prompts", type=int, default=16, help="prompts per batch")
    ap.add_argument("--samples", type=int, default=4, help="samples per prompt")
    ap.add_argument("--tokens", type=int, default=64, help="new tokens per sample")
    ap.add_argument("--sync-reps", type=int, default=3, help="timed weight syncs")
    ap.add_argument("--data", type=Path, default=None, help="domains datasets for the step runs")
    ap.add_argument("--recipe", default="tiny_cpu", help="rl recipe of the step runs")
    ap.add_argument("--staleness-steps", type=int, default=0,
                    help="steps of each step run (k = 0, k = 1, packed; 0 = skip, >= 3 to measure)")
    a = ap.parse_args(argv)
    from model import manifest, results

    with cli.input_errors():
        if a.staleness_steps and (a.data is None or a.staleness_steps < 3):
            raise ConfigError(f"--staleness-steps {a.staleness_steps} needs --data and >= 3 steps (the first of "
                              "each run is left out)")
        manifest.verify(a.inp)
        if a.staleness_steps:
            manifest.verify(a.data, stage="data")
    from transformers import PreTrainedTokenizerFast

    from model import checkpoint, parallel
    from model.build import build_model
    from model.config import ModelConfig, ParallelConfig
    from model.train import OptimConfig, setup
    from rl import sync
    from model.vllm_engine import EngineProcess

    tok = PreTrainedTokenizerFast.from_pretrained(str(a.inp / "tokenizer"))
    ps = prompts(tok, a.prompts)
    mcfg = ModelConfig.from_dict(json.loads((a.inp / "model_config.json").read_text()))
    gen_tokens = a.prompts * a.samples * a.tokens
    with EngineProcess(a.inp / "hf", max_model_len=mcfg.max_position_embeddings, seed=0) as eng:
        eng.generate(ps[:2], n=2, temperature=1.0, max_tokens=8, seed=0, ignore_eos=True)  # warm-up (n > 1 samples)
        t0 = time.perf_counter()
        outs = eng.generate(ps, n=a.samples, temperature=1.0, max_tokens=a.tokens, seed=1, ignore_eos=True)
        vllm_s = time.perf_counter() - t0
        assert sum(len(s.token_ids) for o in outs for s in o) == gen_tokens
        hf_s = hf_generate(a.inp / "hf", ps, a.samples, a.tokens)

        par = ParallelConfig(micro_batch_size=1, global_batch_size=1)
        parallel.init(par, mcfg, seed=0)
        model = build_model(mcfg, par)
        ddp, _, _ = setup(model, OptimConfig(warmup_steps=0), 1, 1)
        checkpoint.load_model_only(model, a.inp / "mcore")
        d = sync.sync_dir()
        syncs = [sync.sync(ddp, mcfg, eng, d / "hf", a.inp / "tokenizer") for _ in range(a.sync_reps)]
        import shutil
        import tempfile

        shutil.rmtree(d, ignore_errors=True)
        # the same sync through a directory on the disk (where the multi-process path stages), and the floor: a
        # memcpy of the trainer's weights into preallocated buffers (what an in-memory load could not beat)
        a.out.parent.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryDirectory(prefix="rl-sync-disk-", dir=str(a.out.parent.resolve())) as disk:
            disk_syncs = [sync.sync(ddp, mcfg, eng, Path(disk) / "hf", a.inp / "tokenizer") for _ in range(a.sync_reps)]
        memory_syncs = [sync.sync(ddp, mcfg, eng, d / "hf", a.inp / "tokenizer", in_memory=True)
                        for _ in range(a.sync_reps + 1)][1:]  # the first allocates the shared buffers
        memcpy_s = memcpy_seconds([p_.detach() for p_ in model.parameters()], a.sync_reps)
        parallel.destroy()
    split = None
    if a.metrics and a.metrics.exists():
        ms = [json.loads(x) for x in a.metrics.read_text().splitlines() if x.strip()]
        split = {k: statistics.median(m[k] for m in ms) for k in ("rollout_s", "reward_s", "update_s", "sync_s",
                                                                     "step_s")}
        split["steps"] = len(ms)
        split["source"] = str(a.metrics)
    nbytes = syncs[0]["sync_bytes"]
    numbers = {
        "rollout": {"prompts": a.prompts, "samples": a.samples, "new_tokens_each": a.tokens,
                    "vllm_tok_per_s": gen_tokens / vllm_s, "hf_generate_tok_per_s": gen_tokens / hf_s,
                    "ratio_vllm_over_hf": hf_s / vllm_s, "baseline": "transformers generate, same model/batch/tokens"},
        "weight_sync": {"model_bytes": nbytes, "export_s": statistics.median(s["export_s"] for s in syncs),
                        "reload_s": statistics.median(s["reload_s"] for s in syncs),
                        "sync_s": statistics.median(s["sync_s"] for s in syncs),
                        "gb_per_s": nbytes / 1e9 / statistics.median(s["sync_s"] for s in syncs), "reps": a.sync_reps,
                        "disk_dir_sync_s": statistics.median(s["sync_s"] for s in disk_syncs),
                        "memory_sync_s": statistics.median(s["sync_s"] for s in memory_syncs),
                        "memory_export_s": statistics.median(s["export_s"] for s in memory_syncs),
                        "memory_reload_s": statistics.median(s["reload_s"] for s in memory_syncs),
                        "memcpy_s": memcpy_s,
                        "ratio_sync_over_memcpy": statistics.median(s["sync_s"] for s in syncs) / memcpy_s,
                        "ratio_memory_sync_over_memcpy": statistics.median(s["sync_s"] for s in memory_syncs) / memcpy_s,
                        "paths": "sync_s: HF safetensors in /dev/shm + in-place reload (rollout.weight_sync files); "
                                 "memory_sync_s: the HF tensors in shared memory handed to the engine process, the same "
                                 "in-place reload (weight_sync memory, the default); disk_dir_sync_s: files through a "
                                 "directory beside --out; memcpy_s: the trainer's parameters copied into preallocated "
                                 "tensors (median of reps)"},
        "step_split_median_s": split,
        **(step_runs(a) if a.staleness_steps else {"staleness": None, "packing": None}),
    }
    results.write(a.out, "bench.rl", numbers, measured=a.inp)
    print(json.dumps(numbers, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
