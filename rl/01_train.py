"""RL with verifiable rewards over many domains: vLLM rollouts, domain verifiers, GRPO on Megatron-Core.

    # tiny CPU default (after `make sft data`)
    python -m rl.01_train --in checkpoints/sft --data data/domains --out checkpoints/rl
    # micro (tests): python -m rl.01_train --in CHAIN/sft --data CHAIN/domains --out /tmp/rl --recipe micro_cpu
    # 2 processes on the CPU: 2 engines, each generating half of every step's groups (rl/engines.py)
    torchrun --nproc-per-node 2 -m rl.01_train --in checkpoints/sft --data data/domains --out checkpoints/rl
    # ... with an expert-parallel trainer (each engine gets the other rank's experts in memory: rl/sync.py)
    torchrun --nproc-per-node 2 -m rl.01_train --in checkpoints/sft --data data/domains --out checkpoints/rl --set parallel.ep=2
    # cluster: one node of 8 H200, colocated engine with sleep/wake (see rl/recipes/qwen3_30b_a3b_h200x8.yaml)
    torchrun --nproc-per-node 8 -m rl.01_train --in checkpoints/sft --data data/domains --out checkpoints/rl --recipe qwen3_30b_a3b_h200x8

One step: the scheduler picks prompts -> the engines (one per rollout.tensor_parallel_size ranks) sample `samples_per_prompt` multi-turn rollouts each
(tools executed, observations appended) -> verifiers score them concurrently (infra errors excluded and
counted) -> group-normalized advantages; groups with all-equal rewards are dropped and refilled (dynamic
sampling) -> GRPO update on Megatron (TP/PP/EP from the recipe) -> weights synced into the engine in place.
Every `train.save_every` steps a step checkpoint (policy, optimizer, LR schedule, RNG, scheduler state and data
positions) goes to `<out>.run/`; a rerun resumes from it. Per step: one log line and a line of
`<results>/metrics.jsonl`. At the end: held-out evaluation, `<out>/` with mcore/, hf/, tokenizer/,
config.yaml and manifest.json (parent: the SFT checkpoint), and `<results>/eval.json`. The run itself (resume,
step checkpoints, publishing) is model/driver.py's, shared with pretraining and SFT; `Trainer` is RL's hooks.
"""
from __future__ import annotations

import json
import os
import random
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m rl.01_train ...")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from model import cli, manifest  # noqa: E402
from model.config import ConfigError  # noqa: E402
from model.driver import Hooks, drive  # noqa: E402


def parse(argv):
    ap = cli.parser(__doc__, "rl", inp="parent checkpoint (checkpoints/sft)",
                    data="domains datasets with rl/ and eval/ (data/domains)",
                    out="output checkpoint directory (checkpoints/rl)")
    ap.add_argument("--results", type=Path, default=Path("results/rl"), help="where metrics.jsonl and eval.json go")
    cli.recipe_args(ap, "rl", "train.steps=4 --set sched.mode=uniform")
    return ap.parse_args(argv)


def load_rows(data: Path, sched_cfg, seed: int) -> dict:
    """Domain -> RL tasks of the domains datasets, restricted by sched.families and sched.num_domains."""
    import datasets

    import domains
    from rl.scheduler import select_domains

    rows: dict[str, list] = defaultdict(list)
    fam: dict[str, str] = {}
    for r in datasets.load_from_disk(str(data / "rl")):
        if sched_cfg.families and r["family"] not in sched_cfg.families:
            continue
        rows[r["domain"]].append(domains.Task.from_dict(json.loads(r["task"])))
        fam[r["domain"]] = r["family"]
    if not rows:
        raise ConfigError(f"no RL tasks in {data / 'rl'} for sched.families={sched_cfg.families}: "
                          "check the datasets' families or the recipe")
    keep = select_domains(sorted(rows), fam, sched_cfg.num_domains, seed)
    return {n: rows[n] for n in keep}


