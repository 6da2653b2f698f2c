"""Recipe schema of the domains datasets (domains/recipes/*.yaml, `python -m domains datasets --recipe NAME`): how
many tasks of each split it writes per domain. `make data` passes RECIPE, so the chain's sizes live beside the
stage recipes of the same name."""
from __future__ import annotations

from dataclasses import dataclass


@dataclass
class DatasetsConfig:
    sft_per_domain: int = 20  # SFT demonstrations per train domain
    rl_per_domain: int = 20  # RL prompts per train domain
    eval_per_domain: int = 5  # eval tasks per domain (train and held out)
    corpus_per_domain: int = 0  # plain-text demonstrations per train domain for the base corpus (mid-training)
    max_difficulty: int = 3  # tasks of difficulty 0..max_difficulty
    families: str | None = None  # comma-separated families (null: every family)
    seed: int = 0  # seeds every task


SCHEMA = {"datasets": DatasetsConfig}
