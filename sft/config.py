"""Recipe schema of SFT (sft/recipes/*.yaml): the data section (sft/01_data.py) and the training sections
(sft/02_train.py through model/loop.py)."""
from __future__ import annotations

from dataclasses import dataclass, field

from model import sections


@dataclass
class DataConfig:
    mixture: dict = field(default_factory=dict)  # family -> weight; empty = every family, equal weight
    num_demos: int = 2000  # demonstrations drawn (with replacement when a family has fewer)
    max_length: int = 1024  # drop conversations with more tokens than this
    pack_length: int = 1024  # tokens per packed sequence (= train.seq_length)
    packing: str = "greedy"  # greedy (in order, a new pack when one does not fit) | bfd (best-fit decreasing)
    val_fraction: float = 0.05  # packs held out for the held-out loss
    seed: int = 1234  # sampling and order


SCHEMA = {"data": DataConfig, **sections.training()}
