"""SmoothQuant folding (serving/smooth.py) leaves the model's function unchanged and evens the int8 inputs."""
from __future__ import annotations

import pytest
import torch

from serving.smooth import smooth


def tiny_llama():
    from transformers import LlamaConfig, LlamaForCausalLM

    torch.manual_seed(0)
    cfg = LlamaConfig(vocab_size=64, hidden_size=32, intermediate_size=48, num_hidden_layers=2, num_attention_heads=4,
                      num_key_value_heads=2, max_position_embeddings=64, tie_word_embeddings=True)
    m = LlamaForCausalLM(cfg).eval()
    with torch.no_grad():  # norms away from 1, so a scale folded into the wrong side shows
        for n, p in m.named_parameters():
            if n.endswith("layernorm.weight"):
                p.uniform_(0.5, 1.5)
    return m


def outlier_maxima(sd: dict, seed: int = 1) -> dict:
    g = torch.Generator().manual_seed(seed)
    out = {}
    for i in range(2):
        for name, width in (("self_attn.q_proj", 32), ("mlp.gate_proj", 32), ("mlp.down_proj", 48)):
            x = torch.rand(width, generator=g) + 0.1
            x[3] = 200.0  # one outlier channel, as in real LLM activations
            out[f"model.layers.{i}.{name}"] = x
    return out


def test_smoothing_keeps_the_logits():
    m = tiny_llama()
    ids = torch.randint(0, 64, (2, 12), generator=torch.Generator().manual_seed(2))
    with torch.no_grad():
        before = m(ids).logits
        sd = {k: v.clone() for k, v in m.state_dict().items()}
        stats = smooth(sd, outlier_maxima(sd), alpha=0.5)
        changed = sum(not torch.equal(sd[k], v) for k, v in m.state_dict().items())
        m.load_state_dict(sd)
        after = m(ids).logits
    assert stats["smoothed_linears_groups"] == 6 and changed > 0
    torch.testing.assert_close(after, before, rtol=1e-4, atol=1e-4)


def test_smoothing_evens_the_activation_channels():
    m = tiny_llama()
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    stats = smooth(sd, outlier_maxima(sd), alpha=0.5)
    assert stats["max_over_median_after"] < stats["max_over_median_before"] / 5, stats


def test_moe_layers_smooth_attention_only():
    """A MoE layer's router reads post_attention_layernorm: that norm must not be touched."""
    m = tiny_llama()
    sd = {k: v.clone() for k, v in m.state_dict().items()}
    for i in range(2):  # rename the dense MLP as a MoE layout: router + one expert
        p = f"model.layers.{i}.mlp."
        sd[p + "gate.weight"] = torch.randn(4, 32)
        for x in ("gate", "up", "down"):
            sd[p + f"experts.0.{x}_proj.weight"] = sd.pop(p + f"{x}_proj.weight")
    norm = sd["model.layers.0.post_attention_layernorm.weight"].clone()
    stats = smooth(sd, outlier_maxima(sd), alpha=0.5)
    assert stats["smoothed_linears_groups"] == 2
    assert torch.equal(sd["model.layers.0.post_attention_layernorm.weight"], norm)


def test_alpha_outside_the_open_interval_is_refused():
    with pytest.raises(ValueError, match="alpha=1"):
        smooth({}, {}, alpha=1)
