"""The check that nothing changed since a snapshot, without taking a new one
(``Snapshotter.matches``, ``compare.changes``): it agrees with a new snapshot, and it
sees every way a tensor can be written, including those its version counter misses."""

from __future__ import annotations

import copy
import dataclasses
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from runnercheck.config import Config
from runnercheck.fuzz import FuzzOptions, Target, fuzz
from runnercheck.fuzz.compare import changes, differences
from runnercheck.fuzz.roundtrip import Job, receive, send
from runnercheck.fuzz.snapshot import Snapshotter, snapshot, unchanged
from runnercheck.fuzz.strategies import StrategyBuilder
from tests.fuzz.fixtures import defects
from tests.fuzz.fixtures.annotated import Color, Everything
from tests.fuzz.fixtures.good import ModelInput

_EXAMPLES = StrategyBuilder().for_class(Everything)


@settings(max_examples=150, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_EXAMPLES, _EXAMPLES, st.sampled_from(["same", "copy", "other"]))
def test_it_agrees_with_a_new_snapshot(a: Everything, b: Everything, how: str) -> None:
    """``unchanged(snapshot(a), x)`` is ``snapshot(a) == snapshot(x)``: for ``a``
    itself, for a deep copy (equal, no object shared) and for another example; also for
    the dict of its conversion, and on the comparing process's side (driver-only fields
    and defaults)."""
    other = {"same": a, "copy": copy.deepcopy(a), "other": b}[how]
    before = snapshot(a)
    assert unchanged(before, other) == (before == snapshot(other))
    if how == "same":  # (a copy may differ: an object seen by its repr shows its id)
        assert unchanged(before, other)
    as_dict = snapshot(a.as_broadcastable_tensor_dict())
    assert unchanged(as_dict, other.as_broadcastable_tensor_dict()) == (
        as_dict == snapshot(other.as_broadcastable_tensor_dict())
    )
    expected_side = Snapshotter(lambda cls, f: f.name == "seq_lens", with_defaults=True)
    expected = expected_side.take(a)
    assert expected_side.matches(expected, other) == (expected == expected_side.take(other))


@settings(max_examples=60, deadline=None, database=None, suppress_health_check=list(HealthCheck))
@given(_EXAMPLES, _EXAMPLES)
def test_a_value_that_differs_in_one_place_is_seen(a: Everything, b: Everything) -> None:
    """Each field taken from another example, containers one item longer or shorter:
    the walk agrees with a new snapshot on every one."""
    before = snapshot(a)
    variants = [
        dataclasses.replace(a, **{f.name: getattr(b, f.name)}) for f in dataclasses.fields(a)
    ]
    variants += [
        dataclasses.replace(a, ints=[*a.ints, 0]),
        dataclasses.replace(a, ints=a.ints[:-1]),
        dataclasses.replace(a, many=(*a.many, 0.5)),
        dataclasses.replace(a, table={**a.table, "one more": []}),
        dataclasses.replace(a, inner=dataclasses.replace(a.inner, tag="another tag")),
    ]
    for variant in variants:
        assert unchanged(before, variant) == (before == snapshot(variant))


_NAN = float("nan")


@pytest.mark.parametrize(
    ("a", "b"),
    [
        (0.0, -0.0),
        (_NAN, float("nan")),
        (complex(0.0, 0.0), complex(0.0, -0.0)),
        ([1.5, _NAN], [1.5, _NAN]),
        (1, True),
        (1, 1.0),
        ("a", b"a"),
        (Color.RED, "RED"),
        (torch.float32, torch.float64),
        ([1], (1,)),
        ({"a": 1, "b": 2}, {"b": 2, "a": 1}),
        ({1.0: "x"}, {-1.0: "x"}),
        ({(1, 2): "x"}, {(1, 2): "x"}),
        ({1.0, 2.0}, {2.0, 1.0}),
        (torch.zeros(2), torch.zeros(2, dtype=torch.float64)),
        (torch.zeros(2, 3), torch.zeros(3, 2)),
        (torch.zeros(2, 2), torch.zeros(2, 2).t()),
    ],
)
def test_values_are_as_strict_as_snapshots(a: Any, b: Any) -> None:
    """Floats by sign and NaN, types exactly, orders of keys, tensors' every aspect."""
    assert unchanged(snapshot(a), b) == (snapshot(a) == snapshot(b))
    assert unchanged(snapshot(a), a)


def _small() -> torch.Tensor:
    return torch.zeros(3)


def _large() -> torch.Tensor:  # more bytes than a digest is taken of: compared as bytes
    return torch.zeros(40, 25)


def _not_contiguous() -> torch.Tensor:
    return torch.zeros(4, 6).t()


def _bfloat16() -> torch.Tensor:  # a dtype numpy lacks
    return torch.zeros(5, dtype=torch.bfloat16)


def _first(t: torch.Tensor) -> tuple[int, ...]:
    return (0,) * t.dim()


_INTEGERS = {1: torch.uint8, 2: torch.int16, 4: torch.int32, 8: torch.int64}


def _flip_sign_through_numpy(t: torch.Tensor) -> None:
    """0.0 becomes -0.0: equal as a number, other bytes (and no version bump)."""
    bits = t.view(_INTEGERS[t.element_size()]).numpy()
    bits[_first(t)] ^= -(1 << (8 * t.element_size() - 1))


