"""HuggingFace <-> Megatron-Core weight mapping for the Llama (dense) and Qwen3-MoE families.

- `to_hf(full_state, cfg)`: a full (TP=PP=EP=1) Megatron state dict -> HF tensors. Checkpoints of any
  layout get here by loading the torch_dist checkpoint into a single-process model (Megatron
  reshards on load), see model/to_hf.py (`python -m model.to_hf`).
- `load_hf_into(model, hf, cfg)`: fills THIS rank's shard of a Megatron model of any TP/PP/EP layout
  from full HF tensors (import of a real base, and the seeded init every layout shares).

Megatron fuses q/k/v per query group ([q_g..., k_g, v_g] for each group g) and gate/up in fc1;
HF keeps them separate. Expert weights use HF's per-expert names, which transformers and vLLM
both load. Names of the TE spec (norms fused into the next linear) are accepted too.
"""
from __future__ import annotations

import re

import torch

from model.config import ModelConfig

_TE_ALIASES = {  # TE spec fuses the pre-norms into the following linear
    "self_attention.linear_qkv.layer_norm_weight": "input_layernorm.weight",
    "mlp.linear_fc1.layer_norm_weight": "pre_mlp_layernorm.weight",
}


def _split_qkv(w: torch.Tensor, cfg: ModelConfig):
    ng, hd = cfg.num_query_groups, cfg.head_dim
    per = cfg.num_attention_heads // ng
    w = w.view(ng, per + 2, hd, -1)
    q = w[:, :per].reshape(ng * per * hd, -1)
    k = w[:, per].reshape(ng * hd, -1)
    v = w[:, per + 1].reshape(ng * hd, -1)
    return q, k, v


def _fuse_qkv(q, k, v, cfg: ModelConfig) -> torch.Tensor:
    ng, hd = cfg.num_query_groups, cfg.head_dim
    per = cfg.num_attention_heads // ng
    h = q.shape[-1]
    return torch.cat([q.view(ng, per, hd, h), k.view(ng, 1, hd, h), v.view(ng, 1, hd, h)], dim=1).reshape(-1, h)


