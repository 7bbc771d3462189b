"""CUDA events and streams on a machine without CUDA: stand-ins that ``fuzz`` puts in
``torch.cuda`` while it runs there.

Engines keep CUDA events and streams in their inputs (vLLM's multi-step input makes
``[torch.cuda.Event(blocking=True)] * 2`` as a field's default, on every rank), and on
a CPU-only build of torch ``torch.cuda.Event()`` raises ("Tried to instantiate dummy
base class Event"), so such a class could not even be built. Without a CUDA device,
``torch.cuda.Event``, ``torch.cuda.Stream``, ``current_stream``, ``default_stream``,
``stream`` and ``set_stream`` are replaced while a run lasts (in this process by
:func:`cuda_standins`, on the ranks for their lifetime by :func:`install`): an event
records, waits, synchronizes and is always complete; a stream waits on events and
streams, records events and is always idle; ``with torch.cuda.stream(s)`` makes ``s``
the current stream. The stand-ins subclass torch's own classes, so ``isinstance``
checks and annotations hold. With a CUDA device nothing is replaced.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch

#: torch's own classes, whatever ``torch.cuda`` holds now.
REAL_EVENT: type = torch.cuda.streams.Event
REAL_STREAM: type = torch.cuda.streams.Stream

CPU = torch.device("cpu")


class CPUEvent(REAL_EVENT):
    """A CUDA event without CUDA: it notes that it was recorded, and is always complete
    (no time passes between two events)."""

    def __new__(cls, *args: Any, **kwargs: Any) -> CPUEvent:
        return object.__new__(cls)

    def __init__(
        self, enable_timing: bool = False, blocking: bool = False, interprocess: bool = False
    ) -> None:
        self.enable_timing = enable_timing
        self.blocking = blocking
        self.interprocess = interprocess
        self.recorded = False

    @classmethod
    def from_ipc_handle(cls, device: Any, handle: Any) -> CPUEvent:
        return cls(interprocess=True)

    def record(self, stream: Any = None) -> None:
        self.recorded = True

    def wait(self, stream: Any = None) -> None:
        pass

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def elapsed_time(self, end_event: Any) -> float:
        if not (self.recorded and getattr(end_event, "recorded", False)):
            raise RuntimeError("both events must be recorded before elapsed_time()")
        return 0.0

    def ipc_handle(self) -> bytes:
        return b""

    @property
    def cuda_event(self) -> int:
        return 0

    @property
    def _as_parameter_(self) -> Any:
        return None

    def __reduce__(self) -> tuple[Any, ...]:
        return (CPUEvent, (self.enable_timing, self.blocking, self.interprocess))

    def __repr__(self) -> str:
        return "<torch.cuda.Event stand-in (no CUDA device)>"


class CPUStream(REAL_STREAM):
    """A CUDA stream without CUDA: every wait returns at once; it is always idle."""

    def __new__(cls, *args: Any, **kwargs: Any) -> CPUStream:
        return object.__new__(cls)

    def __init__(self, device: Any = None, priority: int = 0, **kwargs: Any) -> None:
        self.priority = priority

    @property
    def device(self) -> torch.device:
        return CPU

    @property
    def cuda_stream(self) -> int:
        return 0

    @property
    def stream_id(self) -> int:
        return 0

    @property
    def _as_parameter_(self) -> Any:
        return None

    def wait_event(self, event: Any) -> None:
        pass

    def wait_stream(self, stream: Any) -> None:
        pass

    def record_event(self, event: Any = None) -> Any:
        if event is None:
            event = CPUEvent()
        event.record(self)
        return event

    def query(self) -> bool:
        return True

    def synchronize(self) -> None:
        pass

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)

    def __reduce__(self) -> tuple[Any, ...]:
        return (CPUStream, (None, self.priority))

    def __repr__(self) -> str:
        return "<torch.cuda.Stream stand-in (no CUDA device)>"


_DEFAULT = CPUStream()
_current: list[CPUStream] = [_DEFAULT]


def current_stream(device: Any = None) -> CPUStream:
    return _current[-1]


def default_stream(device: Any = None) -> CPUStream:
    return _DEFAULT


def set_stream(stream: Any) -> None:
    if stream is not None:
        _current[-1] = stream


@contextlib.contextmanager
def stream(stream: Any) -> Iterator[None]:
    """``with torch.cuda.stream(s):`` -- ``s`` is the current stream inside."""
    if stream is None:
        yield
        return
    _current.append(stream)
    try:
        yield
    finally:
        _current.pop()


#: The names of ``torch.cuda`` replaced, with their stand-ins.
STANDINS: dict[str, Any] = {
    "Event": CPUEvent,
    "Stream": CPUStream,
    "current_stream": current_stream,
    "default_stream": default_stream,
    "set_stream": set_stream,
    "stream": stream,
}


def needed(device: str) -> bool:
    """The stand-ins are used: the run is on the CPU and there is no CUDA device."""
    return device == "cpu" and not torch.cuda.is_available()


def install() -> dict[str, Any]:
    """Put the stand-ins in ``torch.cuda``; returns what was there."""
    saved = {name: getattr(torch.cuda, name) for name in STANDINS}
    for name, standin in STANDINS.items():
        setattr(torch.cuda, name, standin)
    return saved


@contextlib.contextmanager
def cuda_standins(device: str) -> Iterator[None]:
    """The stand-ins in ``torch.cuda`` while the block runs, when :func:`needed`."""
    if not needed(device):
        yield
        return
    saved = install()
    try:
        yield
    finally:
        for name, value in saved.items():
            setattr(torch.cuda, name, value)


def is_cuda_event(tp: type) -> bool:
    return isinstance(tp, type) and issubclass(tp, REAL_EVENT)


def is_cuda_stream(tp: type) -> bool:
    return isinstance(tp, type) and issubclass(tp, REAL_STREAM)