def _add_under_no_grad(t: torch.Tensor) -> None:
    with torch.no_grad():
        t[_first(t)] += 1


def _add_in_inference_mode(t: torch.Tensor) -> None:
    with torch.inference_mode():
        t[_first(t)] += 1


def _add_through_data(t: torch.Tensor) -> None:
    t.data[_first(t)] += 1


def _replace_storage(t: torch.Tensor) -> None:
    t.set_(t.clone() + 1)


#: Writers, with whether the tensor's version counter sees them.
WRITERS: list[tuple[Callable[[torch.Tensor], None], bool]] = [
    (_add_under_no_grad, True),
    (_add_in_inference_mode, True),
    (_add_through_data, False),
    (_flip_sign_through_numpy, False),
    (_replace_storage, True),
]
TENSORS = [_small, _large, _not_contiguous, _bfloat16]


@pytest.mark.parametrize("make", TENSORS, ids=[m.__name__.strip("_") for m in TENSORS])
@pytest.mark.parametrize(
    ("write", "versioned"), WRITERS, ids=[w.__name__.strip("_") for w, _ in WRITERS]
)
def test_every_write_to_a_tensor_is_seen(
    make: Callable[[], torch.Tensor], write: Callable[[torch.Tensor], None], versioned: bool
) -> None:
    tensor = make()
    holder = {"t": tensor, "in": [tensor]}
    before = snapshot(holder)
    assert unchanged(before, holder)
    version = tensor._version
    write(tensor)
    assert (tensor._version != version) == versioned  # why the bytes are read
    assert not unchanged(before, holder)
    found = changes(before, holder)
    assert found == differences(before, snapshot(holder))
    assert [d.path for d in found] == ["['t']", "['in'][0]"]


SHARED = torch.zeros(4)


@dataclass
class WritesThroughNumpy:
    """Its conversion writes into the tensor it holds through a numpy view."""

    t: torch.Tensor = field(default_factory=lambda: torch.zeros(300))

    def as_broadcastable_tensor_dict(self) -> dict[str, Any]:
        self.t.numpy()[7] += 1
        return {"t": self.t.clone()}


@dataclass
class RebuildsIntoShared:
    """Each rebuild writes into one tensor that every rebuilt object holds."""

    t: torch.Tensor

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict: dict[str, Any]) -> RebuildsIntoShared:
        SHARED.data[0] += 1
        return cls(SHARED)


def _job(cls: type) -> Job:
    return Job(1, cls, "as_broadcastable_tensor_dict", "from_broadcasted_tensor_dict")


def test_a_conversion_writing_the_sender_through_numpy_is_a_mutation() -> None:
    example = WritesThroughNumpy()
    original = snapshot(example)
    outcome, sent = send(_job(WritesThroughNumpy), example, lambda d: None)
    assert sent is not None and outcome.error is None
    assert [d.text() for d in outcome.mutation] == [
        "t: 0.0 at [7] -> 2.0 (1 of 300 elements differ)"
    ]
    assert outcome.nondeterministic  # so the second call was the last
    assert outcome.mutation == differences(original, snapshot(example))


def test_a_broadcast_writing_into_what_it_sends_is_a_mutation() -> None:
    """As a collective writing into a shared buffer would (no version bump)."""
    example = ModelInput(input_tokens=torch.zeros(2, dtype=torch.int64))

    def writes(tensor_dict: dict[str, Any]) -> None:
        tensor_dict["input_tokens"].numpy()[1] = 5

    outcome, _ = send(_job(ModelInput), example, writes)
    assert [d.text() for d in outcome.mutation] == [
        "input_tokens: 0 at [1] -> 5 (1 of 2 elements differ)"
    ]


def test_a_second_rebuild_writing_into_the_same_tensor_is_nondeterministic() -> None:
    """Both rebuilds hold the very same tensor; only its bytes tell them apart."""
    outcome = receive(_job(RebuildsIntoShared), {"t": torch.zeros(4)}, 1)
    assert outcome.error is None
    assert [d.text() for d in outcome.nondeterministic] == [
        f"t: {SHARED[0].item() - 1} at [0] -> {SHARED[0].item()} (1 of 4 elements differ)"
    ]


def test_a_write_the_version_counter_misses_is_caught_through_a_real_group(
    roundtrip_groups: Any,
) -> None:
    """Through two ranks over gloo, as a fuzz run meets it: shrunk to one nonzero token."""
    group = roundtrip_groups.get(2, "cpu", 10.0)
    cls = defects.ZeroesTokensThroughData
    report = fuzz(
        [Target(cls, f"{cls.__module__}:{cls.__qualname__}")],
        FuzzOptions(2, "cpu", 40, 3, 10.0),
        Config(),
        group,
    )
    result = report.results[0]
    mutation = [p for p in result.problems if p.code == "RC305"]
    assert [p.field for p in mutation] == ["input_tokens"]
    assert "changed the sender's object" in mutation[0].message
    assert result.shrunk
    assert result.example.startswith("ZeroesTokensThroughData(input_tokens=tensor(")
