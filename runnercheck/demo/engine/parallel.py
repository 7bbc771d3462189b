"""Tensor-parallel state: the process group, this rank's place in it, the all-reduce."""

import datetime
from typing import Optional

import torch
import torch.distributed

from runnercheck.broadcast import set_groups


def init_distributed_environment(
    world_size: int,
    rank: int,
    distributed_init_method: Optional[str],
    timeout_s: float = 60.0,
) -> None:
    """Join the gloo group (a no-op for one rank or when it is already joined)."""
    if world_size == 1 or torch.distributed.is_initialized():
        return
    if distributed_init_method is None:
        raise ValueError("distributed_init_method is required for more than one rank")
    torch.distributed.init_process_group(
        backend="gloo",
        init_method=distributed_init_method,
        world_size=world_size,
        rank=rank,
        timeout=datetime.timedelta(seconds=timeout_s),
    )
    # Metadata and CPU tensors both travel over the world group.
    set_groups(cpu=None, device=None)


def destroy_distributed_environment() -> None:
    if torch.distributed.is_initialized():
        torch.distributed.destroy_process_group()


def get_tensor_model_parallel_world_size() -> int:
    if not torch.distributed.is_initialized():
        return 1
    return torch.distributed.get_world_size()


def get_tensor_model_parallel_rank() -> int:
    if not torch.distributed.is_initialized():
        return 0
    return torch.distributed.get_rank()


def tensor_model_parallel_all_reduce(input_: torch.Tensor) -> torch.Tensor:
    """Sum ``input_`` over the tensor-parallel ranks, in place."""
    if get_tensor_model_parallel_world_size() == 1:
        return input_
    torch.distributed.all_reduce(input_)
    return input_