def main(argv=None) -> int:
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: where is a long step?
    a = parse(argv)
    from model import loop, recipe
    from rl.config import RLConfig

    with cli.input_errors(ValueError):  # ValueError too, as before: RL tasks that fail to load from --data
        loaded = recipe.load_recipe("rl", a.recipe, a.overrides)  # a mistyped key fails before any input is read
        parent = manifest.verify(a.inp)  # any stage with mcore/, hf/, tokenizer/ (normally sft)
        if not (a.data / "manifest.json").exists():
            raise manifest.CheckpointError(f"{a.data}: no domains datasets manifest; run `make data`")
        data_m = manifest.verify(a.data, stage="data")
        if not (a.data / "rl").is_dir() or not (a.data / "eval").is_dir():
            raise manifest.CheckpointError(f"{a.data}: missing rl/ or eval/; rerun `python -m domains datasets`")
        rc = loop.resolve("rl", a.recipe, a.overrides, model_dict=parent["model_config"], loaded=loaded)
        cfg = RLConfig.from_dict(rc.cfg)
        ws = int(os.environ.get("WORLD_SIZE", "1"))
        cfg.check_batch(rc.parallel.global_batch_size, rc.parallel.micro_batch_size,
                        rc.parallel.data_parallel_size(ws), ws, rc.parallel.pp, rc.train["seq_length"])
        ro = cfg.rollout
        if (ro.record_routing or ro.router_flip_frac) and not rc.model.is_moe:
            raise ConfigError("rollout.record_routing / router_flip_frac need a mixture-of-experts policy "
                              f"(model.num_experts={rc.model.num_experts}): set them false / 0")
        if ro.quantization != "none":
            from model import quantize

            want, why = quantize.serve_dtype()
            if ro.dtype != want:
                raise ConfigError(f"rollout.quantization={ro.quantization} runs in {want} on this machine ({why}): "
                                  f"set rollout.dtype={want}")
        if not ro.evaluates_itself(torch.cuda.is_available()) and rc.parallel.ep > 1:
            raise ConfigError(f"a quantized, flipped or non-float32 rollout engine leaves evaluation to a float32 engine "
                              f"on rank 0's weights, which needs parallel.ep=1 (is {rc.parallel.ep})")
        per_node = int(os.environ.get("LOCAL_WORLD_SIZE", ws))
        if torch.cuda.is_available() and cfg.rollout.engines == "spread" and cfg.rollout.tensor_parallel_size > per_node:
            raise ConfigError(f"rollout.tensor_parallel_size={cfg.rollout.tensor_parallel_size} > {per_node} GPUs per "
                              "node: an engine process spans one node here (a multi-node engine needs vLLM's Ray "
                              "backend, not built); lower it to fit a node")
        rows = load_rows(a.data, cfg.sched, rc.train["seed"])
        import domains
        from domains.sandboxing import available

        needs_box = any(domains.get(n).needs_sandbox for n in rows)
        if needs_box and not available():
            raise ConfigError("code/terminal domains need the sandbox package, which does not import: "
                              "set sched.families to exclude them")
    return drive(rc, a.out, Trainer(a, rc, cfg, rows, data_m, needs_box))


