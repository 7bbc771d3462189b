"""Every tensor dtype the engine uses, in every layout, through a real broadcast.

One rank per process: ``python -m tests.gpu.dtype_ranks MODE RANK WORLD DEVICE STORE OUT``.

* ``gloo`` (world size 2): rank 0 sends :func:`cases` with the reference
  ``broadcast_tensor_dict``; rank 1 rebuilds them and compares. On ``cuda`` both ranks
  share the one GPU and the CUDA tensors cross through host memory (NCCL refuses two
  ranks on one device).
* ``nccl`` (world size 1, ``cuda`` only): NCCL has no other rank to send to, so each
  tensor of the reference split is broadcast in place (NCCL takes the dtype and leaves
  the source intact) and all-gathered into a fresh buffer allocated from the split's
  metadata (NCCL's kernels carry the bytes); the dict is rebuilt from those buffers.

Each rank writes JSON to OUT: ``problems`` (one line per difference in dtype, shape,
device type or bytes), ``compared`` (tensors compared) and ``carried``/``refused``
(dtypes the transport took or rejected when probed one by one).
"""

from __future__ import annotations

import json
import sys
from typing import Any

import torch
import torch.distributed as dist

#: The engine's tensor dtypes; fp8 where this torch has them.
ENGINE_DTYPES: tuple[torch.dtype, ...] = tuple(
    dtype
    for dtype in (
        torch.float32,
        torch.float16,
        torch.bfloat16,
        torch.int32,
        torch.int64,
        torch.bool,
        getattr(torch, "float8_e4m3fn", None),
        getattr(torch, "float8_e5m2", None),
    )
    if dtype is not None
)
FP8 = tuple(d for d in ENGINE_DTYPES if "float8" in str(d))
#: 0-dim, empty, and three non-contiguous views (transposed, strided, offset).
LAYOUTS = ("0-dim", "empty", "contiguous", "transposed", "strided", "offset")


def dtype_name(dtype: torch.dtype) -> str:
    return str(dtype).removeprefix("torch.")


def _base(dtype: torch.dtype, seed: int) -> torch.Tensor:
    generator = torch.Generator().manual_seed(seed)
    if dtype == torch.bool:
        return torch.randint(0, 2, (4, 6), generator=generator).bool()
    if not dtype.is_floating_point:
        return torch.randint(-(2**20), 2**20, (4, 6), generator=generator).to(dtype)
    return (torch.randn(4, 6, generator=generator) * 4).to(dtype)


def make_case(dtype: torch.dtype, layout: str, device: str, seed: int) -> torch.Tensor:
    """A tensor drawn on the CPU (the same on every rank), moved to ``device``, then
    viewed there: the views are non-contiguous on the device itself."""
    base = _base(dtype, seed).to(device)
    if layout == "0-dim":
        return base[1, 2].clone()
    if layout == "empty":
        return base[:0]
    if layout == "transposed":
        return base.t()
    if layout == "strided":
        return base[:, ::2]
    if layout == "offset":
        return base[1:, 1:]
    return base


def cases(dtypes: tuple[torch.dtype, ...], device: str) -> dict[str, Any]:
    """A step-like dict: one tensor per dtype and layout, nested one level as the merged
    dict's attention fields are, beside plain values."""
    tensors = {
        f"{dtype_name(dtype)}-{layout}": make_case(dtype, layout, device, seed)
        for seed, (dtype, layout) in enumerate((d, lay) for d in dtypes for lay in LAYOUTS)
    }
    return {"num_seq_groups": 3, "virtual_engine": 0, "tensors": tensors, "note": "step"}


def _bytes(tensor: torch.Tensor) -> torch.Tensor:
    return tensor.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)


def compare(expected: Any, actual: Any, path: str = "") -> tuple[list[str], int]:
    """Differences (dtype, shape, device type, bytes, keys, values) and tensors compared."""
    if isinstance(expected, dict):
        if not isinstance(actual, dict):
            return [f"{path}: dict -> {type(actual).__name__}"], 0
        if set(expected) != set(actual):
            return [f"{path}: keys {sorted(expected)} -> {sorted(actual)}"], 0
        problems: list[str] = []
        count = 0
        for key in expected:
            more, n = compare(expected[key], actual[key], f"{path}.{key}" if path else key)
            problems += more
            count += n
        return problems, count
    if isinstance(expected, torch.Tensor):
        if not isinstance(actual, torch.Tensor):
            return [f"{path}: Tensor -> {type(actual).__name__}"], 1
        for aspect in ("dtype", "shape"):
            if getattr(expected, aspect) != getattr(actual, aspect):
                return [
                    f"{path}: {aspect} {getattr(expected, aspect)} -> {getattr(actual, aspect)}"
                ], 1
        if expected.device.type != actual.device.type:
            return [f"{path}: device {expected.device.type} -> {actual.device.type}"], 1
        if not torch.equal(_bytes(expected), _bytes(actual)):
            return [f"{path}: values differ"], 1
        return [], 1
    if expected != actual or type(expected) is not type(actual):
        return [f"{path}: {expected!r} -> {actual!r}"], 0
    return [], 0


