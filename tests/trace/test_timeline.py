"""``runnercheck trace --timeline``: the demo engine's runs at tp 2 as trace-event files.

The files are checked against the Trace Event Format's field rules (the JSON object
format read by Perfetto and ``chrome://tracing``): required keys per phase and their
types, microsecond times that are numbers >= 0, integer ``pid``/``tid``, known phases,
metadata events with their ``args``; complete events of one thread nest. Then what they
must show: one track per rank, each step a span holding its broadcasts (legacy 2 per
step, merged 1), collectives carrying kind, op, source and bytes, and the divergence of
the divergent engine marked on both ranks.
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections import defaultdict
from pathlib import Path
from typing import Any

import pytest

from runnercheck.trace.records import (
    CollectiveRecord,
    EndLine,
    decode,
    encode_collective,
)

ROOT = Path(__file__).resolve().parents[2]
DIVERGENT = Path(__file__).resolve().parent / "fixtures" / "divergent_engine"
HANG = "tests/trace/fixtures/torchrun_hang.py"
BUDGET_SITE = "runnercheck/demo/engine/legacy/model_runner.py:210"

#: Every phase of the format (duration, complete, instant, counter, async, flow, sample,
#: object, metadata, memory dump, mark, context events).
PHASES = frozenset("BEXiICbnestfPNODMVvRc()")
METADATA = {
    "process_name": ("name", str),
    "process_labels": ("labels", str),
    "process_sort_index": ("sort_index", int),
    "thread_name": ("name", str),
    "thread_sort_index": ("sort_index", int),
}


def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0


def _integer(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def format_errors(trace: Any) -> list[str]:
    """What in ``trace`` breaks the Trace Event Format's rules (JSON object format)."""
    if not isinstance(trace, dict) or not isinstance(trace.get("traceEvents"), list):
        return ["not an object with a traceEvents array"]
    errors: list[str] = []
    if trace.get("displayTimeUnit", "ms") not in ("ms", "ns"):
        errors.append(f"displayTimeUnit {trace['displayTimeUnit']!r}: not ms or ns")
    if "otherData" in trace and not isinstance(trace["otherData"], dict):
        errors.append("otherData: not an object")
    open_slices: dict[tuple[int, int], int] = defaultdict(int)
    for n, event in enumerate(trace["traceEvents"]):

        def bad(what: str, n: int = n) -> None:
            errors.append(f"event {n}: {what}")

        if not isinstance(event, dict):
            bad("not an object")
            continue
        ph = event.get("ph")
        if ph not in PHASES:
            bad(f"ph {ph!r} is not a known phase")
            continue
        if not isinstance(event.get("name"), str):
            bad("name: not a string")
        if "cat" in event and not isinstance(event["cat"], str):
            bad("cat: not a string")
        for key in ("pid", "tid"):
            if not _integer(event.get(key)):
                bad(f"{key}: not an integer")
        if "args" in event and not isinstance(event["args"], dict):
            bad("args: not an object")
        if ph == "M":
            rule = METADATA.get(event.get("name", ""))
            if rule is None:
                bad(f"metadata name {event.get('name')!r} unknown")
            elif not isinstance(event.get("args", {}).get(rule[0]), rule[1]):
                bad(f"metadata {event['name']}: args.{rule[0]} is not {rule[1].__name__}")
            continue
        if not _number(event.get("ts")):
            bad(f"ts {event.get('ts')!r}: not a number >= 0")
        if ph == "X" and not _number(event.get("dur")):
            bad(f"dur {event.get('dur')!r}: not a number >= 0")
        if ph in "iI" and event.get("s", "t") not in ("g", "p", "t"):
            bad(f"s {event.get('s')!r}: not g, p or t")
        if ph in "BE":
            open_slices[(event["pid"], event["tid"])] += 1 if ph == "B" else -1
    errors += [f"track {track}: B and E do not match" for track, n in open_slices.items() if n]
    return errors or nesting_errors(trace["traceEvents"])


def _ns(value: float) -> int:
    return round(value * 1000)


def nesting_errors(events: list[dict[str, Any]]) -> list[str]:
    """Complete events of one thread either nest or follow each other (to the ns)."""
    by_track: dict[tuple[int, int], list[tuple[int, int, str]]] = defaultdict(list)
    for event in events:
        if event.get("ph") == "X":
            start = _ns(event["ts"])
            by_track[(event["pid"], event["tid"])].append(
                (start, start + _ns(event["dur"]), event["name"])
            )
    errors = []
    for track, spans in by_track.items():
        stack: list[tuple[int, int, str]] = []
        for start, end, name in sorted(spans, key=lambda s: (s[0], -s[1])):
            while stack and stack[-1][1] <= start:
                stack.pop()
            if stack and end > stack[-1][1]:
                errors.append(f"track {track}: {name} at {start} overlaps {stack[-1][2]}")
            stack.append((start, end, name))
    return errors


