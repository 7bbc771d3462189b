"""The trace file format, the monitor's comparison and the report's figures, on trace
files written here (no ranks)."""

from __future__ import annotations

import os
from dataclasses import replace
from pathlib import Path

import pytest

from runnercheck.trace.monitor import Monitor
from runnercheck.trace.recorder import FileSink
from runnercheck.trace.records import (
    CollectiveRecord,
    decode,
    encode_bytes,
    encode_collective,
    encode_world,
)
from runnercheck.trace.report import build_report, step_figures

BASE = CollectiveRecord(
    index=0,
    op="broadcast_object_list",
    group="",
    peer=0,
    shape="",
    nbytes=100,
    step=0,
    logical=0,
    logical_name="broadcast_tensor_dict",
    kind="worker",
    method="Worker.execute_model",
    step_method="Worker.execute_model",
    site="engine/worker_base.py:215",
    site_function="LocalOrDistributedWorkerBase.execute_model",
)


def step_records(
    step: int, start: int, logical: int, extra: bool = False
) -> list[CollectiveRecord]:
    """One merged step: a broadcast_tensor_dict of 2 parts, then an all_reduce; with
    ``extra``, a raw broadcast in prepare first."""
    out = []
    if extra:
        out.append(
            replace(
                BASE,
                op="broadcast",
                logical=-1,
                logical_name="",
                shape="int64:1",
                nbytes=8,
                kind="prepare",
                method="ModelRunner.prepare_model_input",
                site="engine/model_runner.py:99",
                site_function="ModelRunner.prepare_model_input",
            )
        )
    out.append(replace(BASE, logical=logical))
    out.append(replace(BASE, op="broadcast", shape="int64:4", nbytes=32, logical=logical))
    out.append(
        replace(
            BASE,
            op="all_reduce",
            peer=-1,
            shape="float32:64",
            nbytes=256,
            logical=-1,
            logical_name="",
            kind="execute",
            method="ModelRunner.execute_model",
            site="engine/parallel.py:55",
            site_function="tensor_model_parallel_all_reduce",
        )
    )
    return [replace(r, step=step, index=start + i) for i, r in enumerate(out)]


def write(directory: Path, pid: int, lines: list[str]) -> None:
    with open(directory / f"{pid}.trace", "a", encoding="utf-8") as handle:
        handle.write("".join(lines))


def test_lines_round_trip() -> None:
    record = replace(BASE, site="a\tb.py:3", site_function="f\nx")
    back = decode(encode_collective(record))
    assert back == replace(record, site="a b.py:3", site_function="f x")
    assert decode(encode_world("tcp://h:1", 1, 2)) == decode("w\ttcp://h:1\t1\t2\n")
    assert decode("c\tnot-a-number\n") is None
    assert decode("z\tunknown\n") is None


def test_step_figures_count_a_logical_broadcast_once() -> None:
    records = step_records(0, 0, 0) + step_records(1, 3, 1, extra=True)
    records.append(replace(BASE, index=7, step=-1, logical=2))
    figures = step_figures(records)
    assert {s: (f.broadcasts, f.collectives, f.nbytes) for s, f in figures.items()} == {
        -1: (1, 1, 100),
        0: (1, 3, 388),
        1: (2, 4, 396),
    }
    assert [r.site for r in figures[1].broadcast_calls] == [
        "engine/model_runner.py:99",
        "engine/worker_base.py:215",
    ]


def test_monitor_finds_the_first_mismatch_as_lines_arrive(tmp_path: Path) -> None:
    write(tmp_path, 11, [encode_world("tcp://h:1", 0, 2)])
    write(tmp_path, 12, [encode_world("tcp://h:1", 1, 2)])
    driver = step_records(0, 0, 0) + step_records(1, 3, 1, extra=True)
    other = step_records(0, 0, 0) + step_records(1, 3, 1)
    monitor = Monitor(tmp_path, deadline=30)
    # Rank 0 runs ahead; half a line is not read yet.
    text = "".join(encode_collective(r) for r in driver)
    write(tmp_path, 11, [text[:-5]])
    write(tmp_path, 12, [encode_collective(r) for r in other[:3]])
    monitor.poll()
    assert monitor.check() is None
    write(tmp_path, 11, [text[-5:]])
    write(tmp_path, 12, [encode_collective(r) for r in other[3:]])
    monitor.poll()
    divergence = monitor.check()
    assert divergence is not None
    assert divergence.position == 3
    assert divergence.calls[0] is not None and divergence.calls[1] is not None
    assert divergence.calls[0].site == "engine/model_runner.py:99"
    assert divergence.calls[0].kind == "prepare"
    assert divergence.calls[1].logical_name == "broadcast_tensor_dict"
    lines = divergence.lines()
    assert lines[0] == "ranks diverge at collective #3 (step 1) of world tcp://h:1"
    assert lines[1].startswith("  rank 0: broadcast at engine/model_runner.py:99 in ")


