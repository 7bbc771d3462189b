"""Snapshots and their field-by-field comparison; handing examples over (transfer)."""

from __future__ import annotations

import dataclasses
import pickle
from typing import Any

import pytest
import torch

from runnercheck.contract import is_driver_only_metadata
from runnercheck.fuzz import transfer
from runnercheck.fuzz.compare import differences
from runnercheck.fuzz.snapshot import Snapshotter, snapshot
from runnercheck.fuzz.strategies import LAYOUTS, make_tensor
from tests.fuzz.fixtures.good import AttentionMetadata, ModelInput


def _diff(a: Any, b: Any) -> list[str]:
    return [d.text() for d in differences(snapshot(a), snapshot(b))]


def test_equal_values_have_no_difference() -> None:
    value = {"x": torch.tensor([1.0, float("nan")]), "l": [1, (2, "a")], "s": {3, 4}}
    assert (
        _diff(value, {"x": torch.tensor([1.0, float("nan")]), "l": [1, (2, "a")], "s": {4, 3}})
        == []
    )
    assert _diff(float("nan"), float("nan")) == []


def test_tensor_aspects() -> None:
    t = torch.arange(4, dtype=torch.int64)
    assert _diff(t, t.to(torch.int32)) == ["dtype int64 -> int32"]
    assert _diff(t, t.reshape(2, 2)) == ["shape (4,) -> (2, 2)"]
    changed = t.clone()
    changed[2] = 9
    assert _diff(t, changed) == ["2 at [2] -> 9 (1 of 4 elements differ)"]
    assert _diff(torch.tensor([0.0]), torch.tensor([-0.0])) == [
        "0.0 at [0] -> -0.0 (1 of 1 elements differ)"
    ]


def test_device_type_is_compared() -> None:
    expected = Snapshotter(tensor_device="cuda").take(torch.zeros(2))
    assert [d.text() for d in differences(expected, snapshot(torch.zeros(2)))] == [
        "device cuda -> cpu"
    ]


def test_containers_and_types() -> None:
    assert _diff([1, 2], (1, 2)) == ["[1, 2] (list) -> (1, 2) (tuple)"]
    assert _diff({"a": 1}, {"b": 1}) == [
        "['a']: sent 1, received <missing key>",
        "['b']: keys <absent> -> 1",
    ]
    assert _diff([1, 2], [1]) == ["length 2 -> 1"]
    assert _diff(-0.0, 0.0) == ["-0.0 -> 0.0"]


def _expected(value: Any) -> Any:
    return Snapshotter(lambda cls, f: is_driver_only_metadata(f.metadata), with_defaults=True).take(
        value
    )


def test_lost_fields_and_driver_only() -> None:
    sent = ModelInput(input_tokens=torch.ones(2), seq_lens=[3, 4], virtual_engine=2)
    received = ModelInput(input_tokens=torch.ones(2))
    diffs = differences(_expected(sent), snapshot(received))
    assert [(d.path, d.lost) for d in diffs] == [("virtual_engine", True)]
    assert diffs[0].text() == "virtual_engine: sent 2, received 0 (the field's default)"


def test_nested_dataclass_paths() -> None:
    sent = ModelInput(attn_metadata=AttentionMetadata(1, torch.zeros(2, dtype=torch.int64)))
    got = ModelInput(attn_metadata=AttentionMetadata(1, torch.zeros(2, dtype=torch.int32)))
    assert [d.text() for d in differences(_expected(sent), snapshot(got))] == [
        "attn_metadata.slot_mapping: dtype int64 -> int32"
    ]


def test_missing_attribute_is_lost() -> None:
    @dataclasses.dataclass
    class Box:
        a: int = 0

    box = Box(1)
    before = snapshot(box)
    del box.__dict__["a"]
    assert [d.text() for d in differences(before, snapshot(box))] == ["a: 1 -> 0"]


@pytest.mark.parametrize("layout", LAYOUTS)
def test_transfer_keeps_layout_and_bytes(layout: str) -> None:
    original = {"t": make_tensor(torch.bfloat16, (3, 4), layout, "special", 5), "n": [1]}
    copy = transfer.loads(transfer.dumps(original))
    assert copy["t"].stride() == original["t"].stride()
    assert copy["t"].storage_offset() == original["t"].storage_offset()
    assert differences(snapshot(original), snapshot(copy)) == []