def test_the_validator_finds_what_breaks_the_format() -> None:
    good = {"name": "x", "ph": "X", "ts": 1.5, "dur": 2, "pid": 0, "tid": 1, "args": {}}
    assert format_errors({"traceEvents": [good], "displayTimeUnit": "ms"}) == []
    broken = [
        {**good, "ph": "Z"},
        {**good, "ts": -1},
        {**good, "dur": "2"},
        {**good, "pid": "0"},
        {**good, "tid": 1.0},
        {"name": "thread_name", "ph": "M", "pid": 0, "tid": 1, "args": {}},
        {"name": "x", "ph": "i", "s": "q", "ts": 0, "pid": 0, "tid": 1},
        {"name": "x", "ph": "B", "ts": 0, "pid": 0, "tid": 2},
        {**good, "ts": 2.5},  # starts inside the first, ends after it
    ]
    for event in broken:
        assert format_errors({"traceEvents": [good, event]}), event
    assert format_errors({"traceEvents": [good], "displayTimeUnit": "s"})
    assert format_errors([good])


def traced(
    tmp_path: Path, engine: list[str], options: tuple[str, ...] = ("--deadline", "60")
) -> tuple[subprocess.CompletedProcess[str], Any]:
    """``runnercheck trace --timeline`` of a command (the demo engine at tp 2 by default);
    its result and the file."""
    timeline = tmp_path / "timeline.json"
    command = [sys.executable, "-m", "runnercheck", "trace", *options]
    command += ["--timeline", str(timeline), "--", sys.executable]
    if engine[:1] != ["-m"]:
        command += ["-m", "runnercheck.demo.engine", "--tp", "2"]
    command += engine
    done = subprocess.run(command, capture_output=True, text=True, timeout=240, cwd=ROOT)
    assert timeline.exists(), done.stdout + done.stderr
    return done, json.loads(timeline.read_text())


def tracks(trace: dict[str, Any]) -> dict[str, tuple[int, int]]:
    """Track name -> (pid, tid), from the process_name and thread metadata."""
    names = {
        (e["pid"], e["tid"]): e["args"]["name"]
        for e in trace["traceEvents"]
        if e["ph"] == "M" and e["name"] == "process_name"
    }
    return {name: track for track, name in names.items()}


def on(trace: dict[str, Any], track: tuple[int, int]) -> list[dict[str, Any]]:
    return [e for e in trace["traceEvents"] if e["ph"] != "M" and (e["pid"], e["tid"]) == track]


def inside(event: dict[str, Any], span: dict[str, Any]) -> bool:
    start, end = _ns(span["ts"]), _ns(span["ts"]) + _ns(span["dur"])
    return start <= _ns(event["ts"]) and _ns(event["ts"]) + _ns(event.get("dur", 0)) <= end


@pytest.mark.slow
@pytest.mark.parametrize(("shape", "per_step"), [("legacy", 2), ("merged", 1)])
def test_a_run_is_a_trace_event_file_with_a_track_per_rank(
    tmp_path: Path, shape: str, per_step: int
) -> None:
    budget = ("--deadline", "60", "--max-broadcasts-per-step", "1")
    done, trace = traced(tmp_path, ["--shape", shape, "--steps", "3"], budget)
    assert done.returncode == (1 if per_step > 1 else 0), done.stdout + done.stderr
    assert format_errors(trace) == []
    named = tracks(trace)
    assert sorted(named) == ["rank 0", "rank 1"]
    assert len({pid for pid, _ in named.values()}) == 2
    # The driver's last execute_model(None) is a step too: one empty broadcast.
    expected = [per_step] * 3 + [1]
    firsts: dict[str, list[dict[str, Any]]] = {}
    for rank, track in named.items():
        events = on(trace, track)
        steps = [e for e in events if e["cat"] == "step"]
        assert [e["name"] for e in steps] == [f"step {n}" for n in range(4)]
        broadcasts = [e for e in events if "broadcast" in e["cat"].split(",")]
        counted = [sum(inside(b, step) for b in broadcasts) for step in steps]
        assert counted == expected, rank
        assert [step["args"]["broadcasts"] for step in steps] == expected
        collectives = [e for e in events if "collective" in e["cat"].split(",")]
        assert all(c["ph"] == "X" for c in collectives)  # every call returned
        assert sum(step["args"]["collectives"] for step in steps) == len(collectives)
        assert all(any(inside(c, step) for step in steps) for c in collectives)
        for call in collectives:
            assert {"kind", "op", "logical", "site", "method", "bytes"} <= call["args"].keys()
            assert call["args"]["site"].startswith("runnercheck/demo/engine/")
        parts = [c for c in collectives if c["args"]["logical"] == "broadcast_tensor_dict"]
        assert {c["args"]["op"] for c in parts} >= {"broadcast_object_list"}
        assert all(c["args"]["bytes"] > 0 for c in parts)
        firsts[rank] = sorted(
            (c for c in parts if c["args"]["op"] == "broadcast_object_list"),
            key=lambda c: c["ts"],
        )
    # Legacy runs over the budget of 1 at its second broadcast of step 0, on rank 0.
    over = [e for e in trace["traceEvents"] if e.get("cat") == "budget"]
    if per_step > 1:
        assert [(e["pid"], e["tid"]) for e in over] == [named["rank 0"]]
        assert over[0]["name"] == "budget: broadcast_object_list at " + BUDGET_SITE
        assert over[0]["ts"] == firsts["rank 0"][1]["ts"]
    else:
        assert over == []
    # One clock: a receiver's part of a broadcast ends after the sender's started.
    sent, received = firsts["rank 0"], firsts["rank 1"]
    assert len(sent) == len(received) == sum(expected)
    assert all(
        _ns(r["ts"]) + _ns(r["dur"]) >= _ns(s["ts"]) for s, r in zip(sent, received, strict=True)
    )


