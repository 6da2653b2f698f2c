"""HuggingFace directories: config.json <-> ModelConfig, safetensors weights, tokenizer files.

An HF directory written here loads in transformers (`AutoModelForCausalLM.from_pretrained`) and in
vLLM (`LLM(model=DIR)`): LlamaForCausalLM for dense configs, Qwen3MoeForCausalLM for MoE.
"""
from __future__ import annotations

import json
import shutil
from pathlib import Path

import torch

from model.config import ConfigError, ModelConfig, RopeScaling

TOKENIZER_FILES = ("tokenizer.json", "tokenizer_config.json", "special_tokens_map.json", "chat_template.jinja")


def hf_config(cfg: ModelConfig, tokenizer_dir: Path | None = None, dtype: str = "float32") -> dict:
    tok = _special_ids(tokenizer_dir)
    d = {
        "vocab_size": cfg.vocab_size, "hidden_size": cfg.hidden_size, "num_hidden_layers": cfg.num_layers,
        "num_attention_heads": cfg.num_attention_heads, "num_key_value_heads": cfg.num_query_groups,
        "head_dim": cfg.head_dim, "rms_norm_eps": cfg.norm_eps, "rope_theta": cfg.rope_theta,
        "max_position_embeddings": cfg.max_position_embeddings, "tie_word_embeddings": cfg.tie_word_embeddings,
        "hidden_act": "silu", "attention_bias": False, "initializer_range": cfg.init_std,
        "torch_dtype": dtype, "use_cache": True, **tok,
    }
    rs = cfg.rope_scaling
    if rs.type != "none":
        d["rope_scaling"] = {"rope_type": rs.type, "factor": rs.factor,
                             "original_max_position_embeddings": rs.original_max_position_embeddings}
        if rs.type == "llama3":
            d["rope_scaling"].update(low_freq_factor=1.0, high_freq_factor=4.0)
    if cfg.is_moe:
        d.update(architectures=["Qwen3MoeForCausalLM"], model_type="qwen3_moe",
                 intermediate_size=cfg.moe_ffn_hidden_size, moe_intermediate_size=cfg.moe_ffn_hidden_size,
                 num_experts=cfg.num_experts, num_experts_per_tok=cfg.moe_router_topk, norm_topk_prob=True,
                 decoder_sparse_step=1, mlp_only_layers=[], router_aux_loss_coef=cfg.moe_aux_loss_coeff,
                 output_router_logits=False, use_sliding_window=False, sliding_window=None)
    else:
        d.update(architectures=["LlamaForCausalLM"], model_type="llama", intermediate_size=cfg.ffn_hidden_size,
                 mlp_bias=False, pretraining_tp=1)
    return d


def model_config_from_hf(d: dict) -> ModelConfig:
    """config.json of a Llama or Qwen3-MoE checkpoint -> ModelConfig."""
    mt = d.get("model_type")
    if mt not in ("llama", "qwen3_moe", "qwen2", "qwen3"):
        raise ConfigError(f"model_type={mt!r} is not supported: import a Llama, Qwen2/3 or Qwen3-MoE checkpoint")
    rs = d.get("rope_scaling") or {}
    rope = RopeScaling()
    if rs:
        rope = RopeScaling(type=rs.get("rope_type", rs.get("type", "none")), factor=float(rs.get("factor", 1.0)),
                           original_max_position_embeddings=int(rs.get("original_max_position_embeddings", 0)))
    theta = d.get("rope_theta", (d.get("rope_parameters") or {}).get("rope_theta", 10000.0))
    heads = d["num_attention_heads"]
    cfg = ModelConfig(
        vocab_size=d["vocab_size"], hidden_size=d["hidden_size"], num_layers=d["num_hidden_layers"],
        num_attention_heads=heads, num_query_groups=d.get("num_key_value_heads", heads),
        head_dim=d.get("head_dim") or d["hidden_size"] // heads, ffn_hidden_size=d.get("intermediate_size", 0),
        num_experts=d.get("num_experts", 0) if mt == "qwen3_moe" else 0,
        moe_router_topk=d.get("num_experts_per_tok", 2), moe_ffn_hidden_size=d.get("moe_intermediate_size", 0),
        moe_aux_loss_coeff=d.get("router_aux_loss_coef", 0.0), rope_theta=float(theta), rope_scaling=rope,
        max_position_embeddings=d.get("max_position_embeddings", 2048), norm_eps=d.get("rms_norm_eps", 1e-6),
        init_std=d.get("initializer_range", 0.02), tie_word_embeddings=d.get("tie_word_embeddings", False))
    if mt == "qwen3_moe" and (d.get("mlp_only_layers") or d.get("decoder_sparse_step", 1) != 1
                              or not d.get("norm_topk_prob", True)):
        raise ConfigError("Qwen3-MoE with dense layers or norm_topk_prob=false is not supported by this mapping")
    cfg.validate()
    return cfg


def _special_ids(tokenizer_dir: Path | None) -> dict:
    if tokenizer_dir is None:
        return {}
    from transformers import PreTrainedTokenizerFast

    tok = PreTrainedTokenizerFast.from_pretrained(str(tokenizer_dir))
    return {"bos_token_id": tok.bos_token_id, "eos_token_id": tok.eos_token_id, "pad_token_id": tok.pad_token_id}


def save_hf(out_dir: Path, tensors: dict[str, torch.Tensor], cfg: ModelConfig, tokenizer_dir: Path | None,
            dtype: torch.dtype = torch.float32) -> None:
    """Write an HF directory: model.safetensors, config.json, generation_config.json, tokenizer files."""
    from safetensors.torch import save_file

    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    save_file({k: v.to(dtype).contiguous() for k, v in sorted(tensors.items())}, str(out_dir / "model.safetensors"),
              metadata={"format": "pt"})
    conf = hf_config(cfg, tokenizer_dir, dtype=str(dtype).removeprefix("torch."))
    (out_dir / "config.json").write_text(json.dumps(conf, indent=2, sort_keys=True) + "\n")
    gen = {k: conf[k] for k in ("bos_token_id", "eos_token_id", "pad_token_id") if conf.get(k) is not None}
    (out_dir / "generation_config.json").write_text(json.dumps(gen, indent=2, sort_keys=True) + "\n")
    if tokenizer_dir is not None:
        copy_tokenizer(Path(tokenizer_dir), out_dir)


def copy_tokenizer(src: Path, dst: Path) -> None:
    for name in TOKENIZER_FILES:
        if (src / name).exists():
            shutil.copy2(src / name, dst / name)


def load_hf(hf_dir: Path) -> tuple[dict[str, torch.Tensor], ModelConfig]:
    """Tensors (all safetensors shards) and the ModelConfig of an HF directory."""
    from safetensors.torch import load_file

    hf_dir = Path(hf_dir)
    conf = hf_dir / "config.json"
    if not conf.exists():
        raise FileNotFoundError(f"{conf} not found: pass an HF checkpoint directory (config.json + *.safetensors)")
    files = sorted(hf_dir.glob("*.safetensors"))
    if not files:
        raise FileNotFoundError(f"no *.safetensors in {hf_dir}: convert .bin weights to safetensors first")
    tensors: dict[str, torch.Tensor] = {}
    for f in files:
        tensors.update(load_file(str(f)))
    return tensors, model_config_from_hf(json.loads(conf.read_text()))
