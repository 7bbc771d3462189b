"""Figures of a traced run: per step and per contract method, the budget, the verdict.

A *broadcast* is one logical broadcast: a ``broadcast_tensor_dict`` call (however many
``broadcast_object_list``/``broadcast`` parts it sends), or a ``broadcast`` /
``broadcast_object_list`` called on its own. *Collectives* count every
``torch.distributed`` call, parts included. Steps are the recorder's (see
:mod:`runnercheck.trace.recorder`); collectives outside any step are counted apart.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from runnercheck.trace.monitor import Divergence, Hang, WorldTrace
from runnercheck.trace.records import BROADCAST_OPS, CollectiveRecord


@dataclass
class StepFigures:
    step: int
    broadcasts: int = 0
    collectives: int = 0
    nbytes: int = 0
    #: The first record of each broadcast of the step, in order.
    broadcast_calls: list[CollectiveRecord] = field(default_factory=list)


def step_figures(records: Iterable[CollectiveRecord]) -> dict[int, StepFigures]:
    """Figures per step (key -1: outside any step), in step order."""
    steps: dict[int, StepFigures] = {}
    seen_logical: set[int] = set()
    for record in records:
        figures = steps.get(record.step)
        if figures is None:
            figures = steps[record.step] = StepFigures(record.step)
        figures.collectives += 1
        figures.nbytes += record.nbytes
        if record.logical >= 0:
            if record.logical not in seen_logical:
                seen_logical.add(record.logical)
                figures.broadcasts += 1
                figures.broadcast_calls.append(record)
        elif record.op in BROADCAST_OPS:
            figures.broadcasts += 1
            figures.broadcast_calls.append(record)
    return dict(sorted(steps.items()))


@dataclass(frozen=True)
class MethodFigures:
    kind: str
    method: str
    broadcasts: int
    collectives: int
    nbytes: int
    ops: tuple[str, ...]


def method_figures(records: Iterable[CollectiveRecord]) -> list[MethodFigures]:
    """Totals per contract method (kind and ``Class.method``), most broadcasts first."""
    totals: dict[tuple[str, str], list[Any]] = {}
    seen_logical: set[int] = set()
    for record in records:
        key = (record.kind or "-", record.method or record.site_function or "?")
        entry = totals.setdefault(key, [0, 0, 0, {}])
        entry[1] += 1
        entry[2] += record.nbytes
        if record.logical >= 0:
            entry[3].setdefault(record.logical_name, None)
            if record.logical not in seen_logical:
                seen_logical.add(record.logical)
                entry[0] += 1
        else:
            entry[3].setdefault(record.op, None)
            if record.op in BROADCAST_OPS:
                entry[0] += 1
    rows = [
        MethodFigures(kind, method, b, c, n, tuple(ops))
        for (kind, method), (b, c, n, ops) in totals.items()
    ]
    return sorted(rows, key=lambda r: (-r.broadcasts, -r.collectives, r.kind, r.method))


@dataclass(frozen=True)
class BudgetViolation:
    world: str
    rank: int
    step: int
    broadcasts: int
    budget: int
    #: The first broadcast past the budget.
    extra: CollectiveRecord
    #: How many steps of that rank are over the budget.
    steps_over: int
    steps: int

    def lines(self) -> list[str]:
        e = self.extra
        method = f" [{e.kind}: {e.method}]" if e.kind else ""
        what = e.logical_name or e.op
        return [
            f"step {self.step} on rank {self.rank} ran {self.broadcasts} broadcasts, "
            f"over the budget of {self.budget} ({self.steps_over} of {self.steps} steps over)",
            f"  the extra one: {what} at {e.site} in {e.site_function}{method}",
        ]


def _summary(values: list[int]) -> dict[str, float]:
    if not values:
        return {"median": 0, "max": 0, "total": 0}
    return {"median": statistics.median(values), "max": max(values), "total": sum(values)}


@dataclass
class WorldReport:
    """One world (process group) of the run."""

    key: str
    size: int
    #: rank -> its records (in order).
    records: dict[int, list[CollectiveRecord]]
    #: rank -> (seconds its recorder spent, collectives recorded), from processes that
    #: exited normally.
    costs: dict[int, tuple[float, int]] = field(default_factory=dict)
    #: rank -> the pid of its process.
    pids: dict[int, int] = field(default_factory=dict)

    def recorder_us_per_call(self, rank: int = 0) -> float | None:
        cost = self.costs.get(rank)
        return None if cost is None or not cost[1] else cost[0] / cost[1] * 1e6

    def steps(self, rank: int = 0) -> dict[int, StepFigures]:
        """Per step figures of ``rank`` (the driver by default), steps only."""
        figures = step_figures(self.records.get(rank, []))
        figures.pop(-1, None)
        return figures

    def outside_steps(self, rank: int = 0) -> StepFigures:
        return step_figures(self.records.get(rank, [])).get(-1, StepFigures(-1))

    def broadcasts_per_step(self, rank: int = 0) -> list[int]:
        return [figures.broadcasts for figures in self.steps(rank).values()]

    def collectives_per_step(self, rank: int = 0) -> list[int]:
        return [figures.collectives for figures in self.steps(rank).values()]

    def bytes_per_step(self, rank: int = 0) -> list[int]:
        return [figures.nbytes for figures in self.steps(rank).values()]

    def methods(self, rank: int = 0) -> list[MethodFigures]:
        return method_figures(self.records.get(rank, []))

    def ranks_agree(self) -> bool:
        """Every rank ran the driver's broadcasts and collectives, step by step."""

        def figures(rank: int) -> tuple[list[int], list[int], int]:
            outside = self.outside_steps(rank).collectives
            return (self.broadcasts_per_step(rank), self.collectives_per_step(rank), outside)

        reference = figures(0)
        return len(self.records) == self.size and all(
            figures(rank) == reference for rank in self.records
        )

    def budget(self, max_broadcasts: int) -> BudgetViolation | None:
        first: BudgetViolation | None = None
        for rank in sorted(self.records):
            steps = self.steps(rank)
            over = [figures for figures in steps.values() if figures.broadcasts > max_broadcasts]
            if not over:
                continue
            worst = over[0]
            candidate = BudgetViolation(
                world=self.key,
                rank=rank,
                step=worst.step,
                broadcasts=worst.broadcasts,
                budget=max_broadcasts,
                extra=worst.broadcast_calls[max_broadcasts],
                steps_over=len(over),
                steps=len(steps),
            )
            if first is None or candidate.step < first.step:
                first = candidate
        return first

    def as_json(self) -> dict[str, Any]:
        ranks: dict[str, Any] = {}
        for rank in sorted(self.records):
            steps = self.steps(rank)
            outside = self.outside_steps(rank)
            ranks[str(rank)] = {
                "collectives": len(self.records[rank]),
                "broadcasts_per_step": [f.broadcasts for f in steps.values()],
                "collectives_per_step": [f.collectives for f in steps.values()],
                "bytes_per_step": [f.nbytes for f in steps.values()],
                "outside_steps": {
                    "broadcasts": outside.broadcasts,
                    "collectives": outside.collectives,
                    "bytes": outside.nbytes,
                },
                "recorder": None
                if rank not in self.costs
                else {"seconds": self.costs[rank][0], "calls": self.costs[rank][1]},
                "methods": [
                    {
                        "kind": m.kind,
                        "method": m.method,
                        "broadcasts": m.broadcasts,
                        "collectives": m.collectives,
                        "bytes": m.nbytes,
                        "ops": list(m.ops),
                    }
                    for m in self.methods(rank)
                ],
            }
        return {
            "world": self.key,
            "world_size": self.size,
            "steps": len(self.steps(0)),
            "broadcasts": _summary(self.broadcasts_per_step(0)),
            "collectives": _summary(self.collectives_per_step(0)),
            "bytes": _summary(self.bytes_per_step(0)),
            "ranks_agree": self.ranks_agree(),
            "ranks": ranks,
        }


