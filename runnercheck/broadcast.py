"""A reference ``broadcast_tensor_dict`` with vLLM's semantics, and a collective counter.

:func:`broadcast_tensor_dict` does what vLLM's ``GroupCoordinator.broadcast_tensor_dict``
(0.5.1+) does: the source rank splits the dict into metadata (tensors replaced by
their device type, dtype and size; nested dicts flattened with ``%``) and a list of
tensors; the metadata goes through ``broadcast_object_list`` on the CPU (gloo) group,
then every non-empty tensor is broadcast on its own, CPU tensors over the CPU group
and CUDA tensors over the device group (NCCL). Receivers allocate empty tensors from
the metadata and rebuild the nested dict.

:class:`CollectiveCounter` counts, around any code, the step-metadata broadcasts and
the underlying ``torch.distributed`` collectives with their payload bytes.
"""

from __future__ import annotations

import pickle
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any, NamedTuple

import torch
import torch.distributed as dist

SEPARATOR = "%"


class TensorMetadata(NamedTuple):
    device: str
    dtype: torch.dtype
    size: torch.Size


def split_tensor_dict(
    tensor_dict: dict[str, Any], prefix: str = ""
) -> tuple[list[tuple[str, Any]], list[torch.Tensor]]:
    """Metadata (tensors replaced by :class:`TensorMetadata`) and the tensors, in order."""
    metadata: list[tuple[str, Any]] = []
    tensors: list[torch.Tensor] = []
    for key, value in tensor_dict.items():
        if not isinstance(key, str) or SEPARATOR in key:
            raise ValueError(f"broadcast dict key {key!r} must be a str without {SEPARATOR!r}")
        if isinstance(value, torch.Tensor):
            metadata.append(
                (prefix + key, TensorMetadata(value.device.type, value.dtype, value.size()))
            )
            tensors.append(value)
        elif isinstance(value, dict):
            if not value:
                metadata.append((prefix + key, value))
            inner_meta, inner_tensors = split_tensor_dict(value, prefix + key + SEPARATOR)
            metadata.extend(inner_meta)
            tensors.extend(inner_tensors)
        else:
            metadata.append((prefix + key, value))
    return metadata, tensors


def _set_nested(target: dict[str, Any], flat_key: str, value: Any) -> None:
    *parents, last = flat_key.split(SEPARATOR)
    node = target
    for part in parents:
        node = node.setdefault(part, {})
    node[last] = value


@dataclass
class Groups:
    """The process groups a broadcast uses: CPU tensors and metadata, device tensors."""

    cpu: Any = None
    device: Any = None


_groups = Groups()


def set_groups(cpu: Any = None, device: Any = None) -> None:
    """Use these groups (default: the world group) for later broadcasts."""
    _groups.cpu = cpu
    _groups.device = device


def _device_for(device_type: str) -> torch.device:
    if device_type == "cuda":
        return torch.device("cuda", torch.cuda.current_device())
    return torch.device(device_type)


def broadcast_tensor_dict(
    tensor_dict: dict[str, Any] | None = None,
    src: int = 0,
    group: Any = None,
    metadata_group: Any = None,
) -> dict[str, Any] | None:
    """Broadcast ``tensor_dict`` from ``src``; every other rank gets a rebuilt copy.

    Returns ``tensor_dict`` unchanged without a process group or with one rank."""
    _notify_broadcast()
    if not dist.is_initialized() or dist.get_world_size() == 1:
        return tensor_dict
    group = group if group is not None else _groups.device
    metadata_group = metadata_group if metadata_group is not None else _groups.cpu
    if dist.get_rank() == src:
        if not isinstance(tensor_dict, dict):
            raise TypeError(f"expecting a dict to broadcast, got {type(tensor_dict).__name__}")
        metadata, tensors = split_tensor_dict(tensor_dict)
        dist.broadcast_object_list([metadata], src=src, group=metadata_group)
        handles = []
        for tensor in tensors:
            if tensor.numel() == 0:
                continue
            # gloo would send a non-contiguous tensor's raw memory (wrong values) and NCCL
            # refuses it; receivers allocate contiguous tensors, so send a contiguous copy.
            tensor = tensor.contiguous()
            tensor_group = metadata_group if tensor.is_cpu else group
            handles.append(dist.broadcast(tensor, src=src, group=tensor_group, async_op=True))
        for handle in handles:
            handle.wait()
        return tensor_dict
    received: list[Any] = [None]
    dist.broadcast_object_list(received, src=src, group=metadata_group)
    result: dict[str, Any] = {}
    handles = []
    for key, value in received[0]:
        if isinstance(value, TensorMetadata):
            tensor = torch.empty(value.size, dtype=value.dtype, device=_device_for(value.device))
            if tensor.numel() > 0:
                tensor_group = metadata_group if tensor.is_cpu else group
                handles.append(dist.broadcast(tensor, src=src, group=tensor_group, async_op=True))
            _set_nested(result, key, tensor)
        else:
            _set_nested(result, key, value)
    for handle in handles:
        handle.wait()
    return result


# --------------------------------------------------------------------- counting