class Trainer(Hooks):
    """RL's hooks of the run skeleton (model/driver.py): rollouts, rewards, GRPO update and weight sync per step;
    engine owners (rl/engines.py) generate and score their share of each step's groups; rank 0 holds the task
    scheduler and the metrics file, whose state goes in step checkpoints, and evaluates with its engine."""
    stage = "rl"
    metrics_json = dict(sort_keys=True, default=float)

    def __init__(self, a, rc, cfg, rows, data_m, needs_box):
        self.a, self.rc, self.cfg, self.rows, self.data_m, self.needs_box = a, rc, cfg, rows, data_m, needs_box
        self.parent, self.tokenizer_dir = a.inp, a.inp / "tokenizer"
        self.metrics_path = a.results / "metrics.jsonl"
        self.updates_per_step = cfg.algo.minibatches
        self.scheduler = self.engine = self.pool = self.renderer = self.sync_dir = self.layout = self.ex = None
        self.replay = self.quant = self.eval_engine = None
        self.start_eval = self.start_records = None
        self.ahead: dict[int, tuple] = {}  # rank 0: step -> (samples, metrics) collected ahead (max_staleness > 0)

    # ---- set-up -------------------------------------------------------------------------------------
    def prepare(self):
        from model import checkpoint
        from model.build import build_model

        self.ref = None
        if self.cfg.algo.kl_coef:  # the frozen parent, for the KL term
            self.ref = build_model(self.rc.model, self.rc.parallel, getattr(torch, self.rc.train["dtype"]),
                                   self.rc.train["fuse_elementwise"], self.rc.train["cpu_attention"])
            checkpoint.load_model_only(self.ref, self.a.inp / "mcore")
            self.ref.eval()

    def setup(self, common):
        from model import checkpoint, parallel
        from rl.engines import Exchange, Layout
        from rl.sync import sync_dir

        r, par, ro = self.run, self.rc.parallel, self.cfg.rollout
        if common is None:
            checkpoint.load_model_only(r.model, self.a.inp / "mcore")
        if ro.record_routing:  # the policy's routers compare with (and with algo.routing_replay, use) the engine's
            from rl.routing import Replay

            self.replay = Replay(r.model, replay=self.cfg.algo.routing_replay)
        # one process: tmpfs; several: the run directory, which every rank (and node) sees at the same path
        self.sync_dir = sync_dir(str(r.run_dir.resolve())) if parallel.world_size() == 1 else r.run_dir / "sync"
        self.layout = Layout.of(parallel.world_size(), parallel.rank(), ro.tensor_parallel_size, ro.engines)
        self.ex = Exchange()
        if r.rank0:
            self._setup_rank0(common)
        if self.layout.owner:
            self._setup_engine()
        r.log(f"rl: {self.rc.model.num_parameters() / 1e6:.2f}M parameters, TP={par.tp} PP={par.pp} EP={par.ep} "
              f"DP={par.data_parallel_size(parallel.world_size())}, {self.layout.count} rollout engine(s), {r.total}"
              f" steps x {ro.groups_per_step} groups x {ro.samples_per_prompt} samples, {len(self.rows)} domains")
        if r.start:  # the engine started from the parent: give it the resumed policy
            self._sync()
        if self.cfg.eval.at_start and not r.start and r.rank0:
            self.start_eval, self.start_records = self.evaluate()
            r.log("eval step 0 | " + _eval_line(self.start_eval))
        self.t_start = time.perf_counter()

    def _setup_rank0(self, common):
        from transformers import PreTrainedTokenizerFast

        from rl.scheduler import Scheduler

        tr = self.rc.train
        tok = PreTrainedTokenizerFast.from_pretrained(str(self.a.inp / "tokenizer"))
        self.pad_id = tok.pad_token_id if tok.pad_token_id is not None else 0
        self.scheduler = Scheduler(self.rows, self.cfg.sched, seed=tr["seed"],
                                   data_seed=int(self.data_m.get("seed", 0)))
        if common is not None:
            self.start_eval = common.get("start_eval")
            self.start_records = common.get("start_records")
            self.scheduler.load_state_dict(common["sched"])
            self.ahead = dict(common.get("ahead") or {})
            random.setstate(_tuple_state(common["py_rng"]))
            np.random.set_state(tuple(common["np_rng"]))
        self.a.results.mkdir(parents=True, exist_ok=True)

    def _setup_engine(self):
        """This rank's engine (on its ranks' GPUs), the renderer and the sandbox pool its share of rollouts needs."""
        from transformers import PreTrainedTokenizerFast

        from model.vllm_engine import EngineProcess
        from rl.engines import Layout
        from rl.trajectory import Renderer

        tr, ro = self.rc.train, self.cfg.rollout
        self.renderer = Renderer(PreTrainedTokenizerFast.from_pretrained(str(self.a.inp / "tokenizer")))
        if self.needs_box:
            from domains.sandboxing import make_pool

            self.pool = make_pool(self.cfg.reward.sandbox_slots)
        gpu = torch.cuda.is_available()
        devices = Layout.devices(int(os.environ.get("LOCAL_RANK", "0")), ro.tensor_parallel_size) if gpu else None
        hf = self._quantized(self.a.inp / "hf") if ro.quantization != "none" else self.a.inp / "hf"
        self.engine = EngineProcess(hf, max_model_len=tr["seq_length"], seed=tr["seed"],
                                    kv_cache_gib=ro.kv_cache_gib, gpu_memory_utilization=ro.gpu_memory_utilization,
                                    enable_sleep_mode=gpu and ro.sleep_between, dtype=ro.dtype,
                                    tensor_parallel_size=ro.tensor_parallel_size, devices=devices,
                                    record_routing=ro.record_routing, router_flip_frac=ro.router_flip_frac)

    def _quantized(self, src: Path) -> Path:
        """The parent's weights W8A8-quantized (model/quantize.py) for the engine's start; self.quant: how every
        sync quantizes (experts only where this machine has a kernel, int8 range as the serving variant's)."""
        from model import hf_io, parallel, quantize

        ro = self.cfg.rollout
        experts = quantize.experts_supported(ro.dtype)[0]
        self.quant = {"scheme": ro.quantization, "experts": experts, "int_max": quantize.int8_weight_max()[0]}
        tensors = hf_io.load_hf(src)[0]
        dst = self.sync_dir / f"quantized_rank{parallel.rank()}"
        quantize.save_quantized(quantize.quantize_tensors(tensors, **self.quant)[0], src, dst, ro.quantization, experts)
        return dst

    # ---- one step's data (every rank takes part; rank 0 gets it) -----------------------------------------
    def generate(self, picks: list[tuple], seed: int) -> tuple[list, list, float, float] | None:
        """Every rank: this rank's engine (if it owns one) rolls out and scores its share of the groups `picks`
        ((domain name, Task) each); on rank 0 (rollouts, rewards, seconds of the slowest engine's rollouts and of
        its rewards) of all groups in order, None elsewhere."""
        import domains
        from rl import engines, rewards, trajectory

        ro, rw, n = self.cfg.rollout, self.cfg.reward, self.cfg.rollout.samples_per_prompt
        mine = self.layout.groups(len(picks))
        t0 = time.perf_counter()
        rolls = trajectory.rollout(self.engine, self.renderer, [(domains.get(picks[g][0]), picks[g][1]) for g in mine],
                                   n=n, temperature=ro.temperature, top_p=ro.top_p, max_tokens=ro.max_tokens,
                                   seed=seed, pool=self.pool, sandbox_slots=rw.sandbox_slots, max_turns=ro.max_turns,
                                   long_timeout_s=ro.long_timeout_s, tool_retries=ro.tool_retries,
                                   retry_backoff_s=ro.tool_retry_backoff_s, groups=mine) if mine else []
        t1 = time.perf_counter()
        scores = rewards.score_all(rolls, self.pool, rw) if rolls else []
        t2 = time.perf_counter()
        parts = self.ex.gather((mine, engines.pack(rolls) if self.ex.on else rolls, scores, t1 - t0, t2 - t1))
        if parts is None:
            return None
        by_group = {g: (p[1][i * n:(i + 1) * n], p[2][i * n:(i + 1) * n]) for p in parts for i, g in enumerate(p[0])}
        rolls = [x for g in range(len(picks)) for x in by_group[g][0]]
        scores = [x for g in range(len(picks)) for x in by_group[g][1]]
        if self.ex.on:
            engines.unpack(rolls)
        return rolls, scores, max(p[3] for p in parts), max(p[4] for p in parts)

    def collect(self, step: int) -> tuple[list, dict] | tuple[None, None]:
        from rl import objective, rewards, trajectory

        ro, rw = self.cfg.rollout, self.cfg.reward
        n, want = ro.samples_per_prompt, ro.groups_per_step
        kept: list[tuple[list, list]] = []  # (rollouts, advantages) of groups used for training
        fam = defaultdict(lambda: {"samples": 0, "reward": 0.0, "passed": 0, "scored": 0, "infra": 0})
        t_roll = t_rew = 0.0
        groups = flat = infra = truncated = gen_tokens = gen_samples = 0
        lanes = defaultdict(int)  # tool_retries, tool_infra_failed, rollouts_cut
        rounds = 0
        for rnd in range(ro.max_rounds if ro.dynamic_sampling else 1):
            need = want - len(kept)
            picks = [(d.name, t) for d, t in self.scheduler.next(need)] if self.run.rank0 and need > 0 else []
            picks = self.ex.bcast(picks)  # rank 0's draws, for every engine
            if not picks:
                break
            rounds += 1
            got = self.generate(picks, self.rc.train["seed"] * 1_000_003 + step * 10_007 + rnd * 1_009)
            if got is None:  # not rank 0: its share is generated and sent
                continue
            rolls, scores, dt_roll, dt_rew = got
            for k, v in trajectory.lane_metrics(rolls).items():
                lanes[k] += v
            t_roll += dt_roll
            t_rew += dt_rew
            gen_tokens += sum(len(s.token_ids) for r in rolls for s in r.turns)
            gen_samples += len(rolls)
            self.run.log(f"  step {step + 1} round {rnd + 1}: {len(rolls)} rollouts "
                         f"({sum(len(r.turns) for r in rolls)} turns, "
                         f"{sum(len(s.token_ids) for r in rolls for s in r.turns)}"
                         f" tokens) in {dt_roll:.1f}s, rewards in {dt_rew:.1f}s")
            values = [None if s.infra_error else rewards.shaped(r, s, rw.format_weight) for r, s in zip(rolls, scores)]
            adv, informative = objective.group_advantages(values, n, self.cfg.algo.normalize_std)
            self.scheduler.update([(r.domain.name, r.task.difficulty, s.passed) for r, s in zip(rolls, scores)
                                   if not s.infra_error])
            for r, s, v in zip(rolls, scores, values):
                f = fam[r.task.family]
                f["samples"] += 1
                truncated += int(r.truncated)
                if s.infra_error:
                    f["infra"] += 1
                    infra += 1
                    continue
                f["scored"] += 1
                f["reward"] += v
                f["passed"] += int(s.passed)
            for g, ok in enumerate(informative):
                groups += 1
                flat += int(not ok)
                if ok or not ro.dynamic_sampling:
                    kept.append((rolls[g * n:(g + 1) * n], adv[g * n:(g + 1) * n]))
        if not self.run.rank0:
            return None, None
        kept = kept[:want]
        used = [r for g in kept for r in g[0]]
        # pipeline stages exchange fixed shapes; otherwise pad only to the step's longest trajectory
        length = self.rc.train["seq_length"] if self.rc.parallel.pp > 1 else \
            objective.batch_length(used, self.rc.train["seq_length"])
        rshape = (self.rc.model.num_layers, self.rc.model.moe_router_topk) if ro.record_routing else None
        samples = objective.build_samples(used, [x for g in kept for x in g[1]], length, self.pad_id, rshape)
        samples += [objective.empty_sample(length, self.pad_id, rshape) for _ in range(want * n - len(samples))]
        scored = sum(f["scored"] for f in fam.values())
        m = {"rollout_s": t_roll, "reward_s": t_rew, "rounds": rounds, "groups_rolled": groups,
             "groups_used": len(kept), "zero_var_frac": flat / max(groups, 1), "infra_errors": infra,
             "samples_generated": gen_samples, "generated_tokens": gen_tokens,  # every round, used or not
             "tool_retries": lanes["tool_retries"], "tool_infra_failed": lanes["tool_infra_failed"],
             "rollouts_cut": lanes["rollouts_cut"],
             "truncated_frac": truncated / max(sum(f["samples"] for f in fam.values()), 1),
             "reward": sum(f["reward"] for f in fam.values()) / max(scored, 1),
             "pass_rate": sum(f["passed"] for f in fam.values()) / max(scored, 1),
             "per_family": {k: {"reward": f["reward"] / f["scored"] if f["scored"] else None,
                                "pass_rate": f["passed"] / f["scored"] if f["scored"] else None,
                                "samples": f["samples"], "infra_errors": f["infra"]} for k, f in sorted(fam.items())}}
        return samples, m

    # ---- the update (all ranks) ---------------------------------------------------------------------------
    def update(self, samples: list[dict]) -> dict:
        from model import train
        from rl import policy

        par, seq = self.rc.parallel, samples[0]["tokens"].shape[0]
        k = self.cfg.algo.minibatches
        per = len(samples) // k
        untrimmed = len(train.dp_share(len(samples))) * seq  # this rank's samples, padded to the step's longest
        if self.cfg.algo.pack:  # this rank's share of each minibatch, packed into rows (PP=1: check_batch)
            minis = [self._packed(samples[j * per:(j + 1) * per]) for j in range(k)]
        else:  # minibatch j is "global step 0" of its own sample list: microbatches() splits it over DP ranks
            minis = [train.microbatches(lambda i, j=j: samples[j * per + i], 0, par) for j in range(k)]
            if par.pp == 1:  # no stage-to-stage shapes to keep: each micro batch only as long as its trained part
                from rl.objective import trim_microbatch

                minis = [[trim_microbatch(b) for b in mbs] for mbs in minis]
        for mbs in minis:
            if self.ref is not None:
                for b, lp in zip(mbs, policy.logprobs(self.ref, mbs, seq, self.cfg.rollout.temperature) or []):
                    b["ref_logprobs"] = lp
            if k > 1:  # the ratio's denominator: the policy before any minibatch of this batch
                for b, lp in zip(mbs, policy.logprobs(self.run.ddp, mbs, seq, self.cfg.rollout.temperature,
                                                      self.replay) or []):
                    b["old_logprobs"] = lp
        ms = [policy.update(self.run.ddp, self.run.opt, self.run.sched, mbs, seq, par.global_batch_size, self.cfg.algo,
                            self.cfg.rollout.temperature, self.replay) for mbs in minis]
        out = dict(ms[0])
        w = [m["action_tokens"] for m in ms]  # per-token statistics: weigh minibatches by their tokens
        for key in ("loss", "clip_frac", "mismatch_abs", "mismatch_kl", "tis_capped_frac", "is_masked_frac", "kl_ref"):
            out[key] = float(np.average([m[key] for m in ms], weights=w)) if sum(w) else 0.0
        if self.replay is not None:
            rt = [m["routing_tokens"] for m in ms]
            out["routing_tokens"] = sum(rt)
            out["routing_differ_frac"] = float(np.average([m["routing_differ_frac"] for m in ms], weights=rt)) \
                if sum(rt) else 0.0
        out["grad_norm"] = float(np.mean([m["grad_norm"] for m in ms]))
        out["update_s"] = sum(m["update_s"] for m in ms)
        out["action_tokens"] = sum(m["action_tokens"] for m in ms)
        out["lr"] = ms[-1]["lr"]
        out["positions"] = sum(b["tokens"].numel() for mbs in minis for b in mbs)  # this rank's, as trained
        out["positions_untrimmed"] = untrimmed  # padded to the step's longest trajectory
        return out

    def _packed(self, mini: list[dict]) -> list[dict]:
        """This DP rank's share of a minibatch as packed micro batches (rl/packing.py), as many on every DP rank."""
        from megatron.core import parallel_state as ps

        from model import train
        from rl import packing

        mbs = packing.pack([mini[i] for i in train.dp_share(len(mini))], self.rc.train["seq_length"],
                           self.rc.parallel.micro_batch_size, row_length=self.cfg.algo.pack_length)
        n = torch.tensor([max(len(mbs), 1)])
        if ps.get_data_parallel_world_size() > 1:
            torch.distributed.all_reduce(n, op=torch.distributed.ReduceOp.MAX, group=ps.get_data_parallel_group())
        return mbs + [packing.empty_microbatch() for _ in range(int(n) - len(mbs))]

    # ---- the run's hooks ----------------------------------------------------------------------------------
    def close(self):
        for name in ("engine", "eval_engine"):
            if getattr(self, name) is not None:
                getattr(self, name).close()
                setattr(self, name, None)
        if self.pool is not None:
            self.pool.close()
            self.pool = None
        if self.sync_dir is not None:
            shutil.rmtree(self.sync_dir, ignore_errors=True)
            self.sync_dir = None

    def _sync(self) -> dict:
        from rl import sync

        return sync.sync(self.run.ddp, self.rc.model, self.engine, self.sync_dir / "hf", self.a.inp / "tokenizer",
                         in_memory=self.cfg.rollout.weight_sync == "memory",
                         layout_ok=sync.memory_layout(self.rc.parallel), quant=self.quant)

    def _collect_versioned(self, step: int, version: int) -> tuple[list, dict] | tuple[None, None]:
        samples, m = self.collect(step)
        if m is not None:
            m.update(weight_version=version, staleness=step - version)
        return samples, m

    def step(self, step: int) -> None:
        """Step `step` + 1. With rollout.max_staleness k > 0 the engine, which holds the weights of this step
        (version `step`), also generates the rollouts of the steps up to step + k that are not collected yet (all
        of 1..k at step 0, then step + k), beside the update when rollout.overlap is on. So the rollouts of step s
        always come from version max(0, s - k), whatever the timing; the batches collected ahead are part of the
        step checkpoint, and at k = 0 this is the lockstep loop."""
        from model import parallel

        r, ro = self.run, self.cfg.rollout
        t0 = time.perf_counter()
        samples = m = None
        now, later = True, []
        if r.rank0:  # rank 0 holds the batches collected ahead: it says what every engine generates
            now = step not in self.ahead
            later = [s for s in range(step + 1, min(step + ro.max_staleness, r.total - 1) + 1) if s not in self.ahead]
        now, later = self.ex.bcast((now, later))
        if now:
            samples, m = self._collect_versioned(step, step)
        elif r.rank0:
            samples, m = self.ahead.pop(step)
        if parallel.world_size() > 1:
            box = [samples]
            torch.distributed.broadcast_object_list(box, src=0)
            samples = box[0]
        done: list[int] = []

        def collect_later():  # with the engines' weights of version `step`
            for s in later:
                got = self._collect_versioned(s, step)
                if r.rank0:
                    self.ahead[s] = got
                done.append(s)

        worker = None
        if later and ro.overlap:  # the engine generates while the trainer updates
            import threading

            worker = threading.Thread(target=collect_later, name="rl-collect-ahead")
            worker.start()
        gpu = torch.cuda.is_available() and ro.sleep_between and worker is None  # a generating engine stays awake
        if gpu and r.rank0:
            self.engine.sleep()
        try:
            u = self.update(samples)
        finally:
            if worker is not None:
                worker.join()
        if gpu and r.rank0:
            self.engine.wake()
        if later and not ro.overlap:  # the same batches, after the update instead of beside it
            collect_later()
        if done != later:
            raise RuntimeError(f"collecting the rollouts of steps {later} ahead failed (see the log above)")
        s = self._sync()
        if r.rank0:
            self._record(step, m, u, s, t0)

    def _record(self, step, m, u, s, t0):
        from model.train import fmt_time

        r, total = self.run, self.run.total
        m.update(u)
        m.update(s)
        m.update(step=step + 1, step_s=time.perf_counter() - t0, sched_levels=_levels(self.scheduler))
        eval_table = None
        if r.due(self.cfg.eval.every, step + 1):
            eval_table = self.evaluate()[0]
            m["eval"] = eval_table
        r.record(m)
        elapsed = time.perf_counter() - self.t_start
        done = step + 1 - r.start
        r.log(f"step {step + 1}/{total} | reward {m['reward']:.4f} | pass {m['pass_rate']:.4f} | "
              f"zero_var {m['zero_var_frac']:.2f} | groups {m['groups_used']}/{self.cfg.rollout.groups_per_step} "
              f"| infra {m['infra_errors']} (cut {m['rollouts_cut']}, retries {m['tool_retries']}) "
              f"| loss {m['loss']:.5f} | mismatch {m['mismatch_abs']:.2e} | "
              + (f"routing differs {m['routing_differ_frac']:.3f} | " if "routing_differ_frac" in m else "")
              + (f"weights v{m['weight_version']} (stale {m['staleness']}) | " if self.cfg.rollout.max_staleness else "")
              + f"grad_norm {m['grad_norm']:.3f} | rollout {m['rollout_s']:.1f}s reward {m['reward_s']:.1f}s "
              f"update {m['update_s']:.1f}s sync {m['sync_s']:.2f}s | elapsed {fmt_time(elapsed)} | "
              f"eta {fmt_time((total - step - 1) * elapsed / done)}")
        if "eval" in m:
            r.log("eval step " + str(step + 1) + " | " + _eval_line(eval_table))

    def state(self) -> dict:
        """Rank 0's scheduler, RNG, the evaluation at start and the batches collected ahead: a resumed run
        continues them."""
        return {"sched": self.scheduler.state_dict(), "py_rng": random.getstate(), "np_rng": np.random.get_state(),
                "start_eval": self.start_eval, "start_records": self.start_records, "ahead": dict(self.ahead)}

    def evaluate(self) -> tuple[dict, list[dict]]:
        """(table, per-item records) of the engine's weights under the project's one protocol (domains.evaluate);
        every call sees the same items and seeds."""
        from domains import evaluate

        e, ro, rw = self.cfg.eval, self.cfg.rollout, self.cfg.reward
        items = evaluate.eval_items(self.a.data, e.per_domain, e.splits, e.families or self.cfg.sched.families)
        recs = evaluate.run(evaluate.EngineTarget(self._eval_engine(), "rl"), items, self.pool, n=max(e.samples, 1),
                            temperature=e.temperature if e.samples else 0.0, seed=e.seed, max_tokens=e.max_tokens,
                            slots=rw.sandbox_slots, budget_s=ro.long_timeout_s or None, tool_retries=ro.tool_retries,
                            retry_backoff_s=ro.tool_retry_backoff_s,
                            verify=dict(timeout_s=rw.timeout_s, sandbox_timeout_s=rw.sandbox_timeout_s,
                                        workers=rw.workers, sandbox_slots=rw.sandbox_slots))
        return evaluate.summarize(recs), recs

    def _eval_engine(self):
        """The rollout engine, or where it is not the protocol's (RolloutConfig.evaluates_itself) a float32 engine
        of its own, loaded with the trainer's current weights (rank 0; parallel.ep=1 is checked before work)."""
        ro = self.cfg.rollout
        if ro.evaluates_itself(torch.cuda.is_available()):
            return self.engine
        from model.vllm_engine import EngineProcess
        from rl import sync

        if self.eval_engine is None:
            self.eval_engine = EngineProcess(self.a.inp / "hf", max_model_len=self.rc.train["seq_length"],
                                             seed=self.rc.train["seed"], kv_cache_gib=ro.kv_cache_gib)
        self.eval_engine.load_weights(sync.shared_hf_tensors(self.run.ddp, self.rc.model, pool=sync.EVAL_SHARED))
        return self.eval_engine

    def finish(self) -> None:
        self.table, self.recs = self.evaluate() if self.run.rank0 else (None, None)

    def write_collective(self, tmp: Path) -> None:
        """hf/ of the trained policy (sync.write_hf: every rank takes part, rank 0 writes)."""
        from rl import sync

        sync.write_hf(self.run.ddp, self.rc.model, tmp / "hf", self.a.inp / "tokenizer")

    def publish_extras(self, tmp: Path) -> tuple[dict, dict]:
        from domains import evaluate
        from model import hf_io

        table, start_eval = self.table, self.start_eval
        self.run.log("eval final | " + _eval_line(table))
        hf_io.copy_tokenizer(self.a.inp / "tokenizer", tmp / "hf")
        self.delta = evaluate.paired_delta(self.start_records, self.recs) if self.start_records else None
        if self.delta:
            self.run.log("eval delta vs step 0 | " + _delta_line(self.delta))
        self.metrics = {
            "steps": self.rc.train["steps"], "resumed_at": self.run.start, "eval": table,
            "heldout_pass_rate": (table.get("all", {}).get("heldout") or {}).get("pass_rate"),
            "eval_at_start": start_eval,
            "heldout_pass_rate_at_start": ((start_eval or {}).get("all", {}).get("heldout") or {}).get("pass_rate"),
            "heldout_delta": ((self.delta or {}).get("all") or {}).get("heldout"),
            "eval_protocol": {k: getattr(self.cfg.eval, k) for k in ("samples", "temperature", "seed", "per_domain",
                                                                     "splits", "families")},
            "last_step": _last_metrics(self.metrics_path)}
        data = {"data": {"path": str(self.a.data),
                         "manifest_sha256": manifest.sha256_file(self.a.data / "manifest.json")},
                "rl_config": self.cfg.to_dict(), "scheduler": self.scheduler.summary()}
        return self.metrics, data

    def published(self) -> None:
        """results/rl/eval.json names the published checkpoint's manifest."""
        from model import results

        results.write(self.a.results / "eval.json", "rl.eval",
                      {"per_family": self.table, "steps": self.rc.train["steps"],
                       "per_family_at_start": self.start_eval, "paired_delta": self.delta,
                       "protocol": self.metrics["eval_protocol"], "items": self.recs,
                       "items_at_start": self.start_records, "recipe": self.rc.cfg.get("recipe")},
                      measured=self.a.out)


