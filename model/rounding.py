"""Stochastic rounding of bf16 weights from the optimizer's float32 main copies (`optim.bf16_rounding`).

With train.dtype=bfloat16 Megatron keeps float32 main params, steps those, and copies them into the bf16 model after
every step, rounding to nearest. An update smaller than half a bf16 step of its weight (2^-9 of its size) then
leaves the weight the forward sees where it was, and the same weights stay stuck step after step. Fine-tuning at a
small learning rate lives there: SmolLM2's SFT at lr 2e-5 (weights ~0.1, bf16 steps ~5e-4) ended 20 steps at val
loss 0.717 in bf16 against 0.426 in float32, although its first-step gradients agree with float32's (cosine
0.9995) and its float32-trained weights rounded to bf16 score 0.442. Rounding up with probability equal to the
remainder's share of the step makes each bf16 weight equal its main copy in expectation, so updates accumulate
in what the forward sees: the same run ended at train/val loss 0.192/0.434, float32's 0.191/0.426 (README).

The noise of a copy is drawn from generators seeded by (train.seed, optimizer step, tensor- and pipeline-parallel
rank, tensor): a resumed run repeats an uninterrupted one, and the data-parallel replicas of a parameter (which
step the same main copy) round it alike. Expert-parallel ranks hold different experts under the same local names
and draw the same noise for them, which keeps each rounding unbiased. A run publishes the bf16 weights it trained
and evaluated: the last step's stochastic rounding, whose error is sqrt(2) times a rounding to nearest.
"""
from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import torch


def stochastic_bf16_(dst: torch.Tensor, src: torch.Tensor, gen: torch.Generator) -> None:
    """dst (bf16) <- src (float32) rounded up or down at random, E[dst] = src (no NaN/inf handling: weights).

    A bf16 value is the top 16 bits of a float32; adding uniform noise to the 16 bits below before cutting them
    rounds the magnitude up with probability (remainder / step). Sign and magnitude are separate in IEEE floats,
    so the same works for negative values."""
    bits = src.contiguous().view(torch.int32)
    noise = torch.randint(0, 1 << 16, bits.shape, dtype=torch.int32, generator=gen, device=bits.device)
    dst.copy_(noise.add_(bits).bitwise_and_(-65536).view(torch.float32))  # exact in bf16: the low 16 bits are 0


def _float16_optimizers(optimizer) -> list:
    from megatron.core.optimizer.optimizer import Float16OptimizerWithFloat16Params

    return [o for o in getattr(optimizer, "chained_optimizers", [optimizer])
            if isinstance(o, Float16OptimizerWithFloat16Params)]


def _seed(*key: int) -> int:
    return hash(key) & (2**63 - 1)  # a tuple of ints hashes the same in every process (no PYTHONHASHSEED)


def install(optimizer, seed: int, step_of, parallel_rank: tuple[int, int] = (0, 0)) -> int:
    """Make the bf16 optimizers among `optimizer` (chained or not) copy main -> model params with stochastic
    rounding; `step_of()` returns the optimizer step being taken (the scheduler's count, restored on resume).
    Returns how many optimizers were switched (0 for float32 params, which need no copy).

    Each tensor draws from its own generator, seeded by (run, step, layout rank, optimizer, tensor), so the result
    does not depend on the order or the thread that rounds it. On the CPU torch's generator is single-threaded
    (~4 ns a number): tensors are rounded on a thread per core (135M weights: 0.95 -> 0.3 s on 2 cores)."""
    opts = _float16_optimizers(optimizer)
    threads = max(1, min(torch.get_num_threads(), 8))
    pool = ThreadPoolExecutor(threads, thread_name_prefix="bf16-round") if opts else None
    for k, o in enumerate(opts):
        @torch.no_grad()
        def copy(o=o, k=k):
            model_data, main_data = o._get_model_and_main_params_data_float16()
            step = int(step_of())

            def one(i: int) -> None:
                src = main_data[i]
                gen = torch.Generator(device=src.device).manual_seed(_seed(seed, step, *parallel_rank, k, i))
                stochastic_bf16_(model_data[i], src, gen)

            if main_data and main_data[0].device.type == "cpu":
                list(pool.map(one, range(len(main_data))))
            else:
                for i in range(len(main_data)):
                    one(i)

        o._copy_main_params_to_model_params = copy
    return len(opts)
