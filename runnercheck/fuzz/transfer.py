"""Handing a generated example to the driver rank, with its tensors placed on ``--device``.

Examples are generated on the CPU in the process that runs Hypothesis. They reach the
driver rank pickled; tensors travel as (storage bytes, dtype, offset, size, stride)
and are rebuilt with the same memory layout (views, strides, offsets, stride-0
expansions) on the rank's device.
"""

from __future__ import annotations

import io
import pickle
import threading
from typing import Any

import torch

_target = threading.local()


def _device() -> torch.device:
    return getattr(_target, "device", torch.device("cpu"))


def _rebuild(
    dtype: torch.dtype,
    data: bytes,
    offset: int,
    size: tuple[int, ...],
    stride: tuple[int, ...],
) -> torch.Tensor:
    storage = (
        torch.UntypedStorage.from_buffer(data, dtype=torch.uint8)
        if data
        else torch.UntypedStorage(0)
    )
    device = _device()
    if device.type != "cpu":
        storage = storage.to(device=device)
    return torch.empty(0, dtype=dtype, device=device).set_(storage, offset, size, stride)


class _Pickler(pickle.Pickler):
    def reducer_override(self, obj: Any) -> Any:
        if type(obj) is torch.Tensor:
            tensor = obj.detach()
            if tensor.device.type != "cpu":
                tensor = tensor.cpu()
            storage = tensor.untyped_storage()
            data = (
                torch.empty(0, dtype=torch.uint8).set_(storage).numpy().tobytes()
                if storage.nbytes()
                else b""
            )
            return _rebuild, (
                tensor.dtype,
                data,
                tensor.storage_offset(),
                tuple(tensor.size()),
                tuple(tensor.stride()),
            )
        return NotImplemented


def dumps(obj: Any) -> bytes:
    buffer = io.BytesIO()
    _Pickler(buffer, protocol=pickle.HIGHEST_PROTOCOL).dump(obj)
    return buffer.getvalue()


def loads(data: bytes, device: torch.device | str = "cpu") -> Any:
    """Unpickle, placing tensors on ``device``."""
    previous = getattr(_target, "device", None)
    _target.device = torch.device(device)
    try:
        return pickle.loads(data)
    finally:
        if previous is None:
            del _target.device
        else:
            _target.device = previous
