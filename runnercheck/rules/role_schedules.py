"""RC112 role-schedules-differ: On some path the driver and the other ranks run different collectives under the same shared values: a rank waits for a broadcast that is never sent, or reads another step's dict."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import PurePath
from typing import cast

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.schedule import (
    Decision,
    Disagreement,
    SchedulePath,
    schedules,
)
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def __init__(self, is_driver_worker):
        self.is_driver_worker = is_driver_worker

    def execute_model(self, request=None):
        if self.is_driver_worker:
            broadcast_tensor_dict({"tokens": request["tokens"]}, src=0)
            return self.run(request["tokens"])
        data = broadcast_tensor_dict(src=0)
        return self.run(data["tokens"])


class SpecWorker:
    def __init__(self, proposer: Worker, scorer: Worker, rank):
        self.proposer_worker = proposer
        self.scorer_worker = scorer
        self.rank = rank

    def execute_model(self, request=None):
        if self.rank != 0:
            return self._run_non_driver_rank()
        k = request["lookahead"]
        broadcast_tensor_dict({"lookahead": k}, src=0)
        if not request["disable_speculation"]:
            for _ in range(k):
                self.proposer_worker.execute_model(request)
        return self.scorer_worker.execute_model(request)

    def _run_non_driver_rank(self):
        data = broadcast_tensor_dict(src=0)
        for _ in range(max(data["lookahead"], 1)):
            self.proposer_worker.execute_model()
        return self.scorer_worker.execute_model()
"""

#: The fix: the flag that decides whether the proposer runs travels with the control
#: dict, and every rank branches on it.
_GOOD = _variant(
    _BAD,
    (
        """\
        k = request["lookahead"]
        broadcast_tensor_dict({"lookahead": k}, src=0)
        if not request["disable_speculation"]:""",
        """\
        k = request["lookahead"]
        skip = request["disable_speculation"]
        # every rank learns whether the proposer runs, and branches on it alike
        broadcast_tensor_dict({"lookahead": k, "skip": skip}, src=0)
        if not skip:""",
    ),
    (
        """\
        for _ in range(max(data["lookahead"], 1)):
            self.proposer_worker.execute_model()""",
        """\
        if not data["skip"]:
            for _ in range(data["lookahead"]):
                self.proposer_worker.execute_model()""",
    ),
)

RULE = Rule(
    code="RC112",
    name="role-schedules-differ",
    tool="check",
    summary="On some path the driver and the other ranks run different collectives under the same shared values: a rank waits for a broadcast that is never sent, or reads another step's dict.",
    why="Every rank of the group must run the same collectives in the same order. A branch on a value received from a broadcast is taken alike by every rank; a branch on the role, the rank or the driver's own data (the request, a local computation) is not. vLLM's speculative-decoding worker (0.5.0, 0.5.1) skipped its proposer on the driver when speculation was disabled for the batch while the other ranks ran it `max(k, 1)` times: the ranks hang or the proposer reads the scorer's dict (fixed upstream in 0.6.0 by sending the flag and branching on it on every rank). The step is followed through `self`/`super()` calls, the runner, helpers and inner workers, with loop counts kept symbolic; a path is reported when no path of the other ranks agrees with it for any loop count its shared values allow.",
    bad=_BAD,
    good=_GOOD,
)

#: Decisions named in a message before the rest are counted.
MAX_NAMED = 4
_OTHER = {"driver": "non-driver", "non-driver": "driver"}


def _where(path: str, line: int) -> str:
    return f"{PurePath(path).name}:{line}"


def _runs(path: SchedulePath) -> str:
    """The collectives of a path, in order."""
    parts = []
    for run in path.runs:
        op = run.op
        where = _where(op.site.path, op.site.line)
        if op.kind == "step":
            each = "" if op.each == 1 else f" ({op.each} broadcasts)"
            text = f"{op.part}'s step{each} at {where}"
        else:
            text = f"`{op.kind}`{f' of {op.part}' if op.part else ''} at {where}"
        factor = " x ".join(f"`{c.text}`" for c in run.times)
        parts.append(f"{factor} x {text}" if factor else text)
    return "[" + ", ".join(parts) + "]" if parts else "no collective"


def _decision(d: Decision) -> str:
    if d.value.startswith("shared:"):
        key = d.value.split(":", 2)[2]
        shown = Decision(d.value, d.op, d.literal, d.holds, key)
        return f"`{shown.describe()}` (received by every rank)"
    if d.value.startswith("class:"):
        attr = d.value.split(":", 1)[1]
        names = " or ".join(f"`{n.strip(chr(39))}`" for n in d.literal.split("|"))
        return f"`{attr}` is {'not ' if not d.holds else ''}a {names}"
    text = f"`{d.describe()}`"
    if d.value.startswith("local:driver:"):
        return f"{text} (driver only)"
    if d.value.startswith("local:"):
        return f"{text} (this rank only)"
    return text


def _shown(d: Decision) -> bool:
    """Worth naming: not whether the step's dict is empty (the stop signal)."""
    return not (d.value.startswith("shared:") and d.value.endswith(":"))


