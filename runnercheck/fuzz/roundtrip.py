"""One example through the broadcast: what the driver rank and each receiving rank do.

Driver (rank 0): snapshot the input, call ``as_broadcastable_tensor_dict()`` twice
(the two results must agree), broadcast the first, snapshot the input again (it must
not have changed). Receivers: rebuild with ``from_broadcasted_tensor_dict()`` twice,
from two copies of the received dict (the two must agree), and snapshot the result.
Everything that raises is caught and described; nothing here compares against the
original, which only the process that generated it holds.
"""

from __future__ import annotations

import functools
import inspect
import os
import pickle
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from runnercheck.broadcast import TensorMetadata, split_tensor_dict
from runnercheck.fuzz.compare import Difference, changes, differences
from runnercheck.fuzz.snapshot import Snap, snapshot

#: Key of the control messages the driver sends through the same broadcast.
CONTROL_KEY = "__runnercheck_control__"

_INTERNAL = (
    os.sep + os.path.join("runnercheck", "fuzz") + os.sep,
    os.sep + os.path.join("runnercheck", "broadcast.py"),
    os.sep + os.path.join("torch", ""),
    os.sep + os.path.join("multiprocessing", ""),
)


@dataclass(frozen=True)
class Job:
    """What every rank needs to round-trip examples of one class."""

    job_id: int
    cls: type
    as_dict_method: str
    from_dict_method: str
    attn_backend: Any = None
    sys_path: tuple[str, ...] = ()


class CustomJob:
    """A job that does its own driver and receiving halves (a composed step:
    :mod:`runnercheck.fuzz.step_roundtrip`); :func:`send` and :func:`receive` hand it over."""

    def send(
        self, example: Any, broadcast: Callable[[dict[str, Any]], Any], rank: int
    ) -> tuple[DriverOutcome, dict[str, Any] | None]:
        raise NotImplementedError

    def receive(self, tensor_dict: dict[str, Any], rank: int) -> ReceiverOutcome:
        raise NotImplementedError


@dataclass(frozen=True)
class RankError:
    rank: int
    stage: str
    type: str
    message: str
    location: str = ""
    #: The group can no longer be used (ranks disagree on what comes next).
    desync: bool = False

    def text(self) -> str:
        where = f" at {self.location}" if self.location else ""
        return f"{self.type}: {self.message}{where}"


@dataclass
class ReceiverOutcome:
    rank: int
    error: RankError | None = None
    rebuilt: Snap | None = None
    #: Differences between two rebuilds from the same received dict.
    nondeterministic: list[Difference] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class DriverOutcome:
    error: RankError | None = None
    #: Differences between two calls of the conversion on the same input.
    nondeterministic: list[Difference] = field(default_factory=list)
    #: How the sender's object changed during conversion and broadcast.
    mutation: list[Difference] = field(default_factory=list)
    broadcast_seconds: float = 0.0
    receivers: list[ReceiverOutcome] = field(default_factory=list)
    #: Ranks that did not answer in time, with what rank 0 saw.
    lost: str = ""
    #: Something went out: receivers are answering.
    sent: bool = False


def describe_exception(
    exc: BaseException, rank: int, stage: str, desync: bool = False
) -> RankError:
    message = str(exc).strip().splitlines()[0] if str(exc).strip() else ""
    if isinstance(exc, RecursionError):
        message = "maximum recursion depth exceeded"
    return RankError(rank, stage, type(exc).__name__, message[:300], _location(exc), desync)


def _location(exc: BaseException) -> str:
    frames = traceback.extract_tb(exc.__traceback__)
    user = [f for f in frames if not any(part in f.filename for part in _INTERNAL)]
    if not user:
        return ""
    if isinstance(exc, RecursionError):
        # the frame that repeats
        counts: dict[tuple[str, int, str], int] = {}
        for f in user:
            key = (f.filename, f.lineno or 0, f.name)
            counts[key] = counts.get(key, 0) + 1
        filename, lineno, name = max(counts, key=lambda k: counts[k])
    else:
        last = user[-1]
        filename, lineno, name = last.filename, last.lineno or 0, last.name
    return f"{_short(filename)}:{lineno} in {name}"


def _short(filename: str) -> str:
    try:
        relative = os.path.relpath(filename)
    except ValueError:
        return filename
    return relative if not relative.startswith("..") else filename


def copy_structure(value: Any) -> Any:
    """A copy of a received dict that shares nothing mutable with it."""
    if isinstance(value, dict):
        return {k: copy_structure(v) for k, v in value.items()}
    if isinstance(value, list):
        return [copy_structure(v) for v in value]
    if isinstance(value, torch.Tensor):
        return value.clone()
    return value


def precheck(tensor_dict: dict[str, Any]) -> None:
    """Raise where the broadcast would raise before its first collective (bad keys,
    unpicklable metadata), so a failure there leaves the group usable. The entries
    pickled are those that can fail to: not a tensor's metadata nor a plain value,
    though each still in its own (key, value) pair, as deep as in the metadata."""
    metadata, _ = split_tensor_dict(tensor_dict)
    others = [entry for entry in metadata if type(entry[1]) not in _ALWAYS_PICKLED]
    if others:
        pickle.dumps(others)


