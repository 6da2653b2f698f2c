"""Tiny HF checkpoints for the tests: a WordLevel tokenizer and seeded, deliberately non-trivial weights."""
from __future__ import annotations

from pathlib import Path

import torch

from model import hf_io, hf_mapping
from model.config import ModelConfig

VOCAB = 512


def tiny_hf_config(moe: bool) -> ModelConfig:
    # head_dim 32: vLLM's CPU attention supports head sizes 32, 64, 80, ...
    return ModelConfig(num_layers=2, vocab_size=VOCAB, hidden_size=64, num_attention_heads=4, num_query_groups=2,
                       head_dim=32, ffn_hidden_size=128, moe_ffn_hidden_size=64, num_experts=8 if moe else 0,
                       moe_router_topk=2, max_position_embeddings=128, init_std=0.2, rope_theta=10000.0)


def make_tokenizer(out_dir: Path) -> Path:
    from tokenizers import Tokenizer, models, pre_tokenizers
    from transformers import PreTrainedTokenizerFast

    vocab = {"<unk>": 0, "<s>": 1, "</s>": 2, **{f"t{i}": i for i in range(3, VOCAB)}}
    tok = Tokenizer(models.WordLevel(vocab=vocab, unk_token="<unk>"))
    tok.pre_tokenizer = pre_tokenizers.WhitespaceSplit()
    fast = PreTrainedTokenizerFast(tokenizer_object=tok, unk_token="<unk>", bos_token="<s>", eos_token="</s>",
                                   pad_token="<unk>")
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    fast.save_pretrained(str(out_dir))
    return out_dir


def nontrivial_weights(cfg: ModelConfig, seed: int = 5) -> dict[str, torch.Tensor]:
    """init_hf_state at init_std 0.2, with norm weights perturbed away from 1 (so a swapped norm shows)."""
    hf = hf_mapping.init_hf_state(cfg, seed)
    g = torch.Generator().manual_seed(seed)
    for k, v in hf.items():
        if v.dim() == 1:
            hf[k] = 1.0 + 0.3 * torch.randn(v.shape, generator=g)
    return hf


def make_hf_dir(root: Path, moe: bool) -> Path:
    root = Path(root)
    cfg = tiny_hf_config(moe)
    tok_dir = make_tokenizer(root / "tokenizer")
    hf_dir = root / ("hf_moe" if moe else "hf_dense")
    hf_io.save_hf(hf_dir, nontrivial_weights(cfg), cfg, tok_dir)
    return hf_dir
