"""Process groups: torch.distributed (gloo on CPU, nccl on GPU) + Megatron-Core model parallel state.

Works the same under `torchrun --nproc-per-node N` and as a plain single process (world size 1).
"""
from __future__ import annotations

import datetime
import os
import random

import numpy as np
import torch

from model import cpu_compat
from model.config import ModelConfig, ParallelConfig


# what torchrun (torchelastic) sets for its workers; a process started from one must not see them
DIST_VARS = ("RANK", "WORLD_SIZE", "LOCAL_RANK", "MASTER_ADDR", "MASTER_PORT", "LOCAL_WORLD_SIZE", "GROUP_RANK",
             "ROLE_RANK", "GROUP_WORLD_SIZE", "ROLE_WORLD_SIZE", "TORCHELASTIC_RUN_ID")


def single_process_env(env=None) -> dict:
    """`env` (default os.environ) without this process's torch.distributed world, for a fresh process that starts its
    own: TORCHELASTIC_USE_AGENT_STORE in particular makes it wait for torchrun's store forever, and an inherited
    MASTER_PORT is one this process's group already listens on."""
    env = os.environ if env is None else env
    return {k: v for k, v in env.items() if k not in DIST_VARS and not k.startswith("TORCHELASTIC_")}


def world_size() -> int:
    return int(os.environ.get("WORLD_SIZE", "1"))


def rank() -> int:
    return torch.distributed.get_rank() if torch.distributed.is_initialized() else int(os.environ.get("RANK", "0"))


def is_rank0() -> bool:
    return rank() == 0


def init(par: ParallelConfig, model_cfg: ModelConfig, seed: int, seq_length: int | None = None,
         timeout_min: int = 30) -> None:
    """Validate sizes, start torch.distributed, Megatron's parallel state and seeded RNGs."""
    from megatron.core import parallel_state, tensor_parallel

    ws = world_size()
    par.validate(model_cfg, ws, seq_length)  # before any group exists: errors name the numbers
    on_gpu = not cpu_compat.apply()
    if not torch.distributed.is_initialized():
        if "MASTER_ADDR" not in os.environ:  # a plain single process
            os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(_free_port()), RANK="0", WORLD_SIZE="1")
            os.environ.pop("TORCHELASTIC_USE_AGENT_STORE", None)  # else it waits for a torchrun store that is not there
        if on_gpu:
            torch.cuda.set_device(int(os.environ.get("LOCAL_RANK", "0")))
        torch.distributed.init_process_group("nccl" if on_gpu else "gloo",
                                             timeout=datetime.timedelta(minutes=timeout_min))
    if not parallel_state.model_parallel_is_initialized():
        parallel_state.initialize_model_parallel(
            tensor_model_parallel_size=par.tp, pipeline_model_parallel_size=par.pp,
            context_parallel_size=par.cp, expert_model_parallel_size=par.ep,
            expert_tensor_parallel_size=par.expert_tp, create_gloo_process_groups=True)
    seed_all(seed)
    tensor_parallel.model_parallel_cuda_manual_seed(seed)


def seed_all(seed: int) -> None:
    random.seed(seed)
    np.random.seed(seed % 2**32)
    torch.manual_seed(seed)


def destroy() -> None:
    from megatron.core import parallel_state

    if parallel_state.model_parallel_is_initialized():
        parallel_state.destroy_model_parallel()
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def _free_port() -> int:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]
