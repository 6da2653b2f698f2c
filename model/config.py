"""Model and parallel configs shared by every stage (typed, validated before any work).

A model config describes one architecture of the Llama / Qwen3 family:
- dense (`num_experts == 0`)  <-> HF `LlamaForCausalLM`
- MoE   (`num_experts > 0`)   <-> HF `Qwen3MoeForCausalLM` (qk-norm, every layer MoE, top-k renormalised)

Recipes hold a `model:` block with these fields and a `parallel:` block with ParallelConfig's.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from typing import Any


class ConfigError(ValueError):
    """A config value or a combination of values that cannot work; the message names the fix."""


@dataclass
class RopeScaling:
    type: str = "none"  # none | linear | yarn | llama3: how positions beyond the training length are handled
    factor: float = 1.0  # context extension factor (e.g. 4.0 = 4x the original length)
    original_max_position_embeddings: int = 0  # training context the factor is relative to

    def validate(self) -> None:
        if self.type not in ("none", "linear", "yarn", "llama3"):
            raise ConfigError(f"rope_scaling.type={self.type!r} is unknown: use none, linear, yarn or llama3")
        if self.type != "none" and self.factor <= 1.0:
            raise ConfigError(f"rope_scaling.factor={self.factor} must be > 1 when type={self.type}")


@dataclass
class ModelConfig:
    vocab_size: int = 4096  # tokenizer vocabulary (a multiple of 128 so no TP padding is needed)
    hidden_size: int = 256  # model width
    num_layers: int = 8  # transformer layers
    num_attention_heads: int = 4  # query heads
    num_query_groups: int = 2  # key/value heads (grouped-query attention)
    head_dim: int = 64  # channels per head
    ffn_hidden_size: int = 704  # SwiGLU width of a dense MLP
    num_experts: int = 0  # 0 = dense; > 0 = MoE in every layer
    moe_router_topk: int = 2  # experts per token
    moe_ffn_hidden_size: int = 256  # SwiGLU width of one expert
    moe_aux_loss_coeff: float = 0.01  # load-balancing loss weight
    rope_theta: float = 10000.0  # RoPE base
    rope_scaling: RopeScaling = field(default_factory=RopeScaling)  # optional context extension
    max_position_embeddings: int = 512  # sequence length the model is trained for
    norm_eps: float = 1e-6  # RMSNorm epsilon
    init_std: float = 0.02  # normal init std
    tie_word_embeddings: bool = False  # output layer shares the embedding (not used by the tiny models)

    @property
    def is_moe(self) -> bool:
        return self.num_experts > 0

    @property
    def qk_layernorm(self) -> bool:
        return self.is_moe  # Qwen3 (MoE) normalises q and k per head; Llama (dense) does not

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ModelConfig":
        d = dict(d)
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown model config keys {sorted(unknown)}: valid keys are {sorted(known)}")
        if isinstance(d.get("rope_scaling"), dict):
            d["rope_scaling"] = RopeScaling(**d["rope_scaling"])
        cfg = cls(**d)
        cfg.validate()
        return cfg

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    def validate(self) -> None:
        if self.num_attention_heads % self.num_query_groups:
            raise ConfigError(f"num_attention_heads={self.num_attention_heads} is not a multiple of "
                              f"num_query_groups={self.num_query_groups}")
        if self.is_moe and not 1 <= self.moe_router_topk <= self.num_experts:
            raise ConfigError(f"moe_router_topk={self.moe_router_topk} must be in [1, num_experts={self.num_experts}]")
        if self.head_dim % 2:
            raise ConfigError(f"head_dim={self.head_dim} must be even for RoPE")
        self.rope_scaling.validate()

    def num_parameters(self, active: bool = False) -> int:
        """Total (or per-token active) parameter count, computed from the shapes."""
        h, L = self.hidden_size, self.num_layers
        attn = h * self.head_dim * (self.num_attention_heads + 2 * self.num_query_groups) \
            + self.num_attention_heads * self.head_dim * h
        norms = 2 * h + (2 * self.head_dim if self.qk_layernorm else 0)
        if self.is_moe:
            n = self.moe_router_topk if active else self.num_experts
            mlp = n * 3 * h * self.moe_ffn_hidden_size + self.num_experts * h
        else:
            mlp = 3 * h * self.ffn_hidden_size
        emb = self.vocab_size * h * (1 if self.tie_word_embeddings else 2)
        return L * (attn + norms + mlp) + emb + h


@dataclass
class ParallelConfig:
    tp: int = 1  # tensor parallel size
    pp: int = 1  # pipeline parallel size
    ep: int = 1  # expert parallel size (MoE only)
    etp: int = 0  # expert tensor parallel size (MoE only); 0 = same as tp (Megatron's default)
    cp: int = 1  # context parallel size
    sp: bool = False  # sequence parallel (required for MoE with tp > 1)
    micro_batch_size: int = 2  # sequences per micro batch per data-parallel rank
    global_batch_size: int = 8  # sequences per optimizer step across all data-parallel ranks
    recompute: str = "none"  # none | selective (attention core) | full (each layer's input kept, rest recomputed)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> "ParallelConfig":
        known = {f.name for f in dataclasses.fields(cls)}
        unknown = set(d) - known
        if unknown:
            raise ConfigError(f"unknown parallel config keys {sorted(unknown)}: valid keys are {sorted(known)}")
        return cls(**d)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @property
    def expert_tp(self) -> int:
        return self.etp or self.tp

    def data_parallel_size(self, world_size: int) -> int:
        mp = self.tp * self.pp * self.cp
        if world_size % mp:
            raise ConfigError(f"world size {world_size} is not divisible by TP*PP*CP={self.tp}*{self.pp}*{self.cp}={mp}: "
                              "change the parallel sizes or the number of processes (NPROC)")
        return world_size // mp

    def num_microbatches(self, world_size: int) -> int:
        dp = self.data_parallel_size(world_size)
        per_step = self.micro_batch_size * dp
        if self.global_batch_size % per_step:
            share = self.global_batch_size // dp if self.global_batch_size % dp == 0 else 0
            fit = max((m for m in range(1, self.micro_batch_size) if share % m == 0), default=0) if share else 0
            fix = (f"set parallel.micro_batch_size={fit} (rows per DP rank: {share}) or " if fit else "set ") + \
                f"parallel.global_batch_size to a multiple of {per_step}"
            raise ConfigError(f"global_batch_size={self.global_batch_size} is not divisible by "
                              f"micro_batch_size*DP={self.micro_batch_size}*{dp}={per_step}: {fix}")
        return self.global_batch_size // per_step

    def validate(self, model: ModelConfig, world_size: int, seq_length: int | None = None) -> None:
        """Cross-field rules, checked before any process group or tensor is created."""
        if self.recompute not in ("none", "selective", "full"):
            raise ConfigError(f"recompute={self.recompute!r} is unknown: use none, selective or full")
        for name in ("tp", "pp", "ep", "expert_tp", "cp"):
            if getattr(self, name) < 1:
                raise ConfigError(f"{name}={getattr(self, name)} must be >= 1")
        dp = self.data_parallel_size(world_size)
        self.num_microbatches(world_size)
        if model.num_query_groups % self.tp:
            raise ConfigError(f"num_query_groups={model.num_query_groups} is not divisible by TP={self.tp}")
        if model.vocab_size % self.tp:
            raise ConfigError(f"vocab_size={model.vocab_size} is not divisible by TP={self.tp}")
        if model.num_layers % self.pp:
            raise ConfigError(f"num_layers={model.num_layers} is not divisible by PP={self.pp}")
        if self.sp and self.tp == 1:
            raise ConfigError("sp=true needs tp > 1: sequence parallel splits activations over the TP group")
        if model.is_moe:
            if model.num_experts % self.ep:
                raise ConfigError(f"num_experts={model.num_experts} is not divisible by EP={self.ep}")
            if (world_size // self.pp) % (self.expert_tp * self.ep):
                raise ConfigError(f"ETP*EP={self.expert_tp}*{self.ep} does not divide the {world_size // self.pp} ranks of a "
                                  f"pipeline stage (world {world_size} / PP {self.pp})")
            if self.tp > 1 and not self.sp:
                raise ConfigError(f"MoE with TP={self.tp} needs sequence parallel: set parallel.sp=true")
        else:
            if self.ep != 1 or self.etp not in (0, self.tp):
                raise ConfigError(f"EP={self.ep}, ETP={self.etp} need an MoE model (num_experts > 0)")
        if seq_length is not None and self.sp and seq_length % self.tp:
            raise ConfigError(f"seq_length={seq_length} is not divisible by TP={self.tp} (sequence parallel)")
        del dp