def _when(one: Disagreement) -> str:
    decisions = [d for d in (*one.selecting, *one.configuration) if _shown(d)]
    # the decisions on values both roles know first, then the rank's own (those inside
    # an inner worker's or a helper's code first when they are what selects the path)
    shared = [d for d in decisions if d.shared]
    own = f"local:{one.role}:/"
    local = sorted(
        (d for d in decisions if not d.shared),
        key=lambda d: d.value.startswith(own) == one.inner_local,
    )
    chosen = (shared + local)[:MAX_NAMED]
    more = len(shared) + len(local) - len(chosen)
    text = ", ".join(_decision(d) for d in chosen)
    if more:
        text += f" and {more} more"
    return text or "on every step"


def _message(one: Disagreement, subjects: list[str]) -> str:
    sched = one.schedule
    entry = f"{sched.cls.name}.{sched.entry}"
    who = {"driver": "the driver", "non-driver": "the other ranks"}
    mine, theirs = who[one.role], who[_OTHER[one.role]]
    also = [s for s in subjects if s != sched.cls.name]
    shared_by = f" (also {', '.join(also)})" if also else ""
    return (
        f"{entry}{shared_by}: when {_when(one)}, {mine} run{'s' if one.role == 'driver' else ''} "
        f"{_runs(one.path)} but {theirs} run{'s' if one.role != 'driver' else ''} "
        f"{_runs(one.other)}: a rank waits for a broadcast that is never sent, or reads "
        "another step's dict"
    )


Causes = dict[tuple[str, int, int], list[Disagreement]]


def _rank(one: Disagreement) -> tuple[int, ...]:
    """Which disagreement to show for a cause: a sure one, then the fewest values."""
    local = sum(not d.shared for d in one.path.decisions)
    return (one.inner_local, one.role != "driver", local, len(one.path.decisions))


def _reported_elsewhere(project: Project, cls: ClassFacts, runner: ClassFacts | None) -> bool:
    """The runner's ``prepare_model_input`` runs a collective (RC105's cause), or the
    worker and runner broadcast step metadata a different number of times on the two
    roles' paths (RC106 says every rank must run the same broadcasts): one cause, one
    finding."""
    if runner is not None:
        prepare = project.contract.prepare_input_method
        if project.resolve_method(runner, prepare) is not None:
            if project.collectives_reachable(runner, prepare):
                return True
    counts = project.broadcasts_per_step(cls, runner)
    driver, other = counts["driver"].count, counts["non-driver"].count
    return driver != other and max(driver, other) > 1


def _subjects(project: Project, cls: ClassFacts) -> Iterator[Disagreement]:
    execute = project.contract.execute_method
    if not project.is_worker(cls) or project.is_abstract(cls):
        return
    if project.resolve_method(cls, execute) is None or not project.on_contract(cls):
        return
    found = schedules(project)
    runners: list[ClassFacts | None] = [
        r for rs in project.runner_candidates(cls).values() for r in rs
    ]
    for runner in runners or [None]:
        schedule = found.schedule(cls, runner)
        if schedule is None:
            continue
        disagreements = found.disagreements(schedule)
        if disagreements and not _reported_elsewhere(project, cls, runner):
            yield from disagreements


def _site(project: Project, one: Disagreement) -> tuple[str, int, int]:
    """Where to report: where the roles part, else the first collective of either path
    in a reported file."""
    sites = [one.site, *(r.op.site for r in (*one.path.runs, *one.other.runs))]
    if project.reportable is not None:
        sites = [s for s in sites if s.path in project.reportable] or sites
    return sites[0].path, sites[0].line, sites[0].col


def _causes(project: Project) -> Causes:
    """Every disagreement, by the step it is in (the method that defines the entry
    point: one cause however many workers and runners share the code)."""
    cached = project.memo.get(RULE.code)
    if cached is None:
        by_entry: dict[tuple[str, str], list[Disagreement]] = {}
        for cls in project.all_classes():
            for one in _subjects(project, cls):
                ref = project.resolve_method(cls, one.schedule.entry)
                owner = ref.func if ref is not None else None
                key = (owner.path, owner.qualname) if owner is not None else (cls.path, cls.name)
                by_entry.setdefault(key, []).append(one)
        causes: Causes = {}
        for found in by_entry.values():
            shown = min(found, key=_rank)
            causes.setdefault(_site(project, shown), []).extend([shown, *found])
        project.memo[RULE.code] = cached = causes
    return cast(Causes, cached)


def check_module(project: Project, module: ModuleFacts) -> Iterator[Finding]:
    """One finding per step whose roles disagree, for the surest of its paths."""
    for (path, line, col), found in _causes(project).items():
        if path != module.path:
            continue
        shown = found[0]
        subjects = list(dict.fromkeys(one.schedule.cls.name for one in found))
        finding = Finding(path, line, col, RULE.code, _message(shown, subjects))
        if all(one.inner_local for one in found):
            finding = finding.as_note(
                "a value local to an inner worker's or a helper's code selects the path; "
                "with the wrapper's own values alike, the roles agree on another path"
            )
        yield finding


CHECK = CheckRule(RULE, check_module=check_module)