def _layer_to_hf(name: str, t: torch.Tensor, cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """One Megatron layer-local name (after 'decoder.layers.{i}.') -> HF layer-local tensors."""
    name = _TE_ALIASES.get(name, name)
    if name == "input_layernorm.weight":
        return {"input_layernorm.weight": t}
    if name == "pre_mlp_layernorm.weight":
        return {"post_attention_layernorm.weight": t}
    if name == "self_attention.linear_qkv.weight":
        q, k, v = _split_qkv(t, cfg)
        return {"self_attn.q_proj.weight": q, "self_attn.k_proj.weight": k, "self_attn.v_proj.weight": v}
    if name == "self_attention.linear_proj.weight":
        return {"self_attn.o_proj.weight": t}
    if name == "self_attention.q_layernorm.weight":
        return {"self_attn.q_norm.weight": t}
    if name == "self_attention.k_layernorm.weight":
        return {"self_attn.k_norm.weight": t}
    if name == "mlp.router.weight":
        return {"mlp.gate.weight": t}
    m = re.fullmatch(r"mlp\.(?:experts\.local_experts\.(\d+)\.)?linear_fc(1|2)\.weight", name)
    if m:
        prefix = f"mlp.experts.{m.group(1)}." if m.group(1) is not None else "mlp."
        if m.group(2) == "1":
            gate, up = t.chunk(2, dim=0)
            return {prefix + "gate_proj.weight": gate, prefix + "up_proj.weight": up}
        return {prefix + "down_proj.weight": t}
    raise KeyError(f"no HF mapping for Megatron parameter '{name}'")


def to_hf(full_state: dict[str, torch.Tensor], cfg: ModelConfig) -> dict[str, torch.Tensor]:
    """Full single-process Megatron state dict (parameters only) -> HF state dict."""
    out: dict[str, torch.Tensor] = {}
    for name, t in full_state.items():
        if name.endswith("_extra_state") or t is None:
            continue
        t = t.detach().cpu()
        m = re.fullmatch(r"decoder\.layers\.(\d+)\.(.+)", name)
        if m:
            for k, v in _layer_to_hf(m.group(2), t, cfg).items():
                out[f"model.layers.{m.group(1)}.{k}"] = v.contiguous()
        elif name == "embedding.word_embeddings.weight":
            out["model.embed_tokens.weight"] = t[: cfg.vocab_size].contiguous()
        elif name == "decoder.final_layernorm.weight":
            out["model.norm.weight"] = t.contiguous()
        elif name == "output_layer.weight":
            if not cfg.tie_word_embeddings:
                out["lm_head.weight"] = t[: cfg.vocab_size].contiguous()
        else:
            raise KeyError(f"no HF mapping for Megatron parameter '{name}'")
    return out


def _layer_from_hf(name: str, hf_layer: callable, cfg: ModelConfig, tp: tuple[int, int],
                   etp: tuple[int, int], ep_offset: int) -> torch.Tensor:
    """This rank's shard of one layer-local Megatron parameter, built from HF tensors (hf_layer(key))."""
    tr, ts = tp
    name = _TE_ALIASES.get(name, name)

    def rows(t, r, s):
        return t.chunk(s, dim=0)[r]

    def cols(t, r, s):
        return t.chunk(s, dim=1)[r]

    if name == "input_layernorm.weight":
        return hf_layer("input_layernorm.weight")
    if name == "pre_mlp_layernorm.weight":
        return hf_layer("post_attention_layernorm.weight")
    if name == "self_attention.linear_qkv.weight":
        full = _fuse_qkv(hf_layer("self_attn.q_proj.weight"), hf_layer("self_attn.k_proj.weight"),
                         hf_layer("self_attn.v_proj.weight"), cfg)
        return rows(full, tr, ts)  # groups are contiguous, so a row chunk is whole groups
    if name == "self_attention.linear_proj.weight":
        return cols(hf_layer("self_attn.o_proj.weight"), tr, ts)
    if name == "self_attention.q_layernorm.weight":
        return hf_layer("self_attn.q_norm.weight")
    if name == "self_attention.k_layernorm.weight":
        return hf_layer("self_attn.k_norm.weight")
    if name == "mlp.router.weight":
        return hf_layer("mlp.gate.weight")
    m = re.fullmatch(r"mlp\.(?:experts\.local_experts\.(\d+)\.)?linear_fc(1|2)\.weight", name)
    if m:
        if m.group(1) is not None:
            prefix, (r, s) = f"mlp.experts.{ep_offset + int(m.group(1))}.", etp
        else:
            prefix, (r, s) = "mlp.", tp
        if m.group(2) == "1":
            return torch.cat([rows(hf_layer(prefix + "gate_proj.weight"), r, s),
                              rows(hf_layer(prefix + "up_proj.weight"), r, s)], dim=0)
        return cols(hf_layer(prefix + "down_proj.weight"), r, s)
    raise KeyError(f"no HF mapping for Megatron parameter '{name}'")


@torch.no_grad()
def load_hf_into(model: torch.nn.Module, hf: dict[str, torch.Tensor], cfg: ModelConfig) -> None:
    """Copy full HF tensors into this rank's shard of `model` (any TP/PP/EP layout)."""
    from megatron.core import parallel_state as ps
    from megatron.core.transformer.transformer_layer import get_transformer_layer_offset

    tp = (ps.get_tensor_model_parallel_rank(), ps.get_tensor_model_parallel_world_size())
    etp = (ps.get_expert_tensor_parallel_rank(), ps.get_expert_tensor_parallel_world_size())
    ep_offset = ps.get_expert_model_parallel_rank() * (cfg.num_experts // max(1, ps.get_expert_model_parallel_world_size()))
    layer_offset = get_transformer_layer_offset(model.config)

    def need(key):
        if key not in hf:
            raise KeyError(f"HF checkpoint has no tensor '{key}': is it a {'Qwen3-MoE' if cfg.is_moe else 'Llama'} "
                           "checkpoint matching the model config?")
        return hf[key]

    for name, p in model.named_parameters():
        m = re.fullmatch(r"decoder\.layers\.(\d+)\.(.+)", name)
        if m:
            i = layer_offset + int(m.group(1))
            src = _layer_from_hf(m.group(2), lambda k: need(f"model.layers.{i}.{k}"), cfg, tp, etp, ep_offset)
        elif name == "embedding.word_embeddings.weight":
            src = need("model.embed_tokens.weight").chunk(tp[1], dim=0)[tp[0]]
        elif name == "decoder.final_layernorm.weight":
            src = need("model.norm.weight")
        elif name == "output_layer.weight":
            key = "model.embed_tokens.weight" if cfg.tie_word_embeddings else "lm_head.weight"
            src = need(key).chunk(tp[1], dim=0)[tp[0]]
        else:
            raise KeyError(f"no HF mapping for Megatron parameter '{name}'")
        if src.shape != p.shape:
            raise ValueError(f"shape mismatch for {name}: HF gives {tuple(src.shape)}, model shard has {tuple(p.shape)}")
        p.copy_(src.to(p.dtype))


def init_hf_state(cfg: ModelConfig, seed: int) -> dict[str, torch.Tensor]:
    """Seeded initial weights in HF layout: every parallel layout starts from the same model.

    Normal(0, init_std) for matrices, scaled by 1/sqrt(2L) for output projections (as Megatron's
    output-layer init), ones for norms. Generated per tensor from (seed, name) so it is independent
    of iteration order.
    """
    import hashlib

    shapes = hf_shapes(cfg)
    out = {}
    for name, shape in shapes.items():
        if name.endswith("norm.weight") or "layernorm" in name:
            out[name] = torch.ones(shape)
            continue
        g = torch.Generator().manual_seed(seed * 1_000_003 + int(hashlib.sha256(name.encode()).hexdigest()[:12], 16))
        std = cfg.init_std / (2 * cfg.num_layers) ** 0.5 if name.endswith(("o_proj.weight", "down_proj.weight")) \
            else cfg.init_std
        out[name] = torch.randn(shape, generator=g) * std
    return out


def hf_shapes(cfg: ModelConfig) -> dict[str, tuple[int, ...]]:
    h, hd = cfg.hidden_size, cfg.head_dim
    s: dict[str, tuple[int, ...]] = {"model.embed_tokens.weight": (cfg.vocab_size, h), "model.norm.weight": (h,)}
    if not cfg.tie_word_embeddings:
        s["lm_head.weight"] = (cfg.vocab_size, h)
    for i in range(cfg.num_layers):
        p = f"model.layers.{i}."
        s[p + "input_layernorm.weight"] = (h,)
        s[p + "post_attention_layernorm.weight"] = (h,)
        s[p + "self_attn.q_proj.weight"] = (cfg.num_attention_heads * hd, h)
        s[p + "self_attn.k_proj.weight"] = (cfg.num_query_groups * hd, h)
        s[p + "self_attn.v_proj.weight"] = (cfg.num_query_groups * hd, h)
        s[p + "self_attn.o_proj.weight"] = (h, cfg.num_attention_heads * hd)
        if cfg.qk_layernorm:
            s[p + "self_attn.q_norm.weight"] = (hd,)
            s[p + "self_attn.k_norm.weight"] = (hd,)
        if cfg.is_moe:
            s[p + "mlp.gate.weight"] = (cfg.num_experts, h)
            for e in range(cfg.num_experts):
                f = cfg.moe_ffn_hidden_size
                s[p + f"mlp.experts.{e}.gate_proj.weight"] = (f, h)
                s[p + f"mlp.experts.{e}.up_proj.weight"] = (f, h)
                s[p + f"mlp.experts.{e}.down_proj.weight"] = (h, f)
        else:
            f = cfg.ffn_hidden_size
            s[p + "mlp.gate_proj.weight"] = (f, h)
            s[p + "mlp.up_proj.weight"] = (f, h)
            s[p + "mlp.down_proj.weight"] = (h, f)
    return s