@pytest.mark.slow
def test_the_divergence_is_marked_on_both_ranks(tmp_path: Path) -> None:
    done, trace = traced(tmp_path, ["--engine-dir", str(DIVERGENT)])
    assert done.returncode == 1 and "DIVERGENCE" in done.stdout, done.stdout + done.stderr
    assert format_errors(trace) == []
    named = tracks(trace)
    assert sorted(named) == ["rank 0", "rank 1"]
    for rank, op in (("rank 0", "all_reduce"), ("rank 1", "broadcast_object_list")):
        events = on(trace, named[rank])
        marks = [e for e in events if e["cat"] == "divergence"]
        assert len(marks) == 1 and marks[0]["ph"] == "i" and marks[0]["s"] == "t"
        assert marks[0]["args"]["position"] == 0
        assert marks[0]["args"]["report"][0].startswith("ranks diverge at collective #0")
        # At the start of that rank's first collective, the one that diverged.
        calls = sorted((e for e in events if e["cat"] == "collective"), key=lambda e: e["ts"])
        assert calls[0]["args"]["op"] == op and calls[0]["args"]["index"] == 0
        assert marks[0]["ts"] == calls[0]["ts"]


@pytest.mark.slow
def test_a_hang_is_marked_where_each_rank_stands(tmp_path: Path) -> None:
    """Rank 0 waits in a barrier; rank 1 returned from its last broadcast and sleeps: its
    last call is a complete event, not one it looks stuck in."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    torchrun = ["-m", "torch.distributed.run", "--nproc-per-node", "2"]
    done, trace = traced(
        tmp_path, [*torchrun, "--master-port", str(port), HANG], ("--deadline", "3")
    )
    assert done.returncode == 1 and "HANG" in done.stdout, done.stdout + done.stderr
    assert format_errors(trace) == []
    named = tracks(trace)
    waiting, sleeping = on(trace, named["rank 0"]), on(trace, named["rank 1"])
    barrier = [e for e in waiting if e["name"] == "barrier"]
    assert len(barrier) == 1 and barrier[0]["ph"] == "i"
    assert barrier[0]["args"]["end_recorded"] is False
    marks = [e for e in waiting if e["cat"] == "hang"]
    assert len(marks) == 1 and marks[0]["ts"] == barrier[0]["ts"]
    assert marks[0]["name"] == f"hang: barrier at {HANG}:18"
    calls = [e for e in sleeping if e["cat"] == "collective,broadcast"]
    assert [c["ph"] for c in calls] == ["X", "X"]
    marks = [e for e in sleeping if e["cat"] == "hang"]
    assert len(marks) == 1 and marks[0]["name"] == f"hang: after broadcast_object_list at {HANG}:10"
    assert _ns(marks[0]["ts"]) == _ns(calls[-1]["ts"]) + _ns(calls[-1]["dur"])


def test_collective_lines_read_both_ways() -> None:
    record = CollectiveRecord(
        3, "broadcast", "", 0, "int64:5", 40, 1, 2, "broadcast_tensor_dict", "worker",
        "Worker.execute_model", "Worker.execute_model", "w.py:9", "Worker.execute_model",
        start_ns=123_456_789,
    )  # fmt: skip
    line = encode_collective(record)
    assert decode(line) == record
    # A line of the earlier format (no start) reads with no time; a later one's extra
    # fields are left aside.
    fields = line.rstrip("\n").split("\t")
    old = "\t".join(fields[:15]) + "\n"
    assert decode(old) == CollectiveRecord(**{**record.__dict__, "start_ns": -1})
    assert decode(line.rstrip("\n") + "\tmore\n") == record
    assert decode("e\t3\t123456999\n") == EndLine(3, 123_456_999)
