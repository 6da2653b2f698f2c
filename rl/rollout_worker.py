"""The rollout engine in its own process: vLLM (model/vllm_engine.Engine) behind a pipe.

    eng = RolloutEngine(hf_dir, max_model_len=1024, seed=0)
    outs = eng.generate([[ids...], ...], n=4, temperature=1.0, max_tokens=96, seed=7)  # [[Sample], ...]
    eng.score([[ids...]])      # logprob of every token after the first, under the engine's weights
    eng.reload(hf_dir)         # weight sync in place (the engine is not restarted), returns seconds
    eng.sleep(); eng.wake()    # GPU colocation: free the engine's memory while the trainer updates
    eng.close()

Why a process: vLLM's in-process engine changes its process (thread count, LD_PRELOAD, its own
torch.distributed world), which a Megatron trainer under torchrun must not share. Rank 0 owns one engine;
prompts and completions are token ids, so the trainer sees exactly the tokens that were sampled.
On GPUs the same process is colocated with the trainer on the GPU and sleeps during updates.
"""
from __future__ import annotations

import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from pathlib import Path


@dataclass
class Sample:
    token_ids: list[int]  # generated ids, the stop token included when one was produced
    logprobs: list[float]  # engine logprob of each generated id (at the sampling temperature)
    finish_reason: str  # stop | length


