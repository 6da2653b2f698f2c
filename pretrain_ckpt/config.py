"""Recipe schema of the base (pretrain_ckpt/recipes/*.yaml): the training sections of model/loop.py."""
from __future__ import annotations

from model import sections

SCHEMA = sections.training()
