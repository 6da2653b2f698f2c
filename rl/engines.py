"""Rollout engines that scale with the job: one vLLM engine per `rollout.tensor_parallel_size` consecutive ranks.

    lay = Layout.of(world, rank, engine_tp, mode)      # which ranks own an engine, and which groups each generates
    ex = Exchange(); picks = ex.bcast(picks); parts = ex.gather(mine)   # rank 0 <-> engine owners, gloo

The engine of ranks [e*tp, (e+1)*tp) is started by its first rank on those ranks' devices (on a GPU node: a DP
group's share of the node, colocated with the trainer; on the CPU: one engine per process). With
`rollout.engines: one` rank 0 owns the only engine (the loop before this module). Of a step's groups, engine e
generates groups e, e + E, e + 2E, ... (E engines); every request is seeded by its rollout's index in the step
(rl/trajectory.request_seed), and vLLM-CPU's seeded sampling does not depend on the batch, so the step's rollouts
are the same whatever E is. Rank 0 keeps the scheduler, advantages and metrics: it broadcasts the picks and
gathers the scored rollouts. The exchange has its own gloo group, so rollouts collected ahead in a thread
(rollout.max_staleness) never interleave with the update's collectives.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass


@dataclass(frozen=True)
class Layout:
    count: int  # engines in the job
    index: int  # this rank's engine (the engine whose ranks include this one)
    owner: bool  # this rank starts and drives that engine

    @staticmethod
    def of(world: int, rank: int, engine_tp: int, mode: str) -> "Layout":
        if mode == "one":
            return Layout(1, 0, rank == 0)
        return Layout(world // engine_tp, rank // engine_tp, rank % engine_tp == 0)

    def groups(self, n_groups: int) -> list[int]:
        """The step's group indices this rank's engine generates (none on ranks that do not own an engine)."""
        return list(range(self.index, n_groups, self.count)) if self.owner else []

    @staticmethod
    def devices(local_rank: int, engine_tp: int) -> list[int]:
        """The GPUs of an engine owned by local rank `local_rank`: its ranks' devices (consecutive ranks sit on
        consecutive devices of a node)."""
        return list(range(local_rank, local_rank + engine_tp))


class Exchange:
    """Rank 0 <-> every rank over a gloo group of its own (no-ops in one process)."""

    def __init__(self):
        import torch.distributed as dist

        self.on = dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1
        self.group = dist.new_group(backend="gloo") if self.on else None

    def bcast(self, obj):
        if not self.on:
            return obj
        import torch.distributed as dist

        box = [obj]
        dist.broadcast_object_list(box, src=0, group=self.group)
        return box[0]

    def gather(self, obj) -> list | None:
        """Every rank's `obj` on rank 0 in rank order; None elsewhere."""
        if not self.on:
            return [obj]
        import torch.distributed as dist

        out = [None] * dist.get_world_size() if dist.get_rank() == 0 else None
        dist.gather_object(obj, out, dst=0, group=self.group)
        return out


def pack(rolls: list) -> list:
    """Rollouts without their Domain objects (domains are not picklable: closures); unpack restores them by name."""
    return [dataclasses.replace(r, domain=None) for r in rolls]


def unpack(rolls: list) -> list:
    import domains

    for r in rolls:
        r.domain = domains.get(r.task.domain)
    return rolls
