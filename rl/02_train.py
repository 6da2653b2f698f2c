"""RL with verifiable rewards over many domains: vLLM rollouts, domain verifiers, GRPO on Megatron-Core.

    # tiny CPU default (after `make sft data`)
    python -m rl.02_train --in checkpoints/sft --data data/domains --out checkpoints/rl
    # micro (tests): python -m rl.02_train --in CHAIN/sft --data CHAIN/domains --out /tmp/rl --recipe micro_cpu
    # 2 processes on the CPU, expert-parallel trainer (rank 0 owns the rollout engine)
    torchrun --nproc-per-node 2 -m rl.02_train --in checkpoints/sft --data data/domains --out checkpoints/rl --set parallel.ep=2
    # cluster: one node of 8 H200, colocated engine with sleep/wake (see rl/recipes/qwen3_30b_a3b_h200x8.yaml)
    torchrun --nproc-per-node 8 -m rl.02_train --in checkpoints/sft --data data/domains --out checkpoints/rl --recipe qwen3_30b_a3b_h200x8

One step: the scheduler picks prompts -> the engine samples `samples_per_prompt` multi-turn rollouts each
(tools executed, observations appended) -> verifiers score them concurrently (infra errors excluded and
counted) -> group-normalized advantages; groups with all-equal rewards are dropped and refilled (dynamic
sampling) -> GRPO update on Megatron (TP/PP/EP from the recipe) -> weights synced into the engine in place.
Every `train.save_every` steps a step checkpoint (policy, optimizer, LR schedule, RNG, scheduler state and data
positions) goes to `<out>.run/`; a rerun resumes from it. Per step: one log line and a line of
`<results>/metrics.jsonl`. At the end: held-out evaluation, `<out>/` with mcore/, hf/, tokenizer/,
config.yaml and manifest.json (parent: the SFT checkpoint), and `<results>/eval.json`.
"""
from __future__ import annotations

import argparse
import json
import os
import random
import shutil
import sys
import time
from collections import defaultdict
from pathlib import Path

if not __package__:  # run by path: the project's packages import from the repository root, as modules
    sys.exit("error: run it from the repository root as a module: python -m rl.02_train ...")

import numpy as np  # noqa: E402
import torch  # noqa: E402

from model import manifest  # noqa: E402
from model.config import ConfigError  # noqa: E402


def parse(argv):
    from model import sections

    ap = argparse.ArgumentParser(description=__doc__, epilog=sections.epilog("rl"),
                                 formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--in", dest="inp", type=Path, required=True, help="parent checkpoint (checkpoints/sft)")
    ap.add_argument("--data", type=Path, required=True, help="domains export with rl/ and eval/ (data/domains)")
    ap.add_argument("--out", type=Path, required=True, help="output checkpoint directory (checkpoints/rl)")
    ap.add_argument("--results", type=Path, default=Path("results/rl"),
                    help="where metrics.jsonl and eval.json go")
    ap.add_argument("--recipe", default="tiny_cpu", help="rl/recipes/<name>.yaml or a path")
    ap.add_argument("--set", dest="overrides", action="append", default=[], metavar="KEY=VALUE",
                    help="override a recipe value, e.g. --set train.steps=4 --set sched.mode=uniform")
    return ap.parse_args(argv)


def load_rows(data: Path, sched_cfg, seed: int) -> dict:
    """Domain -> exported RL tasks, restricted by sched.families and sched.num_domains."""
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
                          "check the export's families or the recipe")
    keep = select_domains(sorted(rows), fam, sched_cfg.num_domains, seed)
    return {n: rows[n] for n in keep}


