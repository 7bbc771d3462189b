"""Generated tensors: every engine dtype; 0-dim, empty, small and large-ish shapes;
contiguous, transposed, strided, offset and expanded layouts; zeros, random values and
special ones (NaN, infinities, -0.0, integer extremes). Each is made on the CPU from a
few bytes (:func:`tensor_from_bytes`), one draw (:mod:`runnercheck.fuzz.draws`)."""

from __future__ import annotations

import functools
import math
from collections.abc import Iterable
from dataclasses import dataclass

import torch
from hypothesis.strategies import SearchStrategy

from runnercheck.fuzz.draws import Fixed, value_of

#: Tensor dtypes generated, in shrinking order (the first is the "simplest").
ALL_DTYPES: tuple[torch.dtype, ...] = (
    torch.int64,
    torch.float32,
    torch.bool,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.uint8,
    torch.float16,
    torch.bfloat16,
    torch.float64,
)

#: Tensor layouts generated, in shrinking order.
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")

#: How tensors are filled, in shrinking order.
FILLS = ("zeros", "random", "special")


@dataclass(frozen=True)
class TensorOptions:
    #: dtypes of tensors in broadcast positions (fields, mapping values).
    dtypes: tuple[torch.dtype, ...] = ALL_DTYPES
    #: dtypes of tensors inside lists/tuples/sets (pickled with the metadata).
    pickled_dtypes: tuple[torch.dtype, ...] = ALL_DTYPES
    #: Largest size of a dimension of an ordinary tensor.
    max_side: int = 5
    #: Elements of a large-ish tensor (about one in sixteen tensors).
    large: int = 1 << 14


def make_tensor(
    dtype: torch.dtype, shape: tuple[int, ...], layout: str, fill: str, seed: int
) -> torch.Tensor:
    """A tensor of ``shape`` whose memory layout is ``layout`` (see :data:`LAYOUTS`)."""
    ndim = len(shape)
    if layout == "transposed" and ndim < 2:
        layout = "strided"
    if layout in ("strided", "expanded") and ndim == 0:
        layout = "offset"
    if layout == "transposed":
        base = _filled(dtype, (*shape[:-2], shape[-1], shape[-2]), fill, seed)
        return base.transpose(-1, -2)
    if layout == "strided":
        base = _filled(dtype, (*shape[:-1], shape[-1] * 2), fill, seed)
        return base[..., ::2]
    if layout == "offset":
        if ndim == 0:
            return _filled(dtype, (2,), fill, seed)[1]
        base = _filled(dtype, (shape[0] + 1, *shape[1:]), fill, seed)
        return base[1:]
    if layout == "expanded":
        base = _filled(dtype, (1, *shape[1:]), fill, seed)
        return base.expand(*shape)
    return _filled(dtype, shape, fill, seed)


def _filled(dtype: torch.dtype, shape: tuple[int, ...], fill: str, seed: int) -> torch.Tensor:
    if fill == "zeros":
        return torch.zeros(shape, dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    if fill == "special":
        specials = _specials(dtype)
        index = torch.randint(0, len(specials), (math.prod(shape),), generator=generator)
        # index_select, not specials[index]: advanced indexing costs 20x more here
        return specials.index_select(0, index).reshape(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=generator) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=generator, dtype=torch.int64).to(
        dtype
    )


@functools.cache
def _specials(dtype: torch.dtype) -> torch.Tensor:
    """The special values of ``dtype`` (shared: never changed in place)."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        values = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.0, info.max]
        values += [info.min, info.tiny]
        return torch.tensor(values, dtype=torch.float64).to(dtype)
    iinfo = torch.iinfo(dtype)
    ints = sorted({iinfo.min, iinfo.max, 0, 1, -1 if iinfo.min < 0 else 2})
    return torch.tensor(ints, dtype=torch.int64).to(dtype)


#: A tensor is drawn as this many bytes: its dtype, whether it is large, its number of
#: dimensions, three sides (the first also which large 2-d shape), its layout, its fill,
#: and four bytes of seed (big-endian; unused for zeros).
TENSOR_BYTES = 12


def tensor_from_bytes(
    code: bytes, dtypes: tuple[torch.dtype, ...], options: TensorOptions
) -> torch.Tensor:
    """The tensor :data:`TENSOR_BYTES` bytes describe. Each property is its own byte
    (:func:`~runnercheck.fuzz.draws.value_of`), so that each shrinks on its own towards
    the simplest: the dtype (in the order given), not large, the fewest dimensions and
    the smallest sides, contiguous, zeros, seed 0."""
    dtype = dtypes[value_of(code[0], len(dtypes))]
    ndim = value_of(code[2], 4)
    # one tensor in sixteen with a dimension is large-ish, with the same number of
    # dimensions as it would have otherwise: shrinking its "large" byte alone keeps
    # every property but its size
    if ndim and value_of(code[1], 16) == 15:
        n = options.large
        shape: tuple[int, ...] = {
            1: (n,),
            2: ((n // 64, 64), (64, n // 64))[value_of(code[3], 2)],
            3: (n // 256, 16, 16),
        }[ndim]
    else:
        sides = options.max_side + 1
        shape = tuple(value_of(byte, sides) for byte in code[3 : 3 + ndim])
    layout = LAYOUTS[value_of(code[6], len(LAYOUTS))]
    fill = FILLS[value_of(code[7], len(FILLS))]
    seed = int.from_bytes(code[8:12], "big") if fill != "zeros" else 0
    return make_tensor(dtype, shape, layout, fill, seed)


def tensor_codes(dtypes: Iterable[torch.dtype], options: TensorOptions) -> Fixed:
    """Tensors of ``dtypes``, as the bytes that describe them."""
    return Fixed(TENSOR_BYTES, functools.partial(_tensor_of, tuple(dtypes), options))


def _tensor_of(
    dtypes: tuple[torch.dtype, ...], options: TensorOptions, code: bytes
) -> torch.Tensor:
    return tensor_from_bytes(code, dtypes, options)


def tensors(
    dtypes: Iterable[torch.dtype] = ALL_DTYPES, options: TensorOptions | None = None
) -> SearchStrategy[torch.Tensor]:
    """Tensors of ``dtypes`` in many shapes, layouts and fills, each one draw of
    :data:`TENSOR_BYTES` bytes (:func:`tensor_from_bytes`)."""
    return tensor_codes(dtypes, options or TensorOptions()).strategy()
