"""Helper run by test_fused.py (plain python): the tiny MoE model with and without `fuse_elementwise`, as JSON.

    python _run_fused.py --out fused.json

Builds the model twice with the same weights, once eager and once with the compiled pieces of model/fused.py, runs
the same batch forward (per-token losses) and backward, and writes (`float32`: the MoE model; `bfloat16_dense`: the
dense one, whose gradients no routing flip can move; `bfloat16_dense_gemm`: that with train.cpu_attention=gemm too,
model/attention.py) the
largest loss difference, the largest gradient difference per parameter (max |diff| / max |grad|, and ||diff|| / ||grad||), how often each compiled piece was called, and Dynamo's graph and graph-break
counts (a piece that fell back to eager would compare eager with itself). `bfloat16_pieces`: each piece against the
eager code it replaces, on random inputs: the largest output and input-gradient differences.
"""
from __future__ import annotations

import json
from pathlib import Path

import torch

from model import attention, fused, parallel
from model.build import build_model
from model.tests._run_layout import MBS, SEQ, start_tiny, tiny_config

PIECES = ("rms_norm", "swiglu_probs", "language_model_loss")


def spy_on_pieces() -> dict:
    """Count the calls of model/fused.py's entry points and of model/attention.causal (looked up through their
    modules at call time)."""
    calls = dict.fromkeys((*PIECES, "attention"), 0)
    for mod, name, key in [*((fused, p, p) for p in PIECES), (attention, "causal", "attention")]:
        fn = getattr(mod, name)

        def counted(*a, _fn=fn, _key=key):
            calls[_key] += 1
            return _fn(*a)

        setattr(mod, name, counted)
    return calls


def loss_and_grads(model, tokens, labels):
    model.zero_grad(set_to_none=True)
    pos = torch.arange(tokens.shape[1]).expand_as(tokens)
    losses = model(tokens, pos, None, labels=labels)  # [b, s] per-token losses
    losses.float().mean().backward()
    return losses.detach().float(), {n: p.grad.float() for n, p in model.named_parameters() if p.grad is not None}


def compare_model(dtype: torch.dtype, cfg, par, calls: dict, cpu_attention: str = "flash") -> dict:
    from torch._dynamo.utils import counters

    eager = build_model(cfg, par, dtype)
    fast = build_model(cfg, par, dtype, fuse_elementwise=True, cpu_attention=cpu_attention)
    fast.load_state_dict(eager.state_dict())
    g = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, cfg.vocab_size, (MBS, SEQ), generator=g)
    labels = torch.randint(0, cfg.vocab_size, (MBS, SEQ), generator=g)
    a_loss, a_grads = loss_and_grads(eager, tokens, labels)
    before = dict(calls)
    graphs = counters["stats"]["unique_graphs"]
    b_loss, b_grads = loss_and_grads(fast, tokens, labels)
    max_rel = {k: ((a_grads[k] - b_grads[k]).abs().max() / a_grads[k].abs().max().clamp(min=1e-30)).item()
               for k in a_grads}
    norm_rel = {k: ((a_grads[k] - b_grads[k]).norm() / a_grads[k].norm().clamp(min=1e-30)).item() for k in a_grads}
    return {"loss_max_abs": (a_loss - b_loss).abs().max().item(), "loss_scale": a_loss.abs().max().item(),
            "grad_max_rel": max(max_rel.values()), "worst_grad": max(max_rel, key=max_rel.get),
            "grad_norm_rel": max(norm_rel.values()), "worst_grad_norm": max(norm_rel, key=norm_rel.get),
            "params": len(a_grads), "fast_params_with_grad": len(b_grads),
            "calls": {k: calls[k] - before[k] for k in calls},
            "new_graphs": counters["stats"]["unique_graphs"] - graphs,
            "graph_breaks": sum(counters["graph_break"].values())}


def max_rel(a, b) -> float:
    return ((a.float() - b.float()).abs().max() / a.float().abs().max().clamp(min=1e-30)).item()


def compare_piece(fast, eager, *inputs) -> dict:
    """Largest differences (relative to the largest value) of one piece's output and its inputs' gradients."""
    g = torch.Generator().manual_seed(1)
    outs = []
    for fn in (eager, fast):
        xs = [x.detach().clone().requires_grad_(x.is_floating_point()) for x in inputs]
        y = fn(*xs)
        y.backward(torch.randn(y.shape, generator=g.manual_seed(1)).to(y.dtype))
        outs.append((y.detach(), [x.grad for x in xs if x.grad is not None]))
    (ya, ga), (yb, gb) = outs
    return {"out_max_rel": max_rel(ya, yb), "grad_max_rel": max(max_rel(a, b) for a, b in zip(ga, gb)),
            "grads": len(ga)}


def compare_pieces(dtype: torch.dtype, cfg) -> dict:
    """Each compiled piece against the eager code it replaces (model/layers.py, Megatron's cross entropy)."""
    from megatron.core import tensor_parallel

    from model.layers import _RMSNormFn

    g = torch.Generator().manual_seed(2)
    rows, h, v = MBS * SEQ, cfg.hidden_size, cfg.vocab_size
    x = torch.randn(SEQ, MBS, h, generator=g).to(dtype)
    w = (1 + 0.1 * torch.randn(h, generator=g)).to(dtype)
    y = torch.randn(rows, 2 * cfg.moe_ffn_hidden_size, generator=g).to(dtype)
    probs = torch.rand(rows, generator=g)
    logits = torch.randn(SEQ, MBS, v, generator=g).to(dtype)
    labels = torch.randint(0, v, (MBS, SEQ), generator=g)

    def megatron_loss(labels, logits):  # LanguageModule.compute_language_model_loss without fusion
        return tensor_parallel.vocab_parallel_cross_entropy(logits, labels.transpose(0, 1).contiguous()).transpose(0, 1)

    return {"rms_norm": compare_piece(lambda x, w: fused.rms_norm(x, w, 1e-6),
                                      lambda x, w: _RMSNormFn.apply(x, w, 1e-6), x, w),
            "swiglu_probs": compare_piece(fused.swiglu_probs, fused.swiglu_probs_eager, y, probs),
            "language_model_loss": compare_piece(lambda lg: fused.language_model_loss(labels, lg),
                                                 lambda lg: megatron_loss(labels, lg), logits)}


def main() -> None:
    a, cfg, par = start_tiny(True)
    calls = spy_on_pieces()
    out = {"float32": compare_model(torch.float32, cfg, par, calls),
           "bfloat16_pieces": compare_pieces(torch.bfloat16, cfg)}
    parallel.destroy()
    dense = tiny_config(False)  # no router whose top-k choices could flip with the rounding
    parallel.init(par, dense, seed=1, seq_length=SEQ)
    out["bfloat16_dense"] = compare_model(torch.bfloat16, dense, par, calls)
    out["bfloat16_dense_gemm"] = compare_model(torch.bfloat16, dense, par, calls, cpu_attention="gemm")
    Path(a.out).write_text(json.dumps(out))
    parallel.destroy()


if __name__ == "__main__":
    main()