@dataclass
class TraceReport:
    """Everything one traced run produced, and its verdict."""

    command: list[str]
    worlds: list[WorldReport]
    returncode: int | None
    seconds: float
    divergence: Divergence | None = None
    hang: Hang | None = None
    budget: BudgetViolation | None = None
    max_broadcasts_per_step: int | None = None
    #: Why the run was stopped early, or None when it ended by itself.
    stopped: str | None = None
    #: Seconds from finding the reason to stop to the end of the run's last process.
    stop_seconds: float | None = None
    #: Processes of the run still alive after it, that could not be ended (should be none).
    left_behind: list[int] = field(default_factory=list)
    #: Processes the command left running when it exited, ended after it ("PID (name)").
    ended: list[str] = field(default_factory=list)
    #: Every process that recorded collectives.
    pids: list[int] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return (
            self.divergence is None
            and self.hang is None
            and self.budget is None
            and self.returncode == 0
            and not self.left_behind
        )

    def world(self, index: int = 0) -> WorldReport:
        if not self.worlds:
            raise LookupError("the run joined no process group (no collective was recorded)")
        return self.worlds[index]

    def problems(self) -> list[str]:
        lines: list[str] = []
        if self.divergence is not None:
            lines += ["DIVERGENCE " + self.divergence.lines()[0], *self.divergence.lines()[1:]]
        if self.hang is not None:
            lines += ["HANG " + self.hang.lines()[0], *self.hang.lines()[1:]]
        if self.budget is not None:
            lines += ["OVER BUDGET " + self.budget.lines()[0], *self.budget.lines()[1:]]
        if self.stopped:
            after = f" {self.stop_seconds:.1f} s later" if self.stop_seconds is not None else ""
            ended = "every process of it ended" if not self.left_behind else "it was killed"
            lines.append(
                f"stopped the run: {self.stopped}; {ended}{after} (run time {self.seconds:.1f} s)"
            )
        if self.left_behind:
            pids = ", ".join(str(pid) for pid in self.left_behind)
            lines.append(f"processes of the run that could not be ended, still running: {pids}")
        if self.returncode not in (0, None) and self.stopped is None:
            lines.append(f"the command exited with status {self.returncode}")
        return lines

    def as_json(self) -> dict[str, Any]:
        return {
            "command": self.command,
            "ok": self.ok,
            "returncode": self.returncode,
            "seconds": round(self.seconds, 3),
            "stopped": self.stopped,
            "stop_seconds": None if self.stop_seconds is None else round(self.stop_seconds, 3),
            "left_behind": self.left_behind,
            "ended": self.ended,
            "pids": self.pids,
            "max_broadcasts_per_step": self.max_broadcasts_per_step,
            "divergence": _divergence_json(self.divergence),
            "hang": None
            if self.hang is None
            else {
                "world": self.hang.world,
                "position": self.hang.position,
                "ranks": {str(k): v for k, v in self.hang.ranks.items()},
                "stacks": {str(k): v for k, v in self.hang.stacks.items()},
            },
            "budget": None
            if self.budget is None
            else {
                "world": self.budget.world,
                "rank": self.budget.rank,
                "step": self.budget.step,
                "broadcasts": self.budget.broadcasts,
                "site": self.budget.extra.site,
                "function": self.budget.extra.site_function,
                "kind": self.budget.extra.kind,
                "method": self.budget.extra.method,
                "steps_over": self.budget.steps_over,
            },
            "worlds": [world.as_json() for world in self.worlds],
        }