def test_counter_counts_bytes_per_step_without_a_group() -> None:
    import torch.distributed as dist

    from runnercheck.broadcast import CollectiveCounter

    with CollectiveCounter() as counter:
        with pytest.raises((RuntimeError, ValueError)):  # no process group: still counted
            dist.broadcast(torch.zeros(4, dtype=torch.float64), src=0)
        counter.step()
        with pytest.raises((RuntimeError, ValueError)):
            dist.broadcast_object_list([{"k": 1}], src=0)
        counter.step()
    assert counter.collectives_per_step == [1, 1]
    assert counter.bytes_per_step[0] == 32
    assert counter.bytes_per_step[1] > 0


def test_tensor_snapshots_travel_with_their_values() -> None:
    def flat_bytes(t: torch.Tensor) -> bytes:
        return bytes(t.reshape(-1).view(torch.uint8).tolist()) if t.numel() else b""

    for value in [
        torch.tensor(5),
        torch.zeros(0, 3),
        torch.tensor([True, False]),
        torch.randn(2, 3).to(torch.bfloat16),
        torch.tensor([float("nan"), -0.0, float("inf")]),
        torch.arange(12).reshape(3, 4).t(),
    ]:
        sent = snapshot(value)
        received = pickle.loads(pickle.dumps(sent))
        assert received == sent
        assert received.data is not None and sent.data is not None
        assert (received.data.dtype, received.data.shape) == (sent.data.dtype, sent.data.shape)
        assert flat_bytes(received.data) == flat_bytes(sent.data)
    changed = pickle.loads(pickle.dumps(snapshot(torch.tensor([1, 2, 3]))))
    [diff] = differences(snapshot(torch.tensor([1, 5, 3])), changed)
    assert diff.change() == "5 at [1] -> 2 (1 of 3 elements differ)"


class _Loose(str):
    """A key type whose equality is looser than its text."""

    def __eq__(self, other: object) -> bool:
        return isinstance(other, str)

    def __hash__(self) -> int:
        return 0


#: Pairs of values, and whether the comparison finds a difference between them.
_PAIRS: list[tuple[Any, Any, bool]] = [
    (-0.0, 0.0, True),
    (0.0, -0.0, True),
    (float("nan"), float("nan"), False),
    (complex(0.0, -0.0), complex(0.0, 0.0), True),
    (1, True, True),
    (1, 1.0, True),
    ("a", b"a", True),
    ({"a": 1, "b": 2}, {"b": 2, "a": 1}, False),
    ({"a": [1.0]}, {"a": [-1.0]}, True),
    ({"a": [0.0]}, {"a": [-0.0]}, True),
    ({1, 2}, {2, 1}, False),
    ({1.0}, {-1.0}, True),
    ({_Loose("a"): 1}, {_Loose("b"): 1}, True),
    ({_Loose("a")}, {_Loose("b")}, True),
    ([None, (1, "x")], [None, (1, "x")], False),
    ([None], [None, None], True),
    (torch.tensor([0.0]), torch.tensor([-0.0]), True),
    (torch.zeros(2, 2), torch.zeros(2, 2).t(), False),
    (torch.tensor([float("nan")]), torch.tensor([float("nan")]), False),
    (ModelInput(), ModelInput(), False),
    (ModelInput(input_tokens=torch.zeros(2)), ModelInput(), True),
    (ModelInput(virtual_engine=-0.0), ModelInput(virtual_engine=0.0), True),  # type: ignore[arg-type]
]


@pytest.mark.parametrize(("a", "b", "differ"), _PAIRS)
def test_equal_snapshots_never_differ(a: Any, b: Any, differ: bool) -> None:
    """Equality of snapshots is what the comparison skips: whatever ``==`` calls equal,
    the comparison would find nothing in (and differences are never equal)."""
    first, second = snapshot(a), snapshot(b)
    assert bool(differences(first, second)) == differ
    assert (first == second) == (second == first)
    if differ:
        assert first != second
    # the comparing process's side: a nested path compares the same way
    assert bool(differences(snapshot([{"k": a}]), snapshot([{"k": b}]))) == differ


def test_equality_is_strict_where_the_comparison_is() -> None:
    assert snapshot(-0.0) != snapshot(0.0)
    assert snapshot(float("nan")) == snapshot(float("nan"))
    assert snapshot({_Loose("a"): 1}) != snapshot({_Loose("b"): 1})
    assert snapshot({1.0, 2.0}) == snapshot({2.0, 1.0})
    # stricter than the comparison is allowed: the comparison then has the last word
    assert snapshot({"a": 1, "b": 2}) != snapshot({"b": 2, "a": 1})
    assert differences(snapshot({"a": 1, "b": 2}), snapshot({"b": 2, "a": 1})) == []