def probe(dtypes: tuple[torch.dtype, ...], device: str) -> tuple[list[str], list[str]]:
    """Broadcast one element of each dtype on its own: (carried, refused). Every rank
    refuses the same dtypes before sending anything, so the group stays in step."""
    carried, refused = [], []
    for dtype in dtypes:
        try:
            dist.broadcast(torch.zeros(1, dtype=dtype, device=device), src=0)
        except (RuntimeError, TypeError, ValueError):
            refused.append(dtype_name(dtype))
            continue
        carried.append(dtype_name(dtype))
    return carried, refused


def run_gloo(rank: int, device: str) -> dict[str, Any]:
    from runnercheck.broadcast import broadcast_tensor_dict, set_groups

    set_groups(cpu=None, device=None)  # metadata and tensors over the world group (gloo)
    carried, refused = probe(ENGINE_DTYPES, device)
    sendable = tuple(d for d in ENGINE_DTYPES if dtype_name(d) in carried)
    expected = cases(sendable, device)
    received = broadcast_tensor_dict(expected if rank == 0 else None, src=0)
    problems, compared = compare(expected, received) if rank > 0 else ([], 0)
    return {"carried": carried, "refused": refused, "problems": problems, "compared": compared}


def _rebuild(metadata: list[tuple[str, Any]], tensors: list[torch.Tensor]) -> dict[str, Any]:
    from runnercheck.broadcast import SEPARATOR, TensorMetadata

    result: dict[str, Any] = {}
    arrived = iter(tensors)
    for key, value in metadata:
        *parents, last = key.split(SEPARATOR)
        node = result
        for part in parents:
            node = node.setdefault(part, {})
        node[last] = next(arrived) if isinstance(value, TensorMetadata) else value
    return result


def run_nccl(device: str) -> dict[str, Any]:
    from runnercheck.broadcast import TensorMetadata, split_tensor_dict

    carried, refused = probe(ENGINE_DTYPES, device)
    sendable = tuple(d for d in ENGINE_DTYPES if dtype_name(d) in carried)
    expected = cases(sendable, device)
    metadata, tensors = split_tensor_dict(expected)
    problems: list[str] = []
    received = []
    described = [(key, meta) for key, meta in metadata if isinstance(meta, TensorMetadata)]
    for (key, meta), tensor in zip(described, tensors, strict=True):
        sent = tensor.contiguous()
        before = _bytes(sent).clone()
        buffer = torch.empty(meta.size, dtype=meta.dtype, device=device)
        if sent.numel() > 0:
            dist.broadcast(sent, src=0)
            if not torch.equal(before, _bytes(sent)):
                problems.append(f"{key}: the in-place broadcast changed the source")
            dist.all_gather_into_tensor(buffer.view(-1), sent.reshape(-1))
        received.append(buffer)
    torch.cuda.synchronize()
    more, compared = compare(expected, _rebuild(metadata, received))
    return {
        "carried": carried,
        "refused": refused,
        "problems": problems + more,
        "compared": compared,
    }


def main(argv: list[str]) -> int:
    mode, rank_text, world_text, device, store, out = argv
    rank, world = int(rank_text), int(world_text)
    if device == "cuda":
        torch.cuda.set_device(0)
    backend = "nccl" if mode == "nccl" else "gloo"
    dist.init_process_group(backend, init_method=f"file://{store}", rank=rank, world_size=world)
    try:
        result = run_nccl(device) if mode == "nccl" else run_gloo(rank, device)
        result.update(rank=rank, backend=backend, torch=torch.__version__)
        if device == "cuda":
            result["gpu"] = torch.cuda.get_device_name(0)
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(result, handle)
    finally:
        dist.destroy_process_group()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
