"""SmoothQuant (Xiao et al., 2023) for the W8A8 fast variant: move activation outliers into the weights before int8.

    maxima = activation_maxima(Path("ckpt/hf"), prompts)          # per input channel max|x| of each smoothed linear
    stats = smooth(tensors, maxima, alpha=0.5)                     # in place on the HF state dict, before quantizing

Per-token int8 activations lose the small channels of a token whose few outlier channels set its scale. For a linear
y = W x whose input comes from a scale we can edit, x_j / s_j and W[:, j] * s_j give the same y in exact arithmetic,
with s_j = max|x_j|^alpha / max|W[:, j]|^(1 - alpha): the activation channels even out, the weights take the spread.
Folded here (no extra op at run time, any engine reads the result):
- q/k/v inputs into the layer's input_layernorm weight (the three share it);
- gate/up inputs into post_attention_layernorm (dense MLPs only: a MoE router reads the same norm output);
- down_proj inputs into up_proj's rows (down's input is silu(gate) * up, linear in up).
o_proj is left alone: its input channels are heads of v shared by several query heads (GQA).
"""
from __future__ import annotations

import re
from pathlib import Path

import torch

LAYER = re.compile(r"^model\.layers\.(\d+)\.")


def activation_maxima(hf_dir: Path, prompts: list[str], max_length: int = 1024) -> dict[str, torch.Tensor]:
    """max|x| per input channel of every q_proj, gate_proj and down_proj (transformers forward, float32)."""
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    model = AutoModelForCausalLM.from_pretrained(str(hf_dir), dtype=torch.float32).eval()
    maxima: dict[str, torch.Tensor] = {}

    def hook(name):
        def f(_mod, args):
            m = args[0].detach().abs().reshape(-1, args[0].shape[-1]).amax(dim=0)
            maxima[name] = torch.maximum(maxima[name], m) if name in maxima else m
        return f

    handles = [mod.register_forward_pre_hook(hook(n)) for n, mod in model.named_modules()
               if n.endswith(("self_attn.q_proj", "mlp.gate_proj", "mlp.down_proj"))]
    try:
        with torch.no_grad():
            for p in prompts:
                ids = tok(p, add_special_tokens=False, return_tensors="pt", truncation=True, max_length=max_length)
                model(**ids)
    finally:
        for h in handles:
            h.remove()
    return maxima


def _scale(x_max: torch.Tensor, weights: list[torch.Tensor], alpha: float) -> torch.Tensor:
    w_max = torch.stack([w.float().abs().amax(dim=0) for w in weights]).amax(dim=0)
    return (x_max.clamp(min=1e-5) ** alpha / w_max.clamp(min=1e-5) ** (1 - alpha)).clamp(min=1e-5)


def smooth(t: dict[str, torch.Tensor], maxima: dict[str, torch.Tensor], alpha: float) -> dict:
    """Fold the smoothing scales into `t` (an HF Llama / Qwen3 state dict) in place; returns counts and the largest
    activation max / median over channels before and after (how uneven the int8 inputs are)."""
    if not 0 < alpha < 1:
        raise ValueError(f"smooth alpha={alpha} must be in (0, 1)")
    layers = sorted({int(m.group(1)) for k in t if (m := LAYER.match(k))})
    done, spread_before, spread_after = 0, 0.0, 0.0
    for i in layers:
        p = f"model.layers.{i}."
        groups = [(p + "self_attn.q_proj", p + "input_layernorm.weight", [p + f"self_attn.{x}_proj.weight" for x in "qkv"])]
        if p + "mlp.gate_proj.weight" in t:  # dense MLP (a MoE layer has mlp.gate = router and mlp.experts.*)
            groups.append((p + "mlp.gate_proj", p + "post_attention_layernorm.weight",
                           [p + "mlp.gate_proj.weight", p + "mlp.up_proj.weight"]))
            groups.append((p + "mlp.down_proj", None, [p + "mlp.down_proj.weight"]))
        for name, norm, ws in groups:
            if name not in maxima:
                continue
            x = maxima[name].float()
            s = _scale(x, [t[w] for w in ws], alpha)
            for w in ws:  # columns of the consumers grow by s ...
                t[w] = (t[w].float() * s[None, :]).to(t[w].dtype)
            if norm is not None:  # ... and the producer shrinks by s
                t[norm] = (t[norm].float() / s).to(t[norm].dtype)
            else:  # down_proj's input channel j is silu(gate_j) * up_j: scale up_proj's row j
                up = p + "mlp.up_proj.weight"
                t[up] = (t[up].float() / s[:, None]).to(t[up].dtype)
            spread_before = max(spread_before, float(x.max() / x.median().clamp(min=1e-12)))
            xs = x / s
            spread_after = max(spread_after, float(xs.max() / xs.median().clamp(min=1e-12)))
            done += 1
    return {"alpha": alpha, "smoothed_linears_groups": done, "max_over_median_before": spread_before,
            "max_over_median_after": spread_after}