def _die_with_parent() -> None:
    """Linux: the engine gets SIGKILL when the trainer dies (even by kill -9), so no orphan holds memory."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _serve(conn, hf_dir: str, kw: dict) -> None:
    _die_with_parent()
    from model.vllm_engine import Engine

    try:
        eng = Engine(Path(hf_dir), **kw)
    except Exception as e:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", {"stop_ids": eng.stop_ids, "max_model_len": eng.max_model_len}))
    sc = eng.llm.llm_engine.vllm_config.scheduler_config
    limits = (sc.max_num_batched_tokens, sc.max_num_seqs)
    from vllm import SamplingParams, TokensPrompt

    while True:
        cmd, args = conn.recv()
        try:
            if cmd == "close":
                conn.send(("ok", None))
                return
            if cmd == "generate":
                prompts, n, temperature, top_p, max_tokens, seed, ignore_eos = args
                params = [SamplingParams(n=n, temperature=temperature, top_p=top_p,
                                         seed=None if seed is None else seed + i,
                                         max_tokens=max(1, min(max_tokens, eng.max_model_len - len(p))),
                                         stop_token_ids=[] if ignore_eos else eng.stop_ids, ignore_eos=ignore_eos,
                                         logprobs=0, skip_special_tokens=False)
                          for i, p in enumerate(prompts)]
                res = []
                outs = []
                for a, b in _waves(prompts, n, seed, limits):
                    outs += eng.llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompts[a:b]], params[a:b],
                                             use_tqdm=False)
                for o in outs:
                    res.append([(list(c.token_ids), [lp[t].logprob for lp, t in zip(c.logprobs or [], c.token_ids)],
                                 c.finish_reason or "length") for c in o.outputs])
                conn.send(("ok", res))
            elif cmd == "score":
                seqs, temperature = args
                sp = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=temperature)
                outs = eng.llm.generate([TokensPrompt(prompt_token_ids=s) for s in seqs], sp, use_tqdm=False)
                conn.send(("ok", [[d[t].logprob for d, t in zip(o.prompt_logprobs[1:], s[1:])]
                                  for o, s in zip(outs, seqs)]))
            elif cmd == "reload":
                t0 = time.perf_counter()
                eng.reload_weights(Path(args))
                conn.send(("ok", time.perf_counter() - t0))
            elif cmd in ("sleep", "wake"):
                import torch

                if torch.cuda.is_available():
                    eng.llm.sleep(level=1) if cmd == "sleep" else eng.llm.wake_up()
                conn.send(("ok", None))
            else:
                conn.send(("error", f"unknown command {cmd!r}"))
        except Exception as e:  # noqa: BLE001 - the parent decides; the engine stays up
            conn.send(("error", f"{type(e).__name__}: {e}"))


def _waves(prompts: list[list[int]], n: int, seed, limits: tuple[int, int]) -> list[tuple[int, int]]:
    """[a, b) slices of the prompts, one engine call each. Seeded sampling on the CPU cannot survive a chunked
    prefill (vLLM rewinds the request's generator offset, which CPU generators do not have: "CPU Generator does
    not use offset"), and a request is chunked when it is admitted while the step's token budget is used up.
    So seeded calls go in waves whose every request is admitted in the first step: prompt tokens within
    max_num_batched_tokens and requests (x n) within max_num_seqs. Unseeded calls run whole."""
    if seed is None or not prompts:
        return [(0, len(prompts))] if prompts else []
    budget, seqs = limits
    out, a, tok = [], 0, 0
    for i, p in enumerate(prompts):
        if i > a and (tok + n * len(p) > budget or (i - a + 1) * n > seqs):
            out.append((a, i))
            a, tok = i, 0
        tok += n * len(p)
    out.append((a, len(prompts)))
    return out


class EngineError(RuntimeError):
    pass


class RolloutEngine:
    def __init__(self, hf_dir: Path, *, max_model_len: int, seed: int = 0, kv_cache_gib: int = 2,
                 gpu_memory_utilization: float = 0.35, enable_sleep_mode: bool = False, dtype: str = "float32",
                 tensor_parallel_size: int = 1, timeout_s: float = 600):
        ctx = mp.get_context("spawn")  # a clean interpreter: no inherited torch/gloo/Megatron state
        self._conn, child = ctx.Pipe()
        kw = dict(max_model_len=max_model_len, seed=seed, kv_cache_gib=kv_cache_gib,
                  gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=enable_sleep_mode, dtype=dtype,
                  tensor_parallel_size=tensor_parallel_size)
        env_keep = {k: os.environ.pop(k) for k in ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT")
                    if k in os.environ}  # the child must not join the trainer's torch.distributed world
        try:
            self._proc = ctx.Process(target=_serve, args=(child, str(hf_dir), kw), daemon=True)
            self._proc.start()
        finally:
            os.environ.update(env_keep)
        child.close()
        self.timeout_s = timeout_s
        info = self._recv("start")
        self.stop_ids, self.max_model_len = info["stop_ids"], info["max_model_len"]

    def _recv(self, what: str):
        if not self._conn.poll(self.timeout_s):
            raise EngineError(f"rollout engine did not answer {what} within {self.timeout_s}s")
        try:
            status, payload = self._conn.recv()
        except EOFError:
            raise EngineError(f"rollout engine died during {what} (exit code {self._proc.exitcode})") from None
        if status == "error":
            raise EngineError(f"rollout engine failed at {what}: {payload}")
        return payload

    def _call(self, cmd: str, args=None):
        self._conn.send((cmd, args))
        return self._recv(cmd)

    def generate(self, prompts: list[list[int]], *, n: int = 1, temperature: float = 1.0, top_p: float = 1.0,
                 max_tokens: int = 96, seed: int | None = None, ignore_eos: bool = False) -> list[list[Sample]]:
        """n samples per prompt; a prompt with no room left in the context gets empty 'length' samples.
        ignore_eos: always max_tokens (benchmarks)."""
        room = [i for i, p in enumerate(prompts) if len(p) < self.max_model_len]
        got = self._call("generate", ([prompts[i] for i in room], n, temperature, top_p, max_tokens, seed,
                                      ignore_eos)) \
            if room else []
        out = [[Sample([], [], "length") for _ in range(n)] for _ in prompts]
        for i, samples in zip(room, got):
            out[i] = [Sample(*s) for s in samples]
        return out

    def score(self, seqs: list[list[int]], temperature: float = 1.0) -> list[list[float]]:
        return self._call("score", (seqs, temperature))

    def reload(self, hf_dir: Path) -> float:
        return self._call("reload", str(hf_dir))

    def sleep(self) -> None:
        self._call("sleep")

    def wake(self) -> None:
        self._call("wake")

    def close(self) -> None:
        try:
            if self._proc.is_alive():
                self._call("close")
        except (EngineError, OSError, BrokenPipeError):
            pass
        self._proc.join(30)
        if self._proc.is_alive():
            self._proc.kill()
            self._proc.join()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()
