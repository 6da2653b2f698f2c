"""Make Megatron-Core 0.16 run on a CPU-only torch (gloo), for the tiny CPU path of every stage.

Megatron-Core assumes CUDA in a handful of places (see ../shared/ENGINES.md). This layer redirects
them to the CPU; the model, parallelism, optimizer and checkpoint code stay Megatron's own.
It is applied only when CUDA is absent: `apply()` is a no-op on a GPU machine.

What it covers, and why:
- torch.cuda device/stream/event/memory calls -> CPU or no-ops (Megatron calls them unconditionally);
- the CUDA RNG state functions (torch's and Megatron's private copies) -> the CPU generator, so the
  RNG tracker's fork/restore semantics (and checkpointed RNG state) still hold;
- a TorchFunctionMode that rewrites device="cuda"/int devices, `.cuda()` and `.to("cuda")` to CPU and
  makes `Tensor.type()` report `torch.cuda.*` (the optimizer and grad clipping assert on it);
- `moe_utils.te_general_gemm = None` (0.16.1 references it unguarded without TransformerEngine);
- MoE all-to-all split sizes as Python ints (gloo's all_to_all_single rejects tensors there).

The mode costs ~4 us per Python-level torch call (measured: 7.5 vs 3.3 us for a tiny torch.add), so
the training step runs the model's forward under `suspended()` (model/train.py): the forward needs
no CUDA rewrite (current_device, streams and RNG are patched above), while the schedule and the
optimizer around it create device="cuda" tensors and keep the mode.
"""
from __future__ import annotations

import contextlib

import torch
from torch.overrides import TorchFunctionMode

_APPLIED = False
_MODE: TorchFunctionMode | None = None


def _to_cpu_device(dev):
    if dev is None:
        return None
    if isinstance(dev, int):
        return torch.device("cpu")
    if isinstance(dev, str) and dev.startswith("cuda"):
        return torch.device("cpu")
    if isinstance(dev, torch.device) and dev.type == "cuda":
        return torch.device("cpu")
    return dev


class _CudaToCpu(TorchFunctionMode):
    """Rewrites CUDA placements to CPU inside every torch call."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if "device" in kwargs:
            kwargs["device"] = _to_cpu_device(kwargs["device"])
        if func is torch.Tensor.cuda:
            return args[0]
        if func is torch.Tensor.type and len(args) == 1 and not kwargs:
            name = func(*args)
            return name.replace("torch.", "torch.cuda.", 1) if not name.startswith("torch.cuda.") else name
        if func is torch.Tensor.to and len(args) > 1:
            a1 = args[1]
            if isinstance(a1, (str, int, torch.device)) and not isinstance(a1, bool):
                args = (args[0], _to_cpu_device(a1)) + tuple(args[2:])
        return func(*args, **kwargs)


def _noop():
    """A fresh no-op per patched name: dynamo's rule map rejects one object under several torch names."""
    return lambda *_a, **_k: None


class _NullStream:
    def __init__(self, *_a, **_k):
        pass

    def wait_stream(self, *_a, **_k):
        return None

    def synchronize(self):
        return None

    def record_event(self, *_a, **_k):
        return _NullEvent()

    def wait_event(self, *_a, **_k):
        return None


class _NullEvent:
    def __init__(self, *_a, **_k):
        pass

    def record(self, *_a, **_k):
        return None

    def synchronize(self):
        return None

    def wait(self, *_a, **_k):
        return None

    def query(self):
        return True

    def elapsed_time(self, *_a):
        return 0.0


def _patch_torch_cuda() -> None:
    c = torch.cuda
    c.current_device = lambda: torch.device("cpu")  # also right in autograd threads, where the mode is off
    c.set_device = _noop()
    c.synchronize = _noop()
    c.empty_cache = _noop()
    c.Stream = _NullStream
    c.Event = _NullEvent
    c.current_stream = lambda *a, **k: _NullStream()
    c.default_stream = lambda *a, **k: _NullStream()
    c.stream = lambda *a, **k: contextlib.nullcontext()
    c.memory_allocated = lambda *a, **k: 0
    c.max_memory_allocated = lambda *a, **k: 0
    c.memory_reserved = lambda *a, **k: 0
    c.max_memory_reserved = lambda *a, **k: 0
    c.reset_peak_memory_stats = _noop()
    # RNG: the "CUDA" generator is the CPU generator.
    c.get_rng_state = lambda *a, **k: torch.get_rng_state()
    c.set_rng_state = lambda state, *a, **k: torch.set_rng_state(state)
    c.manual_seed = lambda seed: torch.default_generator.manual_seed(int(seed))
    c.manual_seed_all = _noop()  # torch.manual_seed calls it after seeding the CPU generator
    c.random.get_rng_state = c.get_rng_state
    c.random.set_rng_state = c.set_rng_state


def _patch_megatron() -> None:
    from megatron.core.tensor_parallel import random as mrandom

    mrandom._get_cuda_rng_state = lambda *a, **k: torch.get_rng_state()
    mrandom._set_cuda_rng_state = lambda state, *a, **k: torch.set_rng_state(state)

    from megatron.core.transformer.moe import moe_utils

    if not hasattr(moe_utils, "te_general_gemm"):
        moe_utils.te_general_gemm = None

    from megatron.core.tensor_parallel import mappings

    orig_forward = mappings._AllToAll.forward

    def forward(ctx, group, input, output_split_sizes, input_split_sizes):
        def as_ints(s):
            return s.tolist() if isinstance(s, torch.Tensor) else ([int(x) for x in s] if s is not None else None)

        return orig_forward(ctx, group, input, as_ints(output_split_sizes), as_ints(input_split_sizes))

    mappings._AllToAll.forward = staticmethod(forward)


def cuda_available() -> bool:
    return torch.cuda.is_available()


def apply() -> bool:
    """Install the CPU layer once (only without CUDA). Returns True when it is active."""
    global _APPLIED, _MODE
    if _APPLIED:
        return True
    if cuda_available():
        return False
    _patch_torch_cuda()
    _patch_megatron()
    _MODE = _CudaToCpu()
    _MODE.__enter__()  # process-wide: Megatron creates CUDA tensors at build, step and save time
    _APPLIED = True
    return True


def active() -> bool:
    return _APPLIED


def suspended():
    """Context: this layer's TorchFunctionMode popped for the duration (the torch.cuda patches stay).
    A no-op when the mode is not the innermost one (GPU machines, or another mode pushed on top)."""
    n = torch._C._len_torch_function_stack()
    if n and _MODE is not None and torch._C._get_function_stack_at(n - 1) is _MODE:
        from torch.overrides import _pop_mode_temporarily

        return _pop_mode_temporarily()
    return contextlib.nullcontext()
