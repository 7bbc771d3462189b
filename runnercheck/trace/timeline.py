"""A traced run as a timeline: the trace-event JSON that Perfetto and ``chrome://tracing``
open (the "Trace Event Format": an object with ``traceEvents`` and ``displayTimeUnit``).

Each rank of each world is one process track, named ``rank N``, with one thread (its
process's pid). On it:

* each engine step is a complete event (``ph: "X"``, category ``step``) named ``step N``,
  from the start of its first collective to the end of its last (what the recorder sees
  of a step: the step method's entry and return are not recorded);
* each logical broadcast (``broadcast_tensor_dict``) is a complete event (category
  ``broadcast``) over its parts;
* each collective is a complete event (category ``collective``; ``collective,broadcast``
  for a broadcast that stands alone) from its call to its return, or an instant event
  (``ph: "i"``, ``args.end_recorded`` false) when its end was not recorded: the run was
  stopped in it, or its process ended before the end was written. Its ``args`` hold its
  kind, op, logical broadcast, source site, method and bytes;
* the first divergence, a hang and the first step over the broadcast budget are instant
  events on each rank involved (category ``divergence``, ``hang``, ``budget``).

Times are ``time.monotonic_ns()`` of the traced processes (one clock for the machine),
in microseconds from the first recorded call, with nanosecond digits. A broadcast's span
holds its parts and a step's span holds its calls, so the events of a track nest.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from runnercheck.trace.records import BROADCAST_OPS, CollectiveRecord
from runnercheck.trace.report import TraceReport, WorldReport, step_figures


def _timed(records: Iterable[CollectiveRecord]) -> list[CollectiveRecord]:
    return [record for record in records if record.start_ns >= 0]


def _end(record: CollectiveRecord) -> int:
    return record.end_ns if record.end_ns >= record.start_ns else record.start_ns


class _Clock:
    def __init__(self, origin: int) -> None:
        self.origin = origin

    def us(self, ns: int) -> float:
        """Microseconds since the origin, to the nanosecond."""
        return round((ns - self.origin) / 1000, 3)

    def span(self, start: int, end: int) -> dict[str, Any]:
        return {"ts": self.us(start), "dur": round((end - start) / 1000, 3)}


def timeline(report: TraceReport) -> dict[str, Any]:
    """The run's trace-event JSON object (see the module's docstring)."""
    starts = [
        record.start_ns
        for world in report.worlds
        for records in world.records.values()
        for record in _timed(records)
    ]
    clock = _Clock(min(starts) if starts else 0)
    events: list[dict[str, Any]] = []
    tracks: dict[tuple[str, int], tuple[int, int]] = {}
    offset = 0
    several = len(report.worlds) > 1
    for world in report.worlds:
        for rank in sorted(world.records):
            pid = offset + rank
            tid = world.pids.get(rank, 0)
            tracks[(world.key, rank)] = (pid, tid)
            name = f"rank {rank}" + (f" ({world.key})" if several else "")
            events += _track_names(pid, tid, name, rank)
            events += _rank_events(world, rank, pid, tid, clock)
        offset += max(world.size, max(world.records, default=-1) + 1)
    events += _marks(report, tracks, clock)
    return {
        "traceEvents": events,
        "displayTimeUnit": "ms",
        "otherData": {
            "command": " ".join(report.command),
            "clock": "time.monotonic_ns",
            "origin_ns": clock.origin,
            "ok": report.ok,
            "worlds": [world.key for world in report.worlds],
        },
    }


def _track_names(pid: int, tid: int, name: str, rank: int) -> list[dict[str, Any]]:
    def meta(what: str, args: dict[str, Any]) -> dict[str, Any]:
        return {"name": what, "ph": "M", "pid": pid, "tid": tid, "args": args}

    return [
        meta("process_name", {"name": name}),
        meta("process_sort_index", {"sort_index": rank}),
        meta("thread_name", {"name": f"{name} (pid {tid})" if tid else name}),
    ]


def _rank_events(
    world: WorldReport, rank: int, pid: int, tid: int, clock: _Clock
) -> list[dict[str, Any]]:
    records = _timed(world.records[rank])
    events: list[dict[str, Any]] = []

    def complete(name: str, cat: str, start: int, end: int, args: dict[str, Any]) -> None:
        events.append(
            {"name": name, "cat": cat, "ph": "X", **clock.span(start, end)}
            | {"pid": pid, "tid": tid, "args": args}
        )

    figures = step_figures(records)
    steps: dict[int, list[CollectiveRecord]] = {}
    logical: dict[int, list[CollectiveRecord]] = {}
    for record in records:
        steps.setdefault(record.step, []).append(record)
        if record.logical >= 0:
            logical.setdefault(record.logical, []).append(record)
    for step, calls in steps.items():
        if step < 0:
            continue
        f = figures[step]
        args = {
            "step": step,
            "method": calls[0].step_method,
            "broadcasts": f.broadcasts,
            "collectives": f.collectives,
            "bytes": f.nbytes,
        }
        complete(f"step {step}", "step", calls[0].start_ns, max(map(_end, calls)), args)
    for index, parts in logical.items():
        first = parts[0]
        args = {
            "logical": index,
            "step": first.step,
            "kind": first.kind,
            "method": first.method,
            "site": first.site,
            "function": first.site_function,
            "parts": len(parts),
            "bytes": sum(part.nbytes for part in parts),
        }
        complete(first.logical_name, "broadcast", first.start_ns, max(map(_end, parts)), args)
    for record in records:
        alone = record.logical < 0 and record.op in BROADCAST_OPS
        cat = "collective,broadcast" if alone else "collective"
        args = _collective_args(record)
        if record.end_ns >= record.start_ns:
            complete(record.op, cat, record.start_ns, record.end_ns, args)
        else:
            args["end_recorded"] = False
            events.append(
                {
                    "name": record.op,
                    "cat": cat,
                    "ph": "i",
                    "s": "t",
                    "ts": clock.us(record.start_ns),
                }
                | {"pid": pid, "tid": tid, "args": args}
            )
    return events


def _collective_args(record: CollectiveRecord) -> dict[str, Any]:
    return {
        "index": record.index,
        "step": record.step,
        "kind": record.kind,
        "op": record.op,
        "logical": record.logical_name,
        "logical_index": record.logical,
        "site": record.site,
        "function": record.site_function,
        "method": record.method,
        "step_method": record.step_method,
        "bytes": record.nbytes,
        "group": record.group,
        "peer": record.peer,
        "shape": record.shape,
    }


def _marks(
    report: TraceReport, tracks: dict[tuple[str, int], tuple[int, int]], clock: _Clock
) -> list[dict[str, Any]]:
    """Instant events for the divergence, the hang and the budget, on each rank named."""
    events: list[dict[str, Any]] = []

    def mark(world: str, rank: int, at: CollectiveRecord | None, cat: str, args: Any) -> None:
        """At the start of ``at``; a rank that never reached it: after its last call."""
        track = tracks.get((world, rank))
        if track is None:
            return
        if at is not None and at.start_ns >= 0:
            name, ts = f"{cat}: {at.op} at {at.site}", clock.us(at.start_ns)
        else:
            last = _last_timed(report, world, rank)
            if last is None:
                name, ts = f"{cat}: no call", 0.0
            else:
                name, ts = f"{cat}: after {last.op} at {last.site}", clock.us(_end(last))
        events.append(
            {"name": name, "cat": cat, "ph": "i", "s": "t", "ts": ts}
            | {"pid": track[0], "tid": track[1], "args": args}
        )

    divergence = report.divergence
    if divergence is not None:
        lines = divergence.lines()
        for rank, call in sorted(divergence.calls.items()):
            args = {"position": divergence.position, "group": divergence.group, "report": lines}
            mark(divergence.world, rank, call, "divergence", args)
    hang = report.hang
    if hang is not None:
        world = next((w for w in report.worlds if w.key == hang.world), None)
        for rank, text in sorted(hang.ranks.items()):
            compared = [] if world is None else _compared(world.records.get(rank, []))
            at = compared[hang.position] if len(compared) > hang.position else None
            args = {"position": hang.position, "rank": text, "report": hang.lines()}
            mark(hang.world, rank, at, "hang", args)
    budget = report.budget
    if budget is not None:
        mark(budget.world, budget.rank, budget.extra, "budget", {"report": budget.lines()})
    return events


def _compared(records: list[CollectiveRecord]) -> list[CollectiveRecord]:
    """A rank's sequence in its world's group, as the monitor compares it."""
    return [record for record in records if not record.point_to_point and not record.group]


def _last_timed(report: TraceReport, world: str, rank: int) -> CollectiveRecord | None:
    for each in report.worlds:
        if each.key == world:
            timed = _timed(each.records.get(rank, []))
            return timed[-1] if timed else None
    return None


def dumps(trace: dict[str, Any]) -> str:
    """The JSON text, one event a line."""
    head = {key: value for key, value in trace.items() if key != "traceEvents"}
    events = ",\n".join(json.dumps(event, separators=(",", ":")) for event in trace["traceEvents"])
    rest = json.dumps(head, separators=(",", ":"))[1:]
    return '{"traceEvents":[\n' + events + "\n]" + ("," + rest if rest != "}" else "}") + "\n"