def _divergence_json(divergence: Divergence | None) -> Any:
    if divergence is None:
        return None
    return {
        "world": divergence.world,
        "group": divergence.group,
        "position": divergence.position,
        "calls": {
            str(rank): None
            if call is None
            else {
                "op": call.op,
                "logical": call.logical_name,
                "step": call.step,
                "kind": call.kind,
                "method": call.method,
                "site": call.site,
                "function": call.site_function,
            }
            for rank, call in divergence.calls.items()
        },
    }


def build_report(
    command: list[str],
    worlds: list[WorldTrace],
    returncode: int | None,
    seconds: float,
    max_broadcasts_per_step: int | None,
) -> TraceReport:
    reports = [
        WorldReport(
            world.key,
            world.size,
            {rank: list(trace.records) for rank, trace in sorted(world.ranks.items())},
            {rank: trace.cost for rank, trace in world.ranks.items() if trace.cost is not None},
            {rank: trace.pid for rank, trace in world.ranks.items()},
        )
        for world in worlds
        if any(trace.records for trace in world.ranks.values())
    ]
    report = TraceReport(
        command, reports, returncode, seconds, max_broadcasts_per_step=max_broadcasts_per_step
    )
    if max_broadcasts_per_step is not None:
        for world in reports:
            report.budget = world.budget(max_broadcasts_per_step)
            if report.budget is not None:
                break
    return report