def test_monitor_reports_a_hang_only_after_the_deadline(tmp_path: Path) -> None:
    pid = os.getpid()  # a live process stands in for the ranks
    write(tmp_path, pid, [encode_world("tcp://h:2", 0, 2)])
    write(tmp_path, pid + 1_000_000, [encode_world("tcp://h:2", 1, 2)])
    write(tmp_path, pid, [encode_collective(r) for r in step_records(0, 0, 0)])
    write(tmp_path, pid + 1_000_000, [encode_collective(r) for r in step_records(0, 0, 0)[:2]])
    monitor = Monitor(tmp_path, deadline=5)
    monitor.poll(now=100.0)
    assert monitor.check() is None
    assert monitor.check_hang(now=104.0) is None
    hang = monitor.check_hang(now=105.5)
    assert hang is not None and hang.position == 2
    assert hang.ranks[0].startswith("waits in all_reduce at engine/parallel.py:55")
    assert hang.ranks[1].startswith("has not reached it; its last collective: broadcast ")
    # Once every rank stands at the same place, waiting is not a hang.
    write(tmp_path, pid + 1_000_000, [encode_collective(step_records(0, 0, 0)[2])])
    monitor.poll(now=106.0)
    assert monitor.check_hang(now=200.0) is None


def test_finish_names_the_collective_a_rank_never_ran(tmp_path: Path) -> None:
    write(tmp_path, 21, [encode_world("tcp://h:3", 0, 2)])
    write(tmp_path, 22, [encode_world("tcp://h:3", 1, 2)])
    records = step_records(0, 0, 0)
    write(tmp_path, 21, [encode_collective(r) for r in records])
    write(tmp_path, 22, [encode_collective(r) for r in records[:1]])
    monitor = Monitor(tmp_path, deadline=5)
    monitor.poll()
    assert monitor.check() is None
    divergence = monitor.finish()
    assert divergence is not None and divergence.position == 1
    assert divergence.calls[1] is None
    assert divergence.lines()[2] == "  rank 1: no collective: it never ran one"


def test_report_budget_names_the_step_and_the_extra_call(tmp_path: Path) -> None:
    write(tmp_path, 31, [encode_world("tcp://h:4", 0, 1)])
    records = step_records(0, 0, 0) + step_records(1, 3, 1, extra=True)
    write(tmp_path, 31, [encode_collective(r) for r in records])
    write(tmp_path, 31, [encode_bytes(0, 1234)])  # a receiver learns its size afterwards
    monitor = Monitor(tmp_path, deadline=5)
    monitor.poll()
    report = build_report(["cmd"], monitor.worlds, 0, 1.0, max_broadcasts_per_step=1)
    world = report.world()
    assert world.broadcasts_per_step() == [1, 2]
    assert world.bytes_per_step()[0] == 1234 + 32 + 256
    assert report.budget is not None
    assert (report.budget.step, report.budget.rank, report.budget.broadcasts) == (1, 0, 2)
    assert report.budget.extra.site == "engine/worker_base.py:215"
    assert not report.ok
    methods = {(m.kind, m.method): m for m in world.methods()}
    assert methods["prepare", "ModelRunner.prepare_model_input"].broadcasts == 1
    assert methods["worker", "Worker.execute_model"].collectives == 4
    within = build_report(["cmd"], monitor.worlds, 0, 1.0, max_broadcasts_per_step=2)
    assert within.budget is None and within.ok


@pytest.mark.parametrize("budget", [0, 1])
def test_budget_zero_and_one(tmp_path: Path, budget: int) -> None:
    write(tmp_path, 41, [encode_world("tcp://h:5", 0, 1)])
    write(tmp_path, 41, [encode_collective(r) for r in step_records(0, 0, 0)])
    monitor = Monitor(tmp_path, deadline=5)
    monitor.poll()
    report = build_report(["cmd"], monitor.worlds, 0, 1.0, max_broadcasts_per_step=budget)
    assert (report.budget is None) == (budget == 1)


def test_file_sink_lines_are_readable_before_close_and_across_growth(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(FileSink, "CHUNK", 256)  # grow several times
    sink = FileSink(str(tmp_path))
    sink.write(encode_world("tcp://h:6", 0, 1))
    records = step_records(0, 0, 0) + step_records(1, 3, 1, extra=True)
    monitor = Monitor(tmp_path, deadline=5)
    for record in records[:5]:
        sink.write(encode_collective(record))
    path = Path(sink.path)
    assert path.stat().st_size > 256  # grown, NUL-padded
    monitor.poll()
    assert [r.index for r in monitor.worlds[0].ranks[0].records] == [0, 1, 2, 3, 4]
    for record in records[5:]:
        sink.write(encode_collective(record))
    sink.close()
    monitor.poll()
    assert monitor.worlds[0].ranks[0].records == records
    assert b"\0" not in path.read_bytes()