#: torch.distributed functions the counter wraps, with the argument holding the payload.
COUNTED_COLLECTIVES = (
    "broadcast",
    "broadcast_object_list",
    "all_reduce",
    "all_gather",
    "all_gather_into_tensor",
    "all_gather_object",
    "reduce_scatter",
    "reduce_scatter_tensor",
    "gather",
    "scatter",
    "send",
    "recv",
    "barrier",
)


def _payload_bytes(args: tuple[Any, ...], kwargs: dict[str, Any]) -> int:
    """Bytes a collective moves from this rank: tensors' sizes; for object collectives
    (``broadcast_object_list``, ...) the pickled size of what this rank sends."""
    first = args[0] if args else next(iter(kwargs.values()), None)
    if isinstance(first, torch.Tensor):
        return first.numel() * first.element_size()
    if isinstance(first, (list, tuple)):
        tensors = sum(t.numel() * t.element_size() for t in first if isinstance(t, torch.Tensor))
        objects = [o for o in first if o is not None and not isinstance(o, torch.Tensor)]
        if objects:
            try:
                tensors += len(pickle.dumps(objects))
            except Exception:  # the collective itself will report it
                pass
        return tensors
    if first is not None and not isinstance(first, (int, str)):
        try:
            return len(pickle.dumps(first))
        except Exception:
            return 0
    return 0


_active_counters: list[CollectiveCounter] = []


def _notify_broadcast() -> None:
    for counter in _active_counters:
        counter._count_broadcast()


@dataclass
class CollectiveCounter:
    """Counts step-metadata broadcasts and ``torch.distributed`` collectives.

    Use as a context manager; call :meth:`step` at each step boundary to get
    per-step figures::

        with CollectiveCounter() as counter:
            for _ in range(steps):
                worker.execute_model(...)
                counter.step()
        counter.broadcasts_per_step  # e.g. [2, 2, 2]

    Broadcasts counted: every call of this module's :func:`broadcast_tensor_dict`
    (however it was imported), of vLLM's ``GroupCoordinator.broadcast_tensor_dict``
    when vLLM is imported, and of ``extra_targets`` given as ``(owner, attribute)``.
    Collectives counted: the ``torch.distributed`` functions in
    :data:`COUNTED_COLLECTIVES` when called as ``torch.distributed.NAME``.
    """

    extra_targets: list[tuple[Any, str]] = field(default_factory=list)
    broadcasts: int = 0
    collectives: dict[str, int] = field(default_factory=dict)
    bytes: int = 0
    broadcasts_per_step: list[int] = field(default_factory=list)
    collectives_per_step: list[int] = field(default_factory=list)
    bytes_per_step: list[int] = field(default_factory=list)
    _step_broadcasts: int = 0
    _step_collectives: int = 0
    _step_bytes: int = 0
    _patches: list[tuple[Any, str, Any]] = field(default_factory=list)

    def _count_broadcast(self) -> None:
        self.broadcasts += 1
        self._step_broadcasts += 1

    def _broadcast_targets(self) -> list[tuple[Any, str]]:
        import sys

        targets = list(self.extra_targets)
        vllm_state = sys.modules.get("vllm.distributed.parallel_state")
        coordinator = getattr(vllm_state, "GroupCoordinator", None)
        if coordinator is not None and hasattr(coordinator, "broadcast_tensor_dict"):
            targets.append((coordinator, "broadcast_tensor_dict"))
        return targets

    def _wrap_broadcast(self, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self._count_broadcast()
            return original(*args, **kwargs)

        return counted

    def _wrap_collective(self, name: str, original: Any) -> Any:
        def counted(*args: Any, **kwargs: Any) -> Any:
            self.collectives[name] = self.collectives.get(name, 0) + 1
            self._step_collectives += 1
            size = _payload_bytes(args, kwargs)
            self.bytes += size
            self._step_bytes += size
            return original(*args, **kwargs)

        return counted

    def _patch(self, owner: Any, attribute: str, replacement: Any) -> None:
        self._patches.append((owner, attribute, getattr(owner, attribute)))
        setattr(owner, attribute, replacement)

    def __enter__(self) -> CollectiveCounter:
        for owner, attribute in self._broadcast_targets():
            self._patch(owner, attribute, self._wrap_broadcast(getattr(owner, attribute)))
        for name in COUNTED_COLLECTIVES:
            if hasattr(dist, name):
                self._patch(dist, name, self._wrap_collective(name, getattr(dist, name)))
        _active_counters.append(self)
        return self

    def __exit__(self, *exc: object) -> None:
        _active_counters.remove(self)
        while self._patches:
            owner, attribute, original = self._patches.pop()
            setattr(owner, attribute, original)

    def step(self) -> None:
        """Close the current step's counts."""
        self.broadcasts_per_step.append(self._step_broadcasts)
        self.collectives_per_step.append(self._step_collectives)
        self.bytes_per_step.append(self._step_bytes)
        self._step_broadcasts = 0
        self._step_collectives = 0
        self._step_bytes = 0


@contextmanager
def counting(*extra_targets: tuple[Any, str]) -> Iterator[CollectiveCounter]:
    """``with counting() as c:`` (shorthand for :class:`CollectiveCounter`)."""
    with CollectiveCounter(extra_targets=list(extra_targets)) as counter:
        yield counter
