"""The text report of a traced run (rich tables on a terminal, plain text otherwise)."""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable
from typing import Any

from rich.console import Console
from rich.table import Table

from runnercheck.trace.report import TraceReport, WorldReport


def _size(nbytes: float) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if abs(nbytes) < 1024 or unit == "GiB":
            return f"{nbytes:.0f} {unit}" if unit == "B" else f"{nbytes:.1f} {unit}"
        nbytes /= 1024
    return f"{nbytes:.1f} GiB"


def _number(value: float) -> str:
    return str(int(value)) if value == int(value) else f"{value:g}"


def render(report: TraceReport, console: Console, per_step: bool = False) -> None:
    """Every world's figures, then the verdict."""
    if not report.worlds:
        console.print("runnercheck trace: no collective was recorded")
    for world in report.worlds:
        _render_world(world, console, per_step)
    if report.ended:
        console.print(
            "ended what the command left running: " + ", ".join(report.ended), markup=False
        )
    problems = report.problems()
    for line in problems:
        console.print(line, markup=False)
    if report.ok and not report.worlds:
        console.print(
            f"ok: the command succeeded ({report.seconds:.1f} s); no rank ran a collective, "
            "so there were no ranks to compare"
        )
    elif report.ok:
        budget = report.max_broadcasts_per_step
        within = f", every step within {budget} broadcasts" if budget is not None else ""
        console.print(f"ok: the ranks agree{within} ({report.seconds:.1f} s)")


def _render_world(world: WorldReport, console: Console, per_step: bool) -> None:
    steps = world.steps(0)
    outside = world.outside_steps(0)
    agree = "all ranks agree" if world.ranks_agree() else "ranks differ"
    console.print(
        f"world {world.key}: {world.size} ranks, {len(steps)} step{'s' * (len(steps) != 1)}, "
        f"{agree}",
        markup=False,
    )
    table = Table(title=None, show_edge=True)
    table.add_column("per step (rank 0)")
    for name in ("median", "max", "total"):
        table.add_column(name, justify="right")
    table.add_column("outside steps", justify="right")
    rows: tuple[tuple[str, list[int], int, Callable[[float], str]], ...] = (
        ("broadcasts", world.broadcasts_per_step(0), outside.broadcasts, _number),
        ("collectives", world.collectives_per_step(0), outside.collectives, _number),
        ("bytes", world.bytes_per_step(0), outside.nbytes, _size),
    )
    for name, values, extra, fmt in rows:
        if values:
            table.add_row(
                name,
                fmt(statistics.median(values)),
                fmt(max(values)),
                fmt(sum(values)),
                fmt(extra),
            )
        else:
            table.add_row(name, "-", "-", "-", fmt(extra))
    console.print(table)
    cost = world.recorder_us_per_call(0)
    if cost is not None:
        seconds, calls = world.costs[0]
        console.print(
            f"recording cost on rank 0: {cost:.1f} us per collective "
            f"({seconds * 1e3:.1f} ms over {calls} calls)"
        )
    methods = Table(show_edge=True)
    methods.add_column("method")
    methods.add_column("where")
    methods.add_column("broadcasts/step", justify="right")
    methods.add_column("collectives/step", justify="right")
    methods.add_column("bytes/step", justify="right")
    methods.add_column("calls")
    count = max(len(steps), 1)
    for row in world.methods(0):
        methods.add_row(
            row.kind,
            row.method,
            _number(round(row.broadcasts / count, 2)),
            _number(round(row.collectives / count, 2)),
            _size(row.nbytes / count),
            ", ".join(row.ops),
        )
    console.print(methods)
    if per_step:
        table = Table(show_edge=True)
        for name in ("step", "broadcasts", "collectives", "bytes"):
            table.add_column(name, justify="right")
        table.add_column("broadcasts by method")
        for figures in steps.values():
            table.add_row(
                str(figures.step),
                str(figures.broadcasts),
                str(figures.collectives),
                _size(figures.nbytes),
                _runs(call.method or call.site for call in figures.broadcast_calls),
            )
        console.print(table)


def _runs(labels: Iterable[str]) -> str:
    """``a, 3x b, c`` for ``a, b, b, b, c``."""
    out: list[list[Any]] = []
    for label in labels:
        if out and out[-1][0] == label:
            out[-1][1] += 1
        else:
            out.append([label, 1])
    return ", ".join(label if n == 1 else f"{n}x {label}" for label, n in out)
