"""Recipe schema of the base (pretrain_ckpt/recipes/*.yaml): the corpus (01_corpus.py) and tokenizer
(02_tokenizer.py, whose vocabulary is the recipe's model.vocab_size) sections, and the training sections of
model/loop.py (03_pretrain.py)."""
from __future__ import annotations

from dataclasses import dataclass

from model import sections


@dataclass
class CorpusConfig:
    max_mb: float = 6.0  # megabytes of Python standard-library source
    drill_docs: int = 3000  # arithmetic drill documents
    val_fraction: float = 0.02  # fraction of documents held out, in (0, 0.5)
    seed: int = 1234  # seeds the drills and the split
    mid_training: bool = True  # add the corpus/ split of --domains (false: the corpus is made without it)


@dataclass
class TokenizerConfig:
    max_chars: int = 4_000_000  # characters of the corpus the BPE is trained on


SCHEMA = {"corpus": CorpusConfig, "tokenizer": TokenizerConfig, **sections.training()}