#: What the metadata holds that always pickles: a tensor's metadata, plain values.
_ALWAYS_PICKLED = frozenset({TensorMetadata, type(None), bool, int, float, str, bytes})


#: Extra calls of the driver's conversion compared with the first; a conversion that
#: picks between two orders at random escapes all of them with probability 1/2**6.
DETERMINISM_CALLS = 6


_IMMUTABLE = (type(None), bool, int, str, bytes)


def same_objects(first: Any, again: Any) -> bool:
    """Whether two results of a conversion hold the very same objects (or equal
    integers, strings, bytes, None) in the same containers, keys in the same order.
    Their snapshots are then equal as they stand; the first one's snapshot, taken
    before the later calls, is compared with it once they are done."""
    if first is again:
        return True
    kind = type(first)
    if kind is not type(again):
        return False
    if kind is dict:
        if len(first) != len(again):
            return False
        for (key, value), (other_key, other) in zip(first.items(), again.items(), strict=True):
            if key is not other_key and (type(key) is not type(other_key) or not key == other_key):
                return False
            if value is not other and not same_objects(value, other):
                return False
        return True
    if kind is list or kind is tuple:
        return len(first) == len(again) and all(map(same_objects, first, again))
    return kind in _IMMUTABLE and first == again


def send(
    job: Job | CustomJob,
    example: Any,
    broadcast: Callable[[dict[str, Any]], Any],
    rank: int = 0,
) -> tuple[DriverOutcome, dict[str, Any] | None]:
    """The driver's half; returns the outcome and the dict it broadcast (None if it
    broadcast nothing, so receivers are not waiting for a result)."""
    if isinstance(job, CustomJob):
        return job.send(example, broadcast, rank)
    outcome = DriverOutcome()
    before = snapshot(example)
    sent: dict[str, Any] | None = None
    try:
        convert = getattr(example, job.as_dict_method)
        first = convert()
        if not isinstance(first, dict):
            raise TypeError(f"{job.as_dict_method}() returned {type(first).__name__}, not dict")
        reference = snapshot(first)
        for _ in range(DETERMINISM_CALLS):  # a random order can repeat by chance: call again
            again = convert()
            if isinstance(again, dict) and not same_objects(first, again):
                outcome.nondeterministic = differences(reference, snapshot(again))
                if outcome.nondeterministic:
                    break
        if not outcome.nondeterministic:  # what the calls share, changed by the later ones
            outcome.nondeterministic = changes(reference, first)
        precheck(first)
    except Exception as exc:
        outcome.error = describe_exception(exc, rank, job.as_dict_method)
        outcome.mutation = changes(before, example)
        return outcome, None
    start = time.perf_counter()
    try:
        broadcast(first)
        sent = first
    except Exception as exc:
        outcome.error = describe_exception(exc, rank, "broadcast", desync=True)
    outcome.broadcast_seconds = time.perf_counter() - start
    outcome.mutation = changes(before, example)
    return outcome, sent


def takes_backend(method: Any) -> bool:
    """Whether ``method`` takes an ``attn_backend`` argument (decided once per function:
    a receiver asks at every rebuild, and reading a signature costs more than the rest
    of a small rebuild)."""
    function = getattr(method, "__func__", method)
    try:
        return _takes_backend(function)
    except TypeError:  # unhashable
        return _reads_backend(function)


@functools.lru_cache(maxsize=256)
def _takes_backend(function: Any) -> bool:
    return _reads_backend(function)


def _reads_backend(function: Any) -> bool:
    try:
        return "attn_backend" in inspect.signature(function).parameters
    except (TypeError, ValueError):
        return False


def _rebuild(job: Job, tensor_dict: dict[str, Any]) -> Any:
    method = getattr(job.cls, job.from_dict_method)
    if job.attn_backend is not None and takes_backend(method):
        return method(tensor_dict, attn_backend=job.attn_backend)
    return method(tensor_dict)


def receive(job: Job | CustomJob, tensor_dict: dict[str, Any], rank: int) -> ReceiverOutcome:
    """A receiver's half, given the dict it received."""
    if isinstance(job, CustomJob):
        return job.receive(tensor_dict, rank)
    outcome = ReceiverOutcome(rank)
    start = time.perf_counter()
    try:
        spare = copy_structure(tensor_dict)
        first = _rebuild(job, tensor_dict)
    except Exception as exc:
        outcome.error = describe_exception(exc, rank, job.from_dict_method)
        return outcome
    try:
        outcome.rebuilt = snapshot(first)
    except Exception as exc:
        outcome.error = describe_exception(exc, rank, "snapshot")
        return outcome
    try:
        second = _rebuild(job, spare)
        outcome.nondeterministic = changes(outcome.rebuilt, second)
    except Exception as exc:  # raised the second time only: not deterministic either
        outcome.error = describe_exception(exc, rank, job.from_dict_method + " (second call)")
    outcome.seconds = time.perf_counter() - start
    return outcome
