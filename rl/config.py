"""Typed RL config: the recipe's rollout/algo/reward/sched/eval sections (train/parallel/optim are model/loop's).

Every field has a default and a one-line meaning (its comment, shown by `rl/01_train.py --help`);
`RLConfig.from_dict(cfg)` checks keys and value kinds the way every recipe is checked (model/sections.py) and the
cross-field rules, before any process, engine or model exists, naming the numbers and the fix. SCHEMA is the whole
rl recipe: these sections plus the training sections of model/loop.py.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field

from model import sections
from model.config import ConfigError


@dataclass
class RolloutConfig:
    groups_per_step: int = 4  # prompts (groups) trained on per step, after dynamic sampling
    samples_per_prompt: int = 4  # completions per prompt (the GRPO group size)
    max_tokens: int = 96  # new tokens per assistant turn
    max_turns: int = 0  # cap on assistant turns per rollout (0 = each task's own max_turns)
    temperature: float = 1.0  # sampling temperature (logprobs of trainer and engine both use it)
    top_p: float = 1.0  # nucleus sampling (1 = off; the trainer assumes the full distribution)
    dynamic_sampling: bool = True  # drop groups whose rewards are all equal and refill
    max_rounds: int = 3  # rollout rounds per step when refilling (bounded cost when all groups are flat)
    kv_cache_gib: int = 2  # vLLM-CPU KV cache size
    dtype: str = "float32"  # engine weights/compute: float32 (CPU, exact logprobs) | bfloat16 (GPU)
    tensor_parallel_size: int = 1  # engine TP: one engine per this many consecutive ranks, on their GPUs
    engines: str = "spread"  # spread: an engine per tensor_parallel_size ranks, sharing the groups | one: rank 0's
    gpu_memory_utilization: float = 0.35  # GPU share of a colocated engine (trainer keeps the rest)
    sleep_between: bool = True  # GPU: engine sleeps (weights offloaded, KV freed) during the update
    long_timeout_s: float = 600.0  # wall budget of one sandbox-holding rollout (long lane); past it: cut, infra
    tool_retries: int = 2  # retries of a tool call that failed for infrastructure reasons (sandbox failure)
    tool_retry_backoff_s: float = 0.5  # first retry's wait, doubled each time
    max_staleness: int = 0  # k: the rollouts of step s use the weights of step max(0, s - k); 0 = lockstep
    weight_sync: str = "memory"  # memory: tensors to each engine in shared memory (no TP/PP/CP split) | files
    overlap: bool = True  # k > 0: generate step s + k's rollouts while step s updates (false: one after the other)
    record_routing: bool = False  # MoE: the engine records each token's experts; the update logs the share of
    # tokens the trainer routes otherwise (routing_differ_frac) and can replay them (algo.routing_replay)
    router_flip_frac: float = 0.0  # experiments: this share of the engine's router decisions is forced to flip
    quantization: str = "none"  # none | w8a8_int8: the engine runs the policy W8A8-quantized, requantized at every
    # weight sync (model/quantize.py; experiments). A float32, unquantized, unflipped engine evaluates

    def evaluates_itself(self, gpu: bool) -> bool:
        """Whether the rollout engine is the evaluation protocol's (no forced flips, unquantized, float32 on the CPU);
        otherwise a second engine with the trainer's weights evaluates, so every arm of an experiment is measured
        the same way."""
        return not self.router_flip_frac and self.quantization == "none" and (gpu or self.dtype == "float32")


@dataclass
class AlgoConfig:
    clip_low: float = 0.2  # ratio lower clip 1 - clip_low
    clip_high: float = 0.28  # ratio upper clip 1 + clip_high (asymmetric, DAPO's clip-higher)
    kl_coef: float = 0.0  # weight of the k3 KL to the reference (the parent checkpoint); 0 = no reference model
    normalize_std: bool = True  # divide group advantages by the group std (GRPO); false = Dr. GRPO
    tis_cap: float = 2.0  # truncated importance weight exp(trainer_old - rollout) <= cap; 0 = no correction
    mis_low: float = 0.0  # masked IS: drop tokens (sequences) whose engine weight is below this (with mis_high)
    mis_high: float = 0.0  # masked IS: ... or above this; 0 = off (rl/objective.py)
    is_level: str = "token"  # token | sequence: weigh each token, or each trajectory by its product of ratios
    minibatches: int = 1  # optimizer steps per rollout batch (>1 = off-policy minibatches, clipping active)
    pack: bool = False  # update on trajectories packed into rows (rl/packing.py; PP=1; document-causal attention)
    routing_replay: bool = False  # MoE: the update routes each token to the experts the engine used (rl/routing.py)
    pack_length: int = 0  # row capacity of algo.pack (0 = train.seq_length; a longer trajectory gets its own row):
    # shorter rows cost less attention where a row keeps its dense s x s mask (model/masks.py), in more passes


@dataclass
class RewardConfig:
    timeout_s: float = 10.0  # per-verification timeout, fast lane (pure-Python verifiers)
    sandbox_timeout_s: float = 30.0  # per-verification timeout, sandbox lane (code, terminal)
    workers: int = 8  # concurrent fast-lane verifications
    sandbox_slots: int = 2  # sandbox pool size = concurrent sandbox-lane verifications
    format_weight: float = 0.0  # + weight * mean process reward (format/step validity); 0 = outcome only


@dataclass
class SchedConfig:
    mode: str = "pass_rate"  # pass_rate (weights peak at 50% pass) | uniform
    window: int = 16  # outcomes per domain kept for the pass rate
    floor: float = 0.1  # minimum weight of a domain (never starve one)
    promote_at: float = 0.8  # windowed pass rate that moves a domain up one difficulty level
    demote_at: float = 0.05  # windowed pass rate that moves it down (above its first level)
    min_samples: int = 8  # outcomes needed before promotion/demotion
    max_difficulty: int = 1  # curriculum ceiling
    families: list = field(default_factory=list)  # restrict to these families ([] = all)
    num_domains: int = 0  # train on the first k domains of a seeded, family-stratified order (0 = all)


@dataclass
class EvalConfig:
    every: int = 0  # held-out evaluation interval in steps (0 = only at the end)
    at_start: bool = False  # also evaluate the parent's weights before step 1 (the same protocol: a baseline)
    per_domain: int = 2  # eval tasks per domain (eval split)
    max_tokens: int = 96  # tokens per assistant turn
    splits: list = field(default_factory=lambda: ["train", "heldout"])  # which eval splits to run
    families: list = field(default_factory=list)  # eval only these families ([] = sched.families, i.e. all)
    samples: int = 0  # completions per task: 0 = greedy (one each); n = sampled at `temperature` (pass@1 of n)
    temperature: float = 1.0  # sampling temperature of the sampled protocol (unused when greedy)
    seed: int = 0  # sampling seed: every evaluation of a run uses the same items and seeds


SECTIONS = {"rollout": RolloutConfig, "algo": AlgoConfig, "reward": RewardConfig, "sched": SchedConfig,
            "eval": EvalConfig}


SCHEMA = {**sections.training(), **SECTIONS}


@dataclass
class RLConfig:
    rollout: RolloutConfig
    algo: AlgoConfig
    reward: RewardConfig
    sched: SchedConfig
    eval: EvalConfig

    @classmethod
    def from_dict(cls, cfg: dict) -> "RLConfig":
        rc = cls(**{name: typ(**sections.check_section(typ, cfg.get(name), name)) for name, typ in SECTIONS.items()})
        rc.validate()
        return rc

    def to_dict(self) -> dict:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        r, a, s = self.rollout, self.algo, self.sched
        if r.samples_per_prompt < 2:
            raise ConfigError(f"rollout.samples_per_prompt={r.samples_per_prompt}: a group needs >= 2 samples "
                              "for a group-normalized advantage")
        if r.groups_per_step < 1 or r.max_rounds < 1:
            raise ConfigError(f"rollout.groups_per_step={r.groups_per_step} and rollout.max_rounds={r.max_rounds} "
                              "must be >= 1")
        if r.temperature <= 0:
            raise ConfigError(f"rollout.temperature={r.temperature} must be > 0 (RL samples; greedy is for eval)")
        if r.dtype not in ("float32", "bfloat16"):
            raise ConfigError(f"rollout.dtype={r.dtype!r}: use float32 or bfloat16")
        if r.long_timeout_s < 0 or r.tool_retries < 0 or r.tool_retry_backoff_s < 0:
            raise ConfigError(f"rollout.long_timeout_s={r.long_timeout_s} (0 = no budget), rollout.tool_retries="
                              f"{r.tool_retries} and rollout.tool_retry_backoff_s={r.tool_retry_backoff_s} must be >= 0")
        if not 0 < r.top_p <= 1:
            raise ConfigError(f"rollout.top_p={r.top_p} must be in (0, 1]")
        if not (0 <= a.clip_low < 1 and a.clip_high >= 0):
            raise ConfigError(f"algo.clip_low={a.clip_low} must be in [0, 1) and algo.clip_high={a.clip_high} >= 0")
        if a.tis_cap and a.tis_cap < 1:
            raise ConfigError(f"algo.tis_cap={a.tis_cap} must be >= 1 (or 0 to turn the correction off)")
        if a.mis_high and not 0 <= a.mis_low < 1 < a.mis_high:
            raise ConfigError(f"algo.mis_low={a.mis_low}, algo.mis_high={a.mis_high}: the masked-IS band needs "
                              "0 <= mis_low < 1 < mis_high (or mis_high 0 to turn it off)")
        if a.mis_low and not a.mis_high:
            raise ConfigError(f"algo.mis_low={a.mis_low} without algo.mis_high: set both to mask (e.g. 0.5 and 2)")
        if a.is_level not in ("token", "sequence"):
            raise ConfigError(f"algo.is_level={a.is_level!r}: use token or sequence")
        if r.engines not in ("spread", "one"):
            raise ConfigError(f"rollout.engines={r.engines!r}: use spread (an engine per rollout.tensor_parallel_size "
                              "ranks) or one (rank 0's)")
        if r.weight_sync not in ("memory", "files"):
            raise ConfigError(f"rollout.weight_sync={r.weight_sync!r}: use memory or files")
        if a.routing_replay and not r.record_routing:
            raise ConfigError("algo.routing_replay=true needs the engine's routing: set rollout.record_routing=true")
        if not 0 <= r.router_flip_frac < 1:
            raise ConfigError(f"rollout.router_flip_frac={r.router_flip_frac} must be in [0, 1)")
        if (r.record_routing or r.router_flip_frac) and r.tensor_parallel_size != 1:
            raise ConfigError(f"rollout.record_routing / router_flip_frac need rollout.tensor_parallel_size=1 (is "
                              f"{r.tensor_parallel_size}): the routing hooks reach the engine's worker in its process")
        if r.quantization not in ("none", "w8a8_int8"):
            raise ConfigError(f"rollout.quantization={r.quantization!r}: use none or w8a8_int8")
        if r.quantization != "none" and r.weight_sync != "memory":
            raise ConfigError("rollout.quantization=w8a8_int8 is synced in memory only: set rollout.weight_sync=memory")
        if r.max_staleness < 0:
            raise ConfigError(f"rollout.max_staleness={r.max_staleness} must be >= 0 (0 = lockstep)")
        if a.minibatches < 1 or r.groups_per_step % a.minibatches:
            raise ConfigError(f"algo.minibatches={a.minibatches} must divide rollout.groups_per_step="
                              f"{r.groups_per_step}")
        if s.mode not in ("pass_rate", "uniform"):
            raise ConfigError(f"sched.mode={s.mode!r}: use pass_rate or uniform")
        if not 0 <= s.demote_at < s.promote_at <= 1:
            raise ConfigError(f"need 0 <= sched.demote_at={s.demote_at} < sched.promote_at={s.promote_at} <= 1")
        e = self.eval
        if e.samples < 0 or (e.samples and e.temperature <= 0):
            raise ConfigError(f"eval.samples={e.samples} must be >= 0 (0 = greedy) and eval.temperature="
                              f"{e.temperature} > 0 when sampling")
        if s.window < s.min_samples:
            raise ConfigError(f"sched.window={s.window} < sched.min_samples={s.min_samples}: the window could "
                              "never hold enough outcomes to move the curriculum")

    def check_batch(self, global_batch_size: int, micro_batch_size: int, dp: int, world: int = 1, pp: int = 1,
                    seq_length: int | None = None) -> None:
        """One trajectory per trainer sample: the parallel section must hold exactly one minibatch of them; spread
        engines take whole groups of consecutive ranks; packed rows vary in shape, which pipeline stages cannot."""
        if not 0 <= self.algo.pack_length <= (seq_length or self.algo.pack_length):
            raise ConfigError(f"algo.pack_length={self.algo.pack_length} must be in [0, train.seq_length="
                              f"{seq_length}] (0 = train.seq_length)")
        if self.algo.pack and pp > 1:
            raise ConfigError(f"algo.pack=true needs parallel.pp=1 (pp={pp}: pipeline stages exchange fixed shapes): "
                              "set algo.pack=false")
        tp = self.rollout.tensor_parallel_size
        if self.rollout.engines == "spread" and world % tp:
            raise ConfigError(f"world size {world} is not a multiple of rollout.tensor_parallel_size={tp}: every "
                              "engine takes that many consecutive ranks (or set rollout.engines: one)")
        per_update = self.rollout.groups_per_step * self.rollout.samples_per_prompt // self.algo.minibatches
        if global_batch_size != per_update:
            raise ConfigError(f"parallel.global_batch_size={global_batch_size} must equal groups_per_step*"
                              f"samples_per_prompt/minibatches = {self.rollout.groups_per_step}*"
                              f"{self.rollout.samples_per_prompt}/{self.algo.minibatches} = {per_update}")
        if global_batch_size % (micro_batch_size * dp):
            raise ConfigError(f"parallel.global_batch_size={global_batch_size} is not divisible by "
                              f"micro_batch_size*DP={micro_batch_size}*{dp}")
