"""Helper of test_rl_logit_rows.py (plain python): the GRPO update and the logprobs of packed trajectories with the
output layer at the action rows only (model/logit_rows.py) against logits at every position, same weights.

    python rl/tests/_logit_rows_check.py OUT_JSON [tied]

`tied`: the output layer shares the embedding's weight (SmolLM2), so it holds no parameter of its own.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

SEQ = 64


def _sample(n_prompt: int, n_action: int, adv: float, seed: int) -> dict:
    g = torch.Generator().manual_seed(seed)
    mask = torch.zeros(SEQ)
    mask[n_prompt:n_prompt + n_action] = 1
    return {"tokens": torch.randint(5, 500, (SEQ,), generator=g), "labels": torch.randint(5, 500, (SEQ,), generator=g),
            "loss_mask": mask, "advantages": torch.full((SEQ,), adv),
            "rollout_logprobs": (-6.0 - torch.rand(SEQ, generator=g)) * mask, "position_ids": torch.arange(SEQ)}


def main(out: Path, tied: bool = False) -> None:
    from model import hf_mapping, logit_rows, parallel, train
    from model.build import build_model
    from model.config import ModelConfig, ParallelConfig
    from rl import packing, policy
    from rl.config import AlgoConfig

    cfg = ModelConfig(num_layers=2, vocab_size=512, hidden_size=64, num_attention_heads=4, num_query_groups=2,
                      head_dim=16, ffn_hidden_size=128, moe_ffn_hidden_size=64, num_experts=4, moe_router_topk=2,
                      max_position_embeddings=SEQ, tie_word_embeddings=tied)
    par = ParallelConfig(micro_batch_size=2, global_batch_size=8)
    parallel.init(par, cfg, seed=1, seq_length=SEQ)
    m0 = build_model(cfg, par)
    hf_mapping.load_hf_into(m0, hf_mapping.init_hf_state(cfg, 3), cfg)
    state = {k: v.detach().clone() for k, v in m0.state_dict().items() if not k.endswith("_extra_state")}
    spec = [(20, 6, 1.0), (30, 3, -1.0), (12, 10, 0.5), (25, 4, -0.5), (40, 8, 1.0), (9, 2, -1.0), (16, 5, 0.5),
            (22, 7, -0.5)]
    samples = [_sample(p, a, adv, seed=i) for i, (p, a, adv) in enumerate(spec)]
    res, real = {}, logit_rows.select
    for mode in ("full", "rows"):
        if mode == "full":
            logit_rows.select = lambda model, loss_mask: None
        try:
            m = build_model(cfg, par)
            m.load_state_dict(state, strict=False)
            before = torch.cat([p.detach().flatten() for p in m.parameters()])
            ddp, opt, sch = train.setup(m, train.OptimConfig(lr=1e-3, min_lr=1e-3, warmup_steps=0), 1, 8)
            mbs = packing.pack(samples, SEQ, par.micro_batch_size)
            shapes = []
            m.output_layer.register_forward_hook(lambda mod, args, o: shapes.append(list(args[0].shape)))
            lps = policy.logprobs(ddp, mbs, SEQ, 1.0)
            at = [lp[b["loss_mask"] > 0] for lp, b in zip(lps, mbs)]
            r = policy.update(ddp, opt, sch, mbs, SEQ, 8, AlgoConfig(), 1.0)
            after = torch.cat([p.detach().flatten() for p in m.parameters()])
        finally:
            logit_rows.select = real
        res[mode] = {"loss": r["loss"], "grad_norm": r["grad_norm"], "action_tokens": r["action_tokens"],
                     "output_inputs": shapes, "logprobs": torch.cat(at).tolist(), "before": before, "after": after}
    full, rows = res["full"], res["rows"]
    summary = {k: {x: v for x, v in r.items() if x not in ("before", "after")} for k, r in res.items()}
    summary["params_moved"] = float((full["after"] - full["before"]).abs().max())
    summary["params_max_diff"] = float((full["after"] - rows["after"]).abs().max())
    out.write_text(json.dumps(summary))
    parallel.destroy()


if __name__ == "__main__":
    main(Path(sys.argv[1]), tied=sys.argv[2:] == ["tied"])