def _tuple_state(st):
    return (st[0], tuple(st[1]), st[2])


def _levels(s) -> dict:
    c: dict[str, int] = defaultdict(int)
    for v in s.level.values():
        c[str(v)] += 1
    return dict(c)


def _eval_line(table: dict) -> str:
    parts = []
    for split in ("train", "heldout"):
        g = (table.get("all") or {}).get(split)
        if g:
            pr = g["pass_rate"]
            parts.append(f"{split} pass {pr:.4f} [{g['ci95'][0]:.4f}, {g['ci95'][1]:.4f}] ({g['passed']}/"
                         f"{g['samples']} samples of {g['tasks']} tasks, {g['infra_errors']} infra)" if pr is not None
                         else f"{split} n/a")
    fams = [f"{f} {c['heldout']['pass_rate']:.3f}" for f, c in sorted(table.items())
            if f != "all" and (c.get("heldout") or {}).get("pass_rate")]
    return " | ".join(parts + (["heldout by family: " + ", ".join(fams)] if fams else []))


def _delta_line(delta: dict) -> str:
    parts = []
    for fam, cells in sorted(delta.items(), key=lambda x: x[0] != "all"):
        for split, d in sorted(cells.items()):
            parts.append(f"{fam}/{split} {d['delta']:+.4f} [{d['ci95'][0]:+.4f}, {d['ci95'][1]:+.4f}] by tasks, "
                         f"[{d['ci95_domains'][0]:+.4f}, {d['ci95_domains'][1]:+.4f}] by domains ({d['better']} better, "
                         f"{d['worse']} worse of {d['tasks']} tasks; {d['domains_better']} better, "
                         f"{d['domains_worse']} worse of {d['domains']} domains)")
    return " | ".join(parts)


def _last_metrics(path: Path) -> dict | None:
    if not path.exists():
        return None
    lines = [ln for ln in path.read_text().splitlines() if ln.strip()]
    if not lines:
        return None
    m = json.loads(lines[-1])
    return {k: v for k, v in m.items() if not isinstance(v, dict)}


if __name__ == "__main__":
    sys.exit(main())