def main(argv=None) -> int:
    import faulthandler
    import signal

    faulthandler.register(signal.SIGUSR1, all_threads=True)  # `kill -USR1 <pid>`: where is a long step?
    a = parse(argv)
    from model import loop, recipe
    from rl.config import RLConfig

    try:
        loaded = recipe.load_recipe("rl", a.recipe, a.overrides)  # a mistyped key fails before any input is read
        parent = manifest.verify(a.inp)  # any stage with mcore/, hf/, tokenizer/ (normally sft)
        if not (a.data / "manifest.json").exists():
            raise manifest.CheckpointError(f"{a.data}: no domains export manifest; run `make data`")
        data_m = manifest.verify(a.data, stage="data")
        if not (a.data / "rl").is_dir() or not (a.data / "eval").is_dir():
            raise manifest.CheckpointError(f"{a.data}: missing rl/ or eval/; rerun `python -m domains datasets`")
        rc = loop.resolve("rl", a.recipe, a.overrides, model_dict=parent["model_config"], loaded=loaded)
        cfg = RLConfig.from_dict(rc.cfg)
        ws = int(os.environ.get("WORLD_SIZE", "1"))
        cfg.check_batch(rc.parallel.global_batch_size, rc.parallel.micro_batch_size,
                        rc.parallel.data_parallel_size(ws))
        rows = load_rows(a.data, cfg.sched, rc.train["seed"])
        import domains
        from domains.sandboxing import available

        needs_box = any(domains.get(n).needs_sandbox for n in rows)
        if needs_box and not available():
            raise ConfigError("code/terminal domains need the sandbox package, which does not import: "
                              "set sched.families to exclude them")
    except (ConfigError, manifest.CheckpointError, ValueError) as e:
        print(f"error: {e}", file=sys.stderr)
        return 2
    return Trainer(a, rc, cfg, rows, data_m, needs_box).run()


