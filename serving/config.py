"""Recipe schema of the fast variant (serving/recipes/*.yaml): quantization, speculation, the draft's
distillation, and the draft's training sections (model/parallel/optim/train, through model/loop.py).
Cross-field rules (scheme names, GPU needs) are checked by serving/02_fast.py:validate."""
from __future__ import annotations

from dataclasses import dataclass

from model import sections
from model.config import ModelConfig


@dataclass
class QuantConfig:
    scheme: str = "w8a8_int8"  # w8a8_int8 (vLLM CPU and GPU kernels) | w8a8_fp8 (GPU only)
    experts: bool | str = "auto"  # quantize MoE experts: true | false | auto (only where vLLM has an int8 MoE kernel)
    smooth_alpha: float = 0.0  # SmoothQuant migration strength in (0, 1) before int8 (serving/smooth.py); 0 = off
    calib_prompts: int = 64  # domains rl-split prompts whose activation maxima set the SmoothQuant scales


@dataclass
class SpeculativeConfig:
    method: str = "draft"  # draft (distilled model in draft/) | ngram (prompt lookup, no model)
    num_speculative_tokens: int = 3  # tokens proposed per step, 1..8
    prompt_lookup_max: int = 4  # ngram: longest suffix of the context matched against earlier tokens
    prompt_lookup_min: int = 1  # ngram: shortest match that proposes (2 drops most one-token chance matches)


@dataclass
class DistillConfig:
    num_prompts: int = 256  # domains rl-split prompts the target answers greedily
    max_tokens: int = 128  # completion tokens per prompt
    val_fraction: float = 0.1  # share of the distillation set held out for the draft's held-out loss
    seed: int = 1234  # prompt sampling seed


@dataclass
class DraftInitConfig:
    target_embeddings: bool = True  # start from the target's embedding and lm_head when the widths match


SCHEMA = {"quant": QuantConfig, "speculative": SpeculativeConfig, "distill": DistillConfig,
          "draft_init": DraftInitConfig, **sections.training(),
          "model": sections.Partial(ModelConfig, note="the draft's architecture (dense); vocab_size and "
                                                      "max_position_embeddings come from the target")}
