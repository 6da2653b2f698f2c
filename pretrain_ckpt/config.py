"""Recipe schema of the base (pretrain_ckpt/recipes/*.yaml): the corpus (01_corpus.py) and tokenizer
(02_tokenizer.py, whose vocabulary is the recipe's model.vocab_size) sections, the training sections of
model/loop.py (03_pretrain.py), and the sizes of the training-step benchmark (bench_train.py, `make bench-train`)."""
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


@dataclass
class BenchConfig:
    seq_length: int = 512  # tokens per sequence of a timed step
    batch: int = 4  # sequences per step (micro batch = global batch, one process)
    warmup: int = 2  # untimed steps per side
    steps: int = 5  # timed steps per side, interleaved megatron/hf
    mode_cost: int = 2  # extra baseline steps with and without cpu_compat's TorchFunctionMode (0 = skip)
    fused_cost: int = 2  # extra baseline steps with AdamW(fused=True) and as many without (0 = skip)


SCHEMA = {"corpus": CorpusConfig, "tokenizer": TokenizerConfig, **sections.training(),
          "bench": sections.Partial(BenchConfig, note="read by bench_train.py only, for make bench-train; a key left "
                                                      "out takes the default below, command-line flags win")}