class Trainer:
    def __init__(self, a, rc, cfg, rows, data_m, needs_box):
        self.a, self.rc, self.cfg, self.rows, self.data_m, self.needs_box = a, rc, cfg, rows, data_m, needs_box

    # ---- set-up -------------------------------------------------------------------------------------
    def setup(self):
        from model import checkpoint, parallel, train
        from model.build import build_model

        rc, a = self.rc, self.a
        mcfg, par, tr = rc.model, rc.parallel, rc.train
        parallel.init(par, mcfg, seed=tr["seed"], seq_length=tr["seq_length"])
        self.rank0 = parallel.is_rank0()
        self.log = (lambda *x: print(*x, flush=True)) if self.rank0 else (lambda *x: None)
        self.run_dir = a.out.with_name(a.out.name + ".run")
        if self.rank0:
            self.run_dir.mkdir(parents=True, exist_ok=True)
        torch.distributed.barrier()
        dtype = getattr(torch, tr["dtype"])
        model = build_model(mcfg, par, dtype)
        self.total_updates = tr["steps"] * self.cfg.algo.minibatches
        self.ddp, self.opt, self.sched = train.setup(model, rc.optim, self.total_updates, par.global_batch_size)
        self.ref = None
        if self.cfg.algo.kl_coef:
            self.ref = build_model(mcfg, par, dtype)
            checkpoint.load_model_only(self.ref, a.inp / "mcore")
            self.ref.eval()
        self.start, common = 0, None
        latest = checkpoint.latest_step(self.run_dir)
        if latest is not None:
            common = checkpoint.load_step(latest, self.ddp, self.opt, self.sched)
            self.start = common["step"]
            self.log(f"resumed from {latest} at step {self.start}")
        else:
            checkpoint.load_model_only(model, a.inp / "mcore")
        self.scheduler = self.engine = self.pool = self.renderer = None
        # one process: tmpfs; several: the run directory, which every rank (and node) sees at the same path
        from rl.sync import sync_dir

        self.sync_dir = (sync_dir(str(self.run_dir.resolve())) if parallel.world_size() == 1 else self.run_dir / "sync")
        if self.rank0:
            self._setup_rank0(common)

    def _setup_rank0(self, common):
        from transformers import PreTrainedTokenizerFast

        from model.vllm_engine import EngineProcess
        from rl.scheduler import Scheduler
        from rl.trajectory import Renderer

        tr, ro = self.rc.train, self.cfg.rollout
        self.tokenizer = PreTrainedTokenizerFast.from_pretrained(str(self.a.inp / "tokenizer"))
        self.renderer = Renderer(self.tokenizer)
        self.pad_id = self.tokenizer.pad_token_id if self.tokenizer.pad_token_id is not None else 0
        self.scheduler = Scheduler(self.rows, self.cfg.sched, seed=tr["seed"], data_seed=int(self.data_m.get("seed", 0)))
        if common is not None:
            self.start_eval = common.get("start_eval")
            self.start_records = common.get("start_records")
            self.scheduler.load_state_dict(common["sched"])
            random.setstate(_tuple_state(common["py_rng"]))
            np.random.set_state(tuple(common["np_rng"]))
        if self.needs_box:
            from domains.sandboxing import make_pool

            self.pool = make_pool(self.cfg.reward.sandbox_slots)
        gpu = torch.cuda.is_available()
        self.engine = EngineProcess(self.a.inp / "hf", max_model_len=tr["seq_length"], seed=tr["seed"],
                                    kv_cache_gib=ro.kv_cache_gib, gpu_memory_utilization=ro.gpu_memory_utilization,
                                    enable_sleep_mode=gpu and ro.sleep_between, dtype=ro.dtype,
                                    tensor_parallel_size=ro.tensor_parallel_size)
        self.a.results.mkdir(parents=True, exist_ok=True)
        self.metrics_path = self.a.results / "metrics.jsonl"
        from model.loop import truncate_metrics

        truncate_metrics(self.metrics_path, self.start)

    # ---- one step's data (rank 0) ----------------------------------------------------------------------
    def collect(self, step: int) -> tuple[list, dict]:
        from rl import objective, rewards, trajectory

        ro, rw = self.cfg.rollout, self.cfg.reward
        n, want = ro.samples_per_prompt, ro.groups_per_step
        kept: list[tuple[list, list]] = []  # (rollouts, advantages) of groups used for training
        fam = defaultdict(lambda: {"samples": 0, "reward": 0.0, "passed": 0, "scored": 0, "infra": 0})
        t_roll = t_rew = 0.0
        groups = flat = infra = truncated = 0
        lanes = defaultdict(int)  # tool_retries, tool_infra_failed, rollouts_cut
        rounds = 0
        for rnd in range(ro.max_rounds if ro.dynamic_sampling else 1):
            need = want - len(kept)
            if need <= 0:
                break
            rounds += 1
            picks = self.scheduler.next(need)
            t0 = time.perf_counter()
            rolls = trajectory.rollout(self.engine, self.renderer, picks, n=n, temperature=ro.temperature,
                                       top_p=ro.top_p, max_tokens=ro.max_tokens,
                                       seed=self.rc.train["seed"] * 1_000_003 + step * 10_007 + rnd * 1_009,
                                       pool=self.pool, sandbox_slots=rw.sandbox_slots, max_turns=ro.max_turns,
                                       long_timeout_s=ro.long_timeout_s, tool_retries=ro.tool_retries,
                                       retry_backoff_s=ro.tool_retry_backoff_s)
            t1 = time.perf_counter()
            scores = rewards.score_all(rolls, self.pool, rw)
            for k, v in trajectory.lane_metrics(rolls).items():
                lanes[k] += v
            t_roll += t1 - t0
            t_rew += time.perf_counter() - t1
            self.log(f"  step {step + 1} round {rnd + 1}: {len(rolls)} rollouts "
                     f"({sum(len(r.turns) for r in rolls)} turns, {sum(len(s.token_ids) for r in rolls for s in r.turns)}"
                     f" tokens) in {t1 - t0:.1f}s, rewards in {time.perf_counter() - t1:.1f}s")
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
        kept = kept[:want]
        used = [r for g in kept for r in g[0]]
        # pipeline stages exchange fixed shapes; otherwise pad only to the step's longest trajectory
        length = self.rc.train["seq_length"] if self.rc.parallel.pp > 1 else \
            objective.batch_length(used, self.rc.train["seq_length"])
        samples = objective.build_samples(used, [x for g in kept for x in g[1]], length, self.pad_id)
        samples += [objective.empty_sample(length, self.pad_id) for _ in range(want * n - len(samples))]
        scored = sum(f["scored"] for f in fam.values())
        m = {"rollout_s": t_roll, "reward_s": t_rew, "rounds": rounds, "groups_rolled": groups,
             "groups_used": len(kept), "zero_var_frac": flat / max(groups, 1), "infra_errors": infra,
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
        # minibatch j is "global step 0" of its own sample list: microbatches() splits it over DP ranks
        minis = [train.microbatches(lambda i, j=j: samples[j * per + i], 0, par) for j in range(k)]
        untrimmed = sum(b["tokens"].numel() for mbs in minis for b in mbs)
        if par.pp == 1:  # no stage-to-stage shapes to keep: each micro batch only as long as its trained part
            from rl.objective import trim_microbatch

            minis = [[trim_microbatch(b) for b in mbs] for mbs in minis]
        for mbs in minis:
            if self.ref is not None:
                for b, lp in zip(mbs, policy.logprobs(self.ref, mbs, seq, self.cfg.rollout.temperature) or []):
                    b["ref_logprobs"] = lp
            if k > 1:  # the ratio's denominator: the policy before any minibatch of this batch
                for b, lp in zip(mbs, policy.logprobs(self.ddp, mbs, seq, self.cfg.rollout.temperature) or []):
                    b["old_logprobs"] = lp
        ms = [policy.update(self.ddp, self.opt, self.sched, mbs, seq, par.global_batch_size, self.cfg.algo,
                            self.cfg.rollout.temperature) for mbs in minis]
        out = dict(ms[0])
        w = [m["action_tokens"] for m in ms]  # per-token statistics: weigh minibatches by their tokens
        for key in ("loss", "clip_frac", "mismatch_abs", "mismatch_kl", "tis_capped_frac", "kl_ref"):
            out[key] = float(np.average([m[key] for m in ms], weights=w)) if sum(w) else 0.0
        out["grad_norm"] = float(np.mean([m["grad_norm"] for m in ms]))
        out["update_s"] = sum(m["update_s"] for m in ms)
        out["action_tokens"] = sum(m["action_tokens"] for m in ms)
        out["lr"] = ms[-1]["lr"]
        out["positions"] = sum(b["tokens"].numel() for mbs in minis for b in mbs)  # this rank's, as trained
        out["positions_untrimmed"] = untrimmed  # padded to the step's longest trajectory
        return out

    # ---- the run ----------------------------------------------------------------------------------------
    def run(self) -> int:
        try:
            self.setup()
            return self._run()
        finally:
            self.close()

    def close(self):
        if getattr(self, "engine", None) is not None:
            self.engine.close()
            self.engine = None
        if getattr(self, "pool", None) is not None:
            self.pool.close()
            self.pool = None
        if getattr(self, "sync_dir", None) is not None:
            shutil.rmtree(self.sync_dir, ignore_errors=True)
            self.sync_dir = None

    def _sync(self) -> dict:
        from rl import sync

        return sync.sync(self.ddp, self.rc.model, self.engine, self.sync_dir / "hf", self.a.inp / "tokenizer")

    def _run(self) -> int:
        from model import parallel

        tr, par = self.rc.train, self.rc.parallel
        total, gpu = tr["steps"], torch.cuda.is_available() and self.cfg.rollout.sleep_between
        self.log(f"rl: {self.rc.model.num_parameters() / 1e6:.2f}M parameters, TP={par.tp} PP={par.pp} EP={par.ep} "
                 f"DP={par.data_parallel_size(parallel.world_size())}, {total} steps x {self.cfg.rollout.groups_per_step}"
                 f" groups x {self.cfg.rollout.samples_per_prompt} samples, {len(self.rows)} domains")
        if self.start:  # the engine started from the parent: give it the resumed policy
            self._sync()
        if self.cfg.eval.at_start and not self.start and self.rank0:
            self.start_eval, self.start_records = self.evaluate()
            self.log("eval step 0 | " + _eval_line(self.start_eval))
        t_start = time.perf_counter()
        for step in range(self.start, total):
            t0 = time.perf_counter()
            samples, m = self.collect(step) if self.rank0 else (None, None)
            if parallel.world_size() > 1:
                box = [samples]
                torch.distributed.broadcast_object_list(box, src=0)
                samples = box[0]
            if gpu and self.rank0:
                self.engine.sleep()
            u = self.update(samples)
            if gpu and self.rank0:
                self.engine.wake()
            s = self._sync()
            if self.rank0:
                self._record(step, total, m, u, s, t0, t_start)
            if tr["save_every"] and (step + 1) % tr["save_every"] == 0 and step + 1 < total:
                self._save(step + 1)
        return self.publish()

    def _record(self, step, total, m, u, s, t0, t_start):
        from model.train import fmt_time

        m.update(u)
        m.update(s)
        m.update(step=step + 1, step_s=time.perf_counter() - t0, sched_levels=_levels(self.scheduler))
        eval_table, ev = None, self.cfg.eval.every
        if ev and (step + 1) % ev == 0 and step + 1 < total:
            eval_table = self.evaluate()[0]
            m["eval"] = eval_table
        with open(self.metrics_path, "a") as f:
            f.write(json.dumps(m, sort_keys=True, default=float) + "\n")
        elapsed = time.perf_counter() - t_start
        done = step + 1 - self.start
        self.log(f"step {step + 1}/{total} | reward {m['reward']:.4f} | pass {m['pass_rate']:.4f} | "
                 f"zero_var {m['zero_var_frac']:.2f} | groups {m['groups_used']}/{self.cfg.rollout.groups_per_step} "
                 f"| infra {m['infra_errors']} (cut {m['rollouts_cut']}, retries {m['tool_retries']}) | loss {m['loss']:.5f} | mismatch {m['mismatch_abs']:.2e} | "
                 f"grad_norm {m['grad_norm']:.3f} | rollout {m['rollout_s']:.1f}s reward {m['reward_s']:.1f}s "
                 f"update {m['update_s']:.1f}s sync {m['sync_s']:.2f}s | elapsed {fmt_time(elapsed)} | "
                 f"eta {fmt_time((total - step - 1) * elapsed / done)}")
        if "eval" in m:
            self.log("eval step " + str(step + 1) + " | " + _eval_line(eval_table))

    def _save(self, step: int) -> None:
        """Step checkpoint, collectively; rank 0's scheduler, RNG and data positions go in the common state."""
        from model import checkpoint, parallel

        common = [{"step": step, "sched": self.scheduler.state_dict(), "py_rng": random.getstate(),
                   "np_rng": np.random.get_state(), "start_eval": getattr(self, "start_eval", None),
                   "start_records": getattr(self, "start_records", None)} if self.rank0 else None]
        if parallel.world_size() > 1:
            torch.distributed.broadcast_object_list(common, src=0)
        checkpoint.save_step(self.run_dir, step, self.ddp, self.opt, self.sched, common[0])
        checkpoint.prune_steps(self.run_dir, self.rc.train["keep_steps"])

    def evaluate(self) -> tuple[dict, list[dict]]:
        """(table, per-item records) of the engine's weights under the project's one protocol (domains.evaluate);
        every call sees the same items and seeds."""
        from domains import evaluate

        e, ro, rw = self.cfg.eval, self.cfg.rollout, self.cfg.reward
        items = evaluate.eval_items(self.a.data, e.per_domain, e.splits, e.families or self.cfg.sched.families)
        recs = evaluate.run(evaluate.EngineTarget(self.engine, "rl"), items, self.pool, n=max(e.samples, 1),
                            temperature=e.temperature if e.samples else 0.0, seed=e.seed, max_tokens=e.max_tokens,
                            slots=rw.sandbox_slots, budget_s=ro.long_timeout_s or None, tool_retries=ro.tool_retries,
                            retry_backoff_s=ro.tool_retry_backoff_s,
                            verify=dict(timeout_s=rw.timeout_s, sandbox_timeout_s=rw.sandbox_timeout_s,
                                        workers=rw.workers, sandbox_slots=rw.sandbox_slots))
        return evaluate.summarize(recs), recs

    def publish(self) -> int:
        from model import checkpoint, hf_io, manifest as mf, parallel, recipe, results
        from rl import sync

        table, recs = self.evaluate() if self.rank0 else (None, None)
        name = [str(mf.staging_dir(self.a.out)) if self.rank0 else None]
        torch.distributed.broadcast_object_list(name, src=0)
        tmp = Path(name[0])
        checkpoint.save_model_only(self.ddp, tmp / "mcore")
        sync.write_hf(self.ddp, self.rc.model, tmp / "hf", self.a.inp / "tokenizer")
        self.close()
        parallel.destroy()
        if not self.rank0:
            return 0
        self.log("eval final | " + _eval_line(table))
        recipe.dump(self.rc.cfg, tmp / "config.yaml")
        (tmp / "model_config.json").write_text(json.dumps(self.rc.model.to_dict(), indent=2))
        shutil.copytree(self.a.inp / "tokenizer", tmp / "tokenizer", ignore=shutil.ignore_patterns("manifest.json"))
        hf_io.copy_tokenizer(self.a.inp / "tokenizer", tmp / "hf")
        last = _last_metrics(self.metrics_path)
        start_eval = getattr(self, "start_eval", None)
        start_recs = getattr(self, "start_records", None)
        from domains import evaluate

        delta = evaluate.paired_delta(start_recs, recs) if start_recs else None
        if delta:
            self.log("eval delta vs step 0 | " + _delta_line(delta))
        metrics = {"steps": self.rc.train["steps"], "resumed_at": self.start, "eval": table,
                   "heldout_pass_rate": (table.get("all", {}).get("heldout") or {}).get("pass_rate"),
                   "eval_at_start": start_eval,
                   "heldout_pass_rate_at_start": ((start_eval or {}).get("all", {}).get("heldout") or {}).get("pass_rate"),
                   "heldout_delta": ((delta or {}).get("all") or {}).get("heldout"),
                   "eval_protocol": {k: getattr(self.cfg.eval, k) for k in ("samples", "temperature", "seed",
                                                                            "per_domain", "splits", "families")},
                   "last_step": last}
        data = {"data": {"path": str(self.a.data), "manifest_sha256": mf.sha256_file(self.a.data / "manifest.json")},
                "rl_config": self.cfg.to_dict(), "scheduler": self.scheduler.summary()}
        mf.write_manifest(tmp, stage="rl", parent=self.a.inp, config=self.rc.cfg, seed=self.rc.train["seed"],
                          metrics=metrics, model_config=self.rc.model.to_dict(), extra=data)
        mf.publish(tmp, self.a.out)
        results.write(self.a.results / "eval.json", "rl.eval", {"per_family": table, "steps": self.rc.train["steps"],
                                                                "per_family_at_start": start_eval,
                                                                "paired_delta": delta,
                                                                "protocol": metrics["eval_protocol"],
                                                                "items": recs, "items_at_start": start_recs,
                                                                "recipe": self.rc.cfg.get("recipe")},
                      measured=self.a.out)
        shutil.rmtree(self.run_dir, ignore_errors=True)
        print(f"rl checkpoint -> {self.a.out}", flush=True)
        return 0


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
