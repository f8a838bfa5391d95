"""One Distributed object (tuned-lens style) instead of rank checks scattered through the code.

    dist = Distributed.from_env()        # joins torchrun's process group when WORLD_SIZE > 1
    if dist.primary: write_table(...)
    mine = dist.shard(items)             # items r, r + W, r + 2W, ...
    dist.barrier(); dist.close()         # close() tears down only a group this object created

Importing this module does not import torch; from_env() does, and only when WORLD_SIZE > 1.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from typing import Any, TypeVar

from interp._util.errors import InputError

T = TypeVar("T")


def _env_int(name: str, default: int, minimum: int) -> int:
    """An integer torchrun variable, or one InputError naming it (set by hand to 'abc' or -1, say)."""
    text = os.environ.get(name)
    if text is None or text.strip() == "":
        return default
    try:
        value = int(text)
    except ValueError:
        value = None
    if value is None or value < minimum:
        raise InputError(f"{name}={text!r} is not an integer >= {minimum}", field=f"environment variable {name}",
                         fix=f"unset {name} (torchrun sets it) or give an integer >= {minimum}")
    return value


def check_env() -> tuple[int, int]:
    """(RANK, WORLD_SIZE), checked together before any rank writes a lock or a part: integers, 0 <= RANK <
    WORLD_SIZE, LOCAL_RANK an integer too."""
    rank, world = _env_int("RANK", 0, 0), _env_int("WORLD_SIZE", 1, 1)
    _env_int("LOCAL_RANK", 0, 0)
    _env_int("LOCAL_WORLD_SIZE", 1, 1)
    if rank >= world:
        raise InputError(f"RANK={rank} is not below WORLD_SIZE={world}",
                         field="environment variables RANK/WORLD_SIZE",
                         fix="ranks count 0 .. WORLD_SIZE-1; unset both outside torchrun")
    return rank, world


def env_rank() -> int:
    """RANK from the environment (torchrun sets it), 0 outside torchrun: cheap, no torch import; checked."""
    return check_env()[0]


def env_world_size() -> int:
    return check_env()[1]


def join_process_group(local_rank: int, cuda: bool) -> None:
    """Initialise the default process group (torchrun's env:// variables): nccl on GPU `local_rank`, told its
    device_id so that barriers need not guess the GPU from the global rank (torch warns that guessing can hang
    when ranks map to GPUs unevenly), or gloo on CPUs."""
    import torch
    import torch.distributed as tdist

    if cuda:
        gpu = torch.device("cuda", local_rank)
        torch.cuda.set_device(gpu)
        tdist.init_process_group("nccl", device_id=gpu)
    else:
        tdist.init_process_group("gloo")


@dataclass
class Distributed:
    """rank / world_size of this process, and whether a torch.distributed process group is live."""

    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    local_world_size: int = 1
    group: bool = False       # a torch.distributed process group is initialised
    created: bool = False     # ... and this object created it (so close() destroys it)

    @classmethod
    def from_env(cls, join: bool = True) -> Distributed:
        """The torchrun environment. join: initialise the process group when WORLD_SIZE > 1 and none is
        live (gloo on CPU, nccl on GPU, with the local GPU selected)."""
        world = env_world_size()
        local_rank = _env_int("LOCAL_RANK", 0, 0)
        local_world = _env_int("LOCAL_WORLD_SIZE", world, 1)
        if world == 1:  # no group to join; but one may be live (a 1-rank group: bench_gpu_scale's FSDP)
            tdist = sys.modules.get("torch.distributed")  # imported only if someone made a group: no torch import
            return cls(group=bool(tdist and tdist.is_available() and tdist.is_initialized()))
        import torch
        import torch.distributed as tdist

        created = False
        if join and not tdist.is_initialized():
            join_process_group(local_rank, cuda=torch.cuda.is_available())
            created = True
        group = tdist.is_available() and tdist.is_initialized()
        rank = tdist.get_rank() if group else env_rank()
        world = tdist.get_world_size() if group else world
        return cls(rank=rank, world_size=world, local_rank=local_rank, local_world_size=local_world,
                   group=group, created=created)

    @property
    def primary(self) -> bool:
        """Rank 0: the one process that writes shared files and prints."""
        return self.rank == 0

    def shard(self, items: list[T]) -> list[T]:
        """Rank r of W takes items r, r + W, r + 2W, ... (balanced when the items cost about the same)."""
        return shard(items, self.rank, self.world_size)

    def barrier(self) -> None:
        if self.group:
            import torch.distributed as tdist

            tdist.barrier()

    def all_reduce_sum(self, value: Any) -> Any:
        """Sum a tensor over ranks in place (identity without a group)."""
        if self.group:
            import torch.distributed as tdist

            tdist.all_reduce(value)
        return value

    def close(self) -> None:
        """Destroy the process group if this object created it."""
        if self.created:
            import torch.distributed as tdist

            if tdist.is_initialized():
                # Without a barrier a rank that finishes first tears its gloo connections down while a
                # peer is still in flight, and the peer's gloo thread aborts the process (std::terminate).
                tdist.barrier()
                tdist.destroy_process_group()
            self.created = self.group = False


def shard(items: list[T], rank: int, world_size: int) -> list[T]:
    """Rank r of W takes items r, r + W, r + 2W, ..."""
    if not 0 <= rank < world_size:
        raise ValueError(f"rank={rank} must be in [0, world_size={world_size})")
    return items[rank::world_size]
