"""Routing replay check, run in a subprocess by test_rl_routing.py (vLLM and Megatron each own a process).

    python rl/tests/_routing_check.py POLICY_CKPT OUT_JSON FLIP_FRAC

The engine (model.vllm_engine.EngineProcess on POLICY_CKPT/hf, recording its routing, with FLIP_FRAC of its router
decisions forced to flip) samples a few completions; the Megatron trainer (POLICY_CKPT/mcore) recomputes the
sampled tokens' logprobs with its own routing and with the engine's replayed (rl/routing.py). Records the largest
logprob difference to the engine's for each, and the share of tokens whose routing the trainer computed otherwise.
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


def main(ckpt: Path, out: Path, flip_frac: float) -> None:
    from model import checkpoint, parallel
    from model.build import build_model
    from model.config import ModelConfig, ParallelConfig
    from model.vllm_engine import EngineProcess
    from rl import policy, routing

    mcfg = ModelConfig.from_dict(json.loads((ckpt / "model_config.json").read_text()))
    seq = 64
    with EngineProcess(ckpt / "hf", max_model_len=256, seed=0, record_routing=True,
                       router_flip_frac=flip_frac) as eng:
        prompts = [[5 + i, 17, 33 + i, 8, 90, 41 + i] for i in range(3)]
        got = eng.generate(prompts, n=2, temperature=1.0, max_tokens=40, seed=11)
    samples = []
    for p, g in zip(prompts, got):
        for c in g:
            full = p + c.token_ids
            n = len(full) - 1
            mask = [0.0] * (len(p) - 1) + [1.0] * len(c.token_ids)
            rout = torch.full((seq, mcfg.num_layers, mcfg.moe_router_topk), -1, dtype=torch.int16)
            rout[:n] = torch.from_numpy(c.routing)
            samples.append({"tokens": torch.tensor(full[:-1] + [0] * (seq - n)),
                            "labels": torch.tensor(full[1:] + [0] * (seq - n)),
                            "loss_mask": torch.tensor(mask + [0.0] * (seq - n)),
                            "rollout_logprobs": torch.tensor([0.0] * (len(p) - 1) + c.logprobs + [0.0] * (seq - n)),
                            "position_ids": torch.arange(seq), "routing": rout})
    batch = [{k: torch.stack([s[k] for s in samples]) for k in samples[0]}]
    par = ParallelConfig(micro_batch_size=len(samples), global_batch_size=len(samples))
    parallel.init(par, mcfg, seed=0, seq_length=seq)
    model = build_model(mcfg, par)
    checkpoint.load_model_only(model, ckpt / "mcore")
    res = {"flip_frac": flip_frac, "tokens": int(batch[0]["loss_mask"].sum())}
    m = batch[0]["loss_mask"].bool()
    for name, on in (("own", False), ("replay", True)):
        rp = routing.Replay(model, replay=on)
        lp = policy.logprobs(model, batch, seq, 1.0, replay=rp)[0]
        res[f"{name}_err"] = float((lp - batch[0]["rollout_logprobs"])[m].abs().max())
        st = rp.stats()
        res["routing_differ_frac"] = float(st["routing_differ_sum"] / st["routing_tokens_sum"])
    parallel.destroy()
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), float(sys.argv[3]))
