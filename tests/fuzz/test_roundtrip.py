"""The driver's half of a round trip, without a group: the determinism check of the
conversion, also where its calls share objects."""

from __future__ import annotations

import pickle
import threading
from dataclasses import dataclass
from typing import Any

import pytest
import torch

from runnercheck.broadcast import split_tensor_dict
from runnercheck.fuzz.roundtrip import Job, precheck, same_objects, send, takes_backend

SHARED: list[int] = []
TENSOR = torch.zeros(3)


@dataclass
class Steady:
    x: int = 0

    def as_broadcastable_tensor_dict(self) -> dict[str, Any]:
        return {"x": self.x, "t": TENSOR, "ids": [1, "a", None], "nested": {"k": (TENSOR,)}}


@dataclass
class GrowsWhatItReturns:
    """Each call appends to the list that every call returns."""

    def as_broadcastable_tensor_dict(self) -> dict[str, Any]:
        SHARED.append(len(SHARED))
        return {"shared": SHARED}


@dataclass
class WritesTheTensorItReturns:
    def as_broadcastable_tensor_dict(self) -> dict[str, Any]:
        TENSOR.add_(1)
        return {"t": TENSOR}


def job(cls: type) -> Job:
    return Job(1, cls, "as_broadcastable_tensor_dict", "from_broadcasted_tensor_dict")


def drive(cls: type) -> Any:
    sent: list[dict[str, Any]] = []
    outcome, _ = send(job(cls), cls(), sent.append)
    return outcome, sent


def test_same_objects() -> None:
    t = torch.ones(2)
    assert same_objects({"a": t, "b": [1, "x"]}, {"a": t, "b": [1, "x"]})
    assert not same_objects({"a": t}, {"a": t.clone()})  # equal, but not the same tensor
    assert not same_objects({"a": 1, "b": 2}, {"b": 2, "a": 1})  # key order
    assert not same_objects({1: 0}, {True: 0})
    assert not same_objects([1], [True])
    assert not same_objects([float("0")], [float("0")])  # snapshots compare floats (-0.0, NaN)


def test_steady_conversion_is_deterministic() -> None:
    outcome, sent = drive(Steady)
    assert outcome.error is None
    assert outcome.nondeterministic == []
    assert len(sent) == 1


def test_later_calls_changing_what_the_first_returned_are_nondeterministic() -> None:
    for cls in (GrowsWhatItReturns, WritesTheTensorItReturns):
        outcome, _ = drive(cls)
        assert outcome.nondeterministic, cls.__name__


class _WithBackend:
    @classmethod
    def rebuild(cls, tensor_dict: dict[str, Any], attn_backend: Any = None) -> Any:
        return cls()


class _Sub(_WithBackend):
    pass


class _Plain:
    @classmethod
    def rebuild(cls, tensor_dict: dict[str, Any]) -> Any:
        return cls()


class _Unhashable:
    __hash__ = None  # type: ignore[assignment]

    def __call__(self, tensor_dict: dict[str, Any], attn_backend: Any = None) -> Any:
        return None


def test_takes_backend_asks_each_function_once_and_still_answers_for_each() -> None:
    """A receiver asks at every rebuild; the answer is decided once per function, and
    stays right for each method, each class, and callables that cannot be a key."""
    for _ in range(2):
        assert takes_backend(_WithBackend.rebuild)
        assert not takes_backend(_Plain.rebuild)
        assert takes_backend(_Sub.rebuild)
        assert takes_backend(_Unhashable())
        assert not takes_backend(len)
        assert not takes_backend(None)


def _refusal(check: Any, tensor_dict: dict[str, Any]) -> str:
    try:
        check(tensor_dict)
    except Exception as exc:
        return f"{type(exc).__name__}: {exc}"
    return ""


def _pickling_the_metadata(tensor_dict: dict[str, Any]) -> None:
    pickle.dumps(split_tensor_dict(tensor_dict)[0])


@pytest.mark.parametrize(
    "tensor_dict",
    [
        {"t": torch.zeros(2), "n": 1, "s": "x", "none": None, "f": 0.5, "b": b"x"},
        {"t": torch.zeros(2), "sampler": lambda: 0},
        {"inner": {"lock": threading.Lock(), "t": torch.ones(1)}},
        {"ok": [1, 2], "then": {"gen": (i for i in range(2))}},
        {"bad%key": 1},
        {3: "not a str key"},
    ],
    ids=["plain", "lambda", "nested-lock", "nested-generator", "separator", "int-key"],
)
def test_precheck_refuses_what_pickling_the_metadata_refuses(tensor_dict: dict[str, Any]) -> None:
    """The precheck pickles only what can fail to pickle; it refuses the same dicts with
    the same error as pickling the whole metadata, as the broadcast does."""
    assert _refusal(precheck, tensor_dict) == _refusal(_pickling_the_metadata, tensor_dict)
