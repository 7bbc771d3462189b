"""One example of a composed step through the broadcast: what the driver and each receiver do.

Driver (rank 0): one dict, built as a worker builds it: the first input's
``as_broadcastable_tensor_dict()``, ``update``\\ d with the next input's, and so on,
then the extras; the merge is repeated (the results must agree) and must not change
the inputs; ONE broadcast of that dict. Receivers: the step's receiving calls in its
order on the SAME received dict (each input's ``from_broadcasted_tensor_dict()``,
each extra popped at its position), then again on a copy (the two must agree). A
receiving call that raises stops the step there, as it would stop the worker. The
keys left in the dict after each call come back too, so that a key that one part
left behind and another part rejected can be named with both parts.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from runnercheck.fuzz.compare import Difference, changes
from runnercheck.fuzz.roundtrip import (
    DETERMINISM_CALLS,
    CustomJob,
    DriverOutcome,
    RankError,
    ReceiverOutcome,
    copy_structure,
    describe_exception,
    precheck,
    takes_backend,
)
from runnercheck.fuzz.snapshot import snapshot
from runnercheck.fuzz.steps import StepPart


@dataclass
class StepDriverOutcome(DriverOutcome):
    #: Each key of the merged dict -> the labels of the parts that put it there.
    producers: dict[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass
class StepReceiverOutcome(ReceiverOutcome):
    #: The part whose receiving call raised (-1: none did).
    failed_part: int = -1
    #: The dict's keys as received, then after each part's receiving call that returned.
    keys_seen: list[tuple[str, ...]] = field(default_factory=list)


@dataclass(frozen=True)
class StepJob(CustomJob):
    """What every rank needs to round-trip examples of one composed step. An example is
    a tuple with one value per part: an input instance, or an extra's value."""

    job_id: int
    parts: tuple[StepPart, ...]
    as_dict_method: str
    from_dict_method: str
    attn_backend: Any = None
    sys_path: tuple[str, ...] = ()

    # -- driver

    def merge(
        self, example: Sequence[Any], stage: list[str]
    ) -> tuple[dict[str, Any], dict[str, tuple[str, ...]]]:
        """The merged dict and who produced each key; ``stage[0]`` names the call under way."""
        merged: dict[str, Any] = {}
        producers: dict[str, tuple[str, ...]] = {}
        ordered = [(p, v) for p, v in zip(self.parts, example, strict=True) if not p.is_extra]
        ordered += [(p, v) for p, v in zip(self.parts, example, strict=True) if p.is_extra]
        for part, value in ordered:
            if part.is_extra:
                produced: dict[str, Any] = {part.key: value}
            else:
                stage[0] = f"{part.label}.{self.as_dict_method}"
                produced = getattr(value, self.as_dict_method)()
                if not isinstance(produced, dict):
                    raise TypeError(
                        f"{self.as_dict_method}() returned {type(produced).__name__}, not dict"
                    )
            stage[0] = "merge"
            merged.update(produced)
            for key in produced:
                producers[key] = (*producers.get(key, ()), part.label)
        return merged, producers

    def send(
        self, example: Any, broadcast: Callable[[dict[str, Any]], Any], rank: int
    ) -> tuple[DriverOutcome, dict[str, Any] | None]:
        outcome = StepDriverOutcome()
        inputs = [(p, v) for p, v in zip(self.parts, example, strict=True) if not p.is_extra]
        before = [snapshot(v) for _, v in inputs]
        stage = ["merge"]
        try:
            merged, outcome.producers = self.merge(example, stage)
            reference = snapshot(merged)
            for _ in range(DETERMINISM_CALLS):
                again, _ = self.merge(example, stage)
                outcome.nondeterministic = changes(reference, again)
                if outcome.nondeterministic:
                    break
            stage[0] = "merge"
            precheck(merged)
        except Exception as exc:
            outcome.error = describe_exception(exc, rank, stage[0])
            outcome.mutation = self._mutation(inputs, before)
            return outcome, None
        start = time.perf_counter()
        sent: dict[str, Any] | None = None
        try:
            broadcast(merged)
            sent = merged
        except Exception as exc:
            outcome.error = describe_exception(exc, rank, "broadcast", desync=True)
        outcome.broadcast_seconds = time.perf_counter() - start
        outcome.mutation = self._mutation(inputs, before)
        return outcome, sent

    @staticmethod
    def _mutation(inputs: list[tuple[StepPart, Any]], before: list[Any]) -> list[Difference]:
        found: list[Difference] = []
        for (part, value), snap in zip(inputs, before, strict=True):
            found.extend(changes(snap, value, part.label))
        return found

    # -- receivers

    def _rebuild(self, cls: type, tensor_dict: dict[str, Any]) -> Any:
        method = getattr(cls, self.from_dict_method)
        if self.attn_backend is not None and takes_backend(method):
            return method(tensor_dict, attn_backend=self.attn_backend)
        return method(tensor_dict)

    def consume(
        self, tensor_dict: dict[str, Any], rank: int
    ) -> tuple[list[Any], RankError | None, int, list[tuple[str, ...]]]:
        """The receiving calls in order on one dict: the values rebuilt, the error that
        stopped them (and which part raised it), the keys left after each call."""
        values: list[Any] = []
        seen = [tuple(tensor_dict)]
        for index, part in enumerate(self.parts):
            try:
                if part.cls is None:
                    stage = f"extracting extra {part.key!r}"
                    if part.key not in tensor_dict:
                        raise LookupError(f"key {part.key!r} is no longer in the received dict")
                    values.append(tensor_dict.pop(part.key))
                else:
                    stage = f"{part.label}.{self.from_dict_method}"
                    values.append(self._rebuild(part.cls, tensor_dict))
            except Exception as exc:
                return values, describe_exception(exc, rank, stage), index, seen
            seen.append(tuple(tensor_dict))
        return values, None, -1, seen

    def receive(self, tensor_dict: dict[str, Any], rank: int) -> ReceiverOutcome:
        outcome = StepReceiverOutcome(rank)
        start = time.perf_counter()
        try:
            spare = copy_structure(tensor_dict)
        except Exception as exc:
            outcome.error = describe_exception(exc, rank, "copying the received dict")
            return outcome
        values, error, outcome.failed_part, outcome.keys_seen = self.consume(tensor_dict, rank)
        try:
            outcome.rebuilt = snapshot(tuple(values))
        except Exception as exc:
            outcome.error = describe_exception(exc, rank, "snapshot")
            return outcome
        if error is not None:
            outcome.error = error
            return outcome
        again, error, _, _ = self.consume(spare, rank)
        if error is not None:  # raised the second time only: not deterministic either
            outcome.error = replace(error, stage=error.stage + " (second call)")
        else:
            outcome.nondeterministic = changes(outcome.rebuilt, tuple(again))
        outcome.seconds = time.perf_counter() - start
        return outcome
