"""Weight sync check, run in a subprocess by test_sync.py (vLLM and Megatron each own a process).

    python rl/tests/_sync_check.py SFT_CKPT OUT_JSON [files|memory]

Trainer = Megatron model loaded from SFT_CKPT/mcore; engine = model.vllm_engine.EngineProcess on SFT_CKPT/hf. Records:
engine vs trainer logprobs of fixed tokens before the update, after three GRPO updates + sync, and the greedy
output before, after, and after copying the old weights back into the trainer and syncing them (the same
sync path, not a reload of the original HF directory).
"""
from __future__ import annotations

import json
import sys
from pathlib import Path

import torch


def main(ckpt: Path, out: Path, path: str = "files") -> None:
    from model import checkpoint, parallel, train
    from model.build import build_model
    from model.config import ModelConfig, ParallelConfig
    from rl import policy, sync
    from rl.config import AlgoConfig
    from model.vllm_engine import EngineProcess

    mcfg = ModelConfig.from_dict(json.loads((ckpt / "model_config.json").read_text()))
    par = ParallelConfig(micro_batch_size=2, global_batch_size=2)
    seq = 64
    parallel.init(par, mcfg, seed=0, seq_length=seq)
    model = build_model(mcfg, par)
    ddp, opt, sch = train.setup(model, train.OptimConfig(lr=3e-3, min_lr=3e-3, warmup_steps=0, decay_style="constant",
                                                         weight_decay=0.0), 1, 2)
    checkpoint.load_model_only(model, ckpt / "mcore")
    g = torch.Generator().manual_seed(0)
    fixed = [torch.randint(10, mcfg.vocab_size, (seq + 1,), generator=g).tolist() for _ in range(2)]
    prompt = fixed[0][:12]

    def batch(adv: list[float]):
        items = []
        for toks, a in zip(fixed, adv):
            items.append({"tokens": torch.tensor(toks[:-1]), "labels": torch.tensor(toks[1:]),
                          "loss_mask": torch.ones(seq), "advantages": torch.full((seq,), a),
                          "rollout_logprobs": torch.zeros(seq), "position_ids": torch.arange(seq)})
        return [{k: torch.stack([it[k] for it in items]) for k in items[0]}]

    def trainer_lps():
        b = batch([0.0, 0.0])
        return policy.logprobs(ddp, b, seq, 1.0)[0].tolist()

    def err(eng_lps, tr_lps):
        return max(abs(x - y) for e, t in zip(eng_lps, tr_lps) for x, y in zip(e, t))

    res = {}
    sdir = sync.sync_dir()
    with EngineProcess(ckpt / "hf", max_model_len=256, seed=0) as eng:
        before_engine = eng.score(fixed)
        before_trainer = trainer_lps()
        res["before_err"] = err(before_engine, before_trainer)
        res["greedy_before"] = eng.generate([prompt], temperature=0.0, max_tokens=24)[0][0].token_ids
        old = {k: v.detach().clone() for k, v in checkpoint.full_state_dict(ddp).items()}
        algo = AlgoConfig(tis_cap=0.0)
        b = batch([1.0, -1.0])
        b[0]["rollout_logprobs"] = torch.tensor(before_trainer)
        for _ in range(3):
            m = policy.update(ddp, opt, sch, b, seq, 2, algo, 1.0)
        res["grad_norm"] = m["grad_norm"]
        s = sync.sync(ddp, mcfg, eng, sdir / "hf", ckpt / "tokenizer", in_memory=path == "memory")
        res["sync"] = s
        after_engine = eng.score(fixed)
        after_trainer = trainer_lps()
        res["after_err"] = err(after_engine, after_trainer)
        res["engine_change"] = err(after_engine, before_engine)
        res["greedy_after"] = eng.generate([prompt], temperature=0.0, max_tokens=24)[0][0].token_ids
        with torch.no_grad():  # the trainer's old weights back, then the same sync path carries them to the engine
            for k, v in checkpoint.unwrap(ddp).state_dict().items():
                if k in old:
                    v.copy_(old[k])
        res["restore_sync"] = sync.sync(ddp, mcfg, eng, sdir / "hf", ckpt / "tokenizer", in_memory=path == "memory")
        res["greedy_restored"] = eng.generate([prompt], temperature=0.0, max_tokens=24)[0][0].token_ids
        res["restored_err"] = err(eng.score(fixed), before_engine)
        res["restored_trainer_err"] = err(trainer_lps(), before_trainer)
    import shutil

    shutil.rmtree(sdir, ignore_errors=True)
    parallel.destroy()
    out.write_text(json.dumps(res, indent=1))


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), *sys.argv[3:4])
