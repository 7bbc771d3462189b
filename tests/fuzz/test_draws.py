"""Fewer draws per example, the same minimal examples: each property of a fixed value
is a byte that shrinks on its own, and a class's fixed fields share one draw while
its other fields pick with a draw of their own."""

from __future__ import annotations

import dataclasses
import enum
import random
from collections import Counter
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, find, settings
from hypothesis import strategies as st

from runnercheck.fuzz.draws import BOOLS, BYTE_VALUES, Branch, Instances, one_of_values, value_of
from runnercheck.fuzz.strategies import ALL_DTYPES, StrategyBuilder, TensorOptions, tensors
from runnercheck.fuzz.tensors import TENSOR_BYTES, tensor_codes, tensor_from_bytes

SEEDS = range(4)


def _find(strategy: Any, condition: Any, seed: int) -> Any:
    return find(
        strategy,
        condition,
        # no deadline, as fuzz's own search: on a loaded machine a slow example would be a
        # second failure whose replay can be the example returned
        settings=settings(
            max_examples=2000,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
        random=random.Random(seed),
    )


@pytest.mark.parametrize("count", [1, 2, 3, 5, 10, 15, 256])
def test_a_byte_gives_each_value_first_at_the_value_itself_and_evenly(count: int) -> None:
    first: dict[int, int] = {}
    for byte in range(BYTE_VALUES):
        first.setdefault(value_of(byte, count), byte)
    assert first == {v: v for v in range(count)}
    spread = Counter(value_of(byte, count) for byte in range(BYTE_VALUES))
    assert max(spread.values()) - min(spread.values()) <= 1


@pytest.mark.parametrize("seed", SEEDS)
def test_a_tensor_shrinks_each_property_on_its_own(seed: int) -> None:
    found = _find(tensors(), lambda t: t.dtype == torch.float16 and t.dim() == 2, seed)
    assert (found.dtype, tuple(found.shape), found.is_contiguous()) == (torch.float16, (0, 0), True)
    # a predicate true of scattered dtypes still shrinks to the first of them
    nan = _find(tensors(), lambda t: t.is_floating_point() and bool(t.isnan().any()), seed)
    assert nan.dtype == next(d for d in ALL_DTYPES if d.is_floating_point)


def test_a_large_tensor_made_small_keeps_every_other_property() -> None:
    # the shrinker lowers one byte at a time: making a tensor small must not change its
    # dtype or number of dimensions, or a predicate on those stops it short
    options = TensorOptions()
    rng = random.Random(0)
    large = 0
    for _ in range(3000):
        code = bytearray(rng.randbytes(TENSOR_BYTES))
        tensor = tensor_from_bytes(bytes(code), ALL_DTYPES, options)
        if tensor.numel() < options.large:
            continue
        large += 1
        code[1] = 0
        small = tensor_from_bytes(bytes(code), ALL_DTYPES, options)
        assert small.numel() < options.large
        assert (small.dtype, small.dim()) == (tensor.dtype, tensor.dim())
    assert large > 100


class Mode(enum.Enum):
    PREFILL = 1
    DECODE = 2


@dataclasses.dataclass
class Inner:
    rows: torch.Tensor
    count: int


@dataclasses.dataclass
class Mixed:
    first: torch.Tensor | None = None
    flag: bool = False
    lengths: list[int] | None = None
    mode: Mode = Mode.PREFILL
    inner: Inner | None = None
    ids: tuple[int, ...] = ()
    last: torch.Tensor | None = None


def _shown(value: Any) -> Any:
    """A dataclass as its fields away from their defaults; a tensor as (dtype, shape,
    all zero)."""
    if isinstance(value, torch.Tensor):
        return (value.dtype, tuple(value.shape), not bool(value.bool().any()))
    if not dataclasses.is_dataclass(value):
        return value
    shown: dict[str, Any] = {}
    for f in dataclasses.fields(value):
        got = getattr(value, f.name)
        if isinstance(got, torch.Tensor) or got != f.default:
            shown[f.name] = _shown(got)
    return shown


def test_fixed_fields_share_one_draw_the_others_draw_their_own() -> None:
    tensor: Branch = ("fixed", tensor_codes(ALL_DTYPES, TensorOptions()))
    made = Instances(
        Mixed,
        {
            "first": (("value", None), ("value", None), tensor),
            "flag": (("value", False), ("fixed", BOOLS)),
            "lengths": (("value", None), ("draw", st.lists(st.integers()))),
            "mode": (("value", Mode.PREFILL), ("fixed", one_of_values(tuple(Mode)))),
            "inner": (("draw", st.none()),),
            "ids": (("call", tuple),),
            "last": (("value", None), tensor),
        },
    )
    # a pick byte where there are several branches, then the widest fixed branch
    assert [(f.name, f.offset) for f in made.fields] == [
        ("first", 0),
        ("flag", 1 + TENSOR_BYTES),
        ("lengths", None),
        ("mode", 1 + TENSOR_BYTES + 2),
        ("inner", None),
        ("ids", 1 + TENSOR_BYTES + 2 + 2),
        ("last", 1 + TENSOR_BYTES + 2 + 2),
    ]
    assert made.code is not None
    assert [f.name for f in made.fields if f.pick is not None] == ["lengths"]


@dataclasses.dataclass
class Attention:
    count: int
    slots: torch.Tensor
    tables: torch.Tensor | None = None
    lengths: list[int] | None = None


@dataclasses.dataclass
class Step:
    tokens: torch.Tensor | None = None
    seq_lens: list[int] | None = None
    query_lens: list[int] | None = None
    requests: set[int] | None = None
    attention: Attention | None = None
    extra: dict[str, int] | None = None
    engine: int = 0


@pytest.mark.slow
@pytest.mark.parametrize("seed", range(2))
def test_fields_shrink_to_their_defaults_around_the_ones_that_matter(seed: int) -> None:
    """With the picks of the fields that draw on their own in the fixed draw as well,
    lowering one left its field's draws to the next field, and these kept empty
    collections before the fields that matter (7 of 8 seeds)."""
    strategy = StrategyBuilder().for_class(Step)

    def tables_not_contiguous(s: Step) -> bool:
        tables = s.attention.tables if s.attention is not None else None
        return tables is not None and not tables.is_contiguous()

    assert _shown(_find(strategy, tables_not_contiguous, seed)) == {
        "attention": {
            "count": 0,
            "slots": (torch.int64, (), True),
            "tables": (torch.int64, (2,), True),
        }
    }
    found = _find(strategy, lambda s: bool(s.requests) and bool(s.extra), seed)
    assert _shown(found) == {"requests": {0}, "extra": {"": 0}}
