"""Recipe schema of eval (eval/recipes/*.yaml): the target engine and the suites.

Every key a suite reads is here with its default (eval/longctx.py, eval/regression.py, eval/heldout.py, eval/cli.py);
load_recipe fills them in, so a suite's `cfg[key]` always exists and a mistyped key is refused by name.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from model import sections


RULER_LENGTHS = (4096, 8192, 16384, 32768, 65536, 131072)  # RULER's standard grid, the default lengths


@dataclass
class TargetConfig:
    max_model_len: int | None = None  # vLLM context length (--max-model-len wins; null = the model's)
    dtype: str = "float32"  # in-process vLLM weights/compute dtype
    kv_cache_gib: int = 2  # in-process vLLM KV cache size (CPU)
    tp: int = 1  # in-process vLLM tensor parallel size


@dataclass
class LongctxConfig:
    tasks: list | None = None  # RULER-style task names (eval/ruler.py TASKS); null = all of them
    lengths: list = field(default_factory=lambda: list(RULER_LENGTHS))  # prompt lengths in tokens
    depths: list = field(default_factory=lambda: [0.5])  # needle depths in [0, 1], for the depth tasks
    per_cell: int = 1  # samples per task x length [x depth]
    max_tokens: int = 64  # answer tokens per prompt
    seed: int = 0  # first sample seed of every cell
    batch_tokens: int = 1 << 20  # prompt tokens per generate call
    nll: bool = False  # in-process vLLM only: also record each prompt's tail NLL (last quarter), per length


@dataclass
class RegressionConfig:
    set: str = "eval/regression_set.yaml"  # the fixed task set (relative to the clone)
    only: list | None = None  # indices into the set to run; null = every task
    max_tokens: int = 192  # tokens per assistant turn
    sandbox_slots: int = 2  # sandbox pool size: tool rollouts run in waves of this many


@dataclass
class HeldoutConfig:
    families: list | None = None  # families whose held-out domains run; null = every family
    max_domains: int | None = None  # at most this many held-out domains per family; null = all
    per_domain: int = 1  # tasks (seeds from 6_000_000) per domain
    difficulty: int = 0  # task difficulty (a domain without it uses its lowest)
    n: int = 4  # samples per task
    k: list = field(default_factory=lambda: [1])  # pass@k values reported, each in 1..n
    temperature: float = 0.8  # sampling temperature
    max_tokens: int = 192  # tokens per assistant turn
    seed: int = 0  # sampling seed
    sandbox_slots: int = 2  # sandbox pool size: tool rollouts run in waves of this many


@dataclass
class QuickConfig:
    per_domain: int = 2  # tasks per domain from the domains datasets' eval split (--data), in their order
    splits: list = field(default_factory=lambda: ["train", "heldout"])  # which eval splits to run
    families: list | None = None  # only these families; null = every family
    max_tokens: int = 192  # tokens per assistant turn (greedy)
    sandbox_slots: int = 8  # sandbox pool size: tool rollouts holding a sandbox session run this many at a time


SCHEMA = {"target": TargetConfig, "longctx": LongctxConfig, "regression": RegressionConfig,
          "heldout": HeldoutConfig, "quick": QuickConfig, "cluster": sections.cluster()}
