"""The plan of ``fold-control-broadcast`` (see :mod:`codemods.fold_control_broadcast`),
read from the step model alone: which wrapper classes fold their control broadcast, and
which are refused and why. It imports no LibCST, so that ``migrate`` parses with LibCST
only the files a codemod changes."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from codemods import registry
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project, StepPath, Term
from runnercheck.analysis.wrappers import receive_lines
from runnercheck.records import Refused

NAME = registry.FOLD_CONTROL_BROADCAST.name
#: The request field the driver fills and the worker attribute the other ranks read
#: (the inner worker's step sends the one in its merged dict and sets the other).
SENT = "broadcast_extras"
RECEIVED = "received_extras"
CODE = "MIG204"


def refused(cls: ClassFacts, code: str, message: str, shape: str, line: int) -> Refused:
    """``cls`` left alone: its control broadcast stays."""
    path = Path(cls.path)
    return Refused(
        NAME, code, path, line, message, shape=shape, held_back=(f"{cls.name} ({path.name})",)
    )


@dataclass(frozen=True)
class Plan:
    """What the step model shows for one wrapper class."""

    cls: str
    #: Lines of the control broadcast (driver) and of the non-driver receive.
    sends: frozenset[int]
    receives: frozenset[int]
    #: The attribute holding the worker whose step runs first after the control values.
    inner: str


def _attr(term: Term) -> str:
    return term.label.split(": ", 1)[0]


def _first_inner(path: StepPath, lines: frozenset[int], path_of: str) -> Term | bool | None:
    """The first inner step that broadcasts after the own broadcast at one of ``lines``
    (False: the path has none of them; None: nothing broadcasts after it)."""
    terms = path.terms
    start = next(
        (
            i
            for i, t in enumerate(terms)
            if not t.inner and t.site.path == path_of and t.site.line in lines
        ),
        None,
    )
    if start is None:
        return False
    return next((t for t in terms[start + 1 :] if t.inner and t.each > 0), None)


def plan_class(
    project: Project, cls: ClassFacts, receives: frozenset[int]
) -> Plan | Refused | None:
    """The plan for ``cls`` (None: it has no control broadcast to fold). ``receives``:
    the lines of its non-driver receives (a broadcast call without a dict)."""
    contract = project.contract
    ref = project.resolve_method(cls, contract.execute_method)
    if ref is None or ref.owner is not cls:
        return None
    step = project.wrapper_step(cls)
    if step is None or not step.control_paths():
        return None
    paths = [p for role in step.paths.values() for p in role]
    sends = frozenset(
        t.site.line for p in paths for t in p.own if t.sends and t.site.path == cls.path
    )
    if not sends:
        return refused(
            cls,
            CODE,
            f"{cls.name}'s control broadcast is in another file",
            "control broadcast outside the class's file",
            cls.line,
        )
    if not receives:
        return refused(
            cls,
            CODE,
            f"{cls.name} has no receive of its own for the control values in this file",
            "no non-driver receive",
            cls.line,
        )
    firsts: dict[str, Term] = {}
    for lines, side in ((sends, "sends"), (receives, "receives")):
        for path in paths:
            first = _first_inner(path, lines, cls.path)
            if first is False:
                continue
            if first is None and side == "receives":
                continue  # the stop signal's exit; the rewrite places it (see _receive)
            if first is None or not isinstance(first, Term):
                line = min(lines)
                return refused(
                    cls,
                    CODE,
                    f"a path of {cls.name}'s step {side} the control values (line {line}) "
                    "and runs no inner step that broadcasts after it: nothing could carry them",
                    "control values with no inner step after them",
                    line,
                )
            firsts.setdefault(_attr(first), first)
    if len(firsts) != 1:
        where = ", ".join(
            f"{attr} ({t.site.where}:{t.site.line})" for attr, t in sorted(firsts.items())
        )
        return refused(
            cls,
            CODE,
            f"the first inner step after {cls.name}'s control values differs between paths: "
            f"{where}; the other ranks could not tell which step carries them",
            "first inner step differs between paths",
            min(sends),
        )
    inner = next(iter(firsts))
    if "." in inner:
        return refused(
            cls,
            CODE,
            f"the first inner step runs on {inner}, a worker held by a helper object",
            "inner worker held by a helper",
            min(sends),
        )
    held = project.attr_classes(cls, inner)
    missing = [
        k.name
        for k in held
        if not any(RECEIVED in (*c.annotations, *c.self_attrs) for c in project.mro(k))
    ]
    if not held or missing:
        names = ", ".join(missing) or inner
        return refused(
            cls,
            CODE,
            f"{inner}'s step ({names}) sends no extras of the request in its merged dict "
            f"(no `{RECEIVED}` for the other ranks to read them back from)",
            "inner step without an extras channel",
            min(sends),
        )
    return Plan(cls.name, sends, receives, inner)


def refused_plans(project: Project, path: str) -> list[Refused] | None:
    """The wrapper classes of ``path`` whose plan is refused (in the order of the file),
    when no class of it has a plan to rewrite; None when one has (only the rewrite can
    tell what then happens)."""
    facts = project.modules.get(path)
    if facts is None:
        return []
    refused: list[Refused] = []
    for cls in sorted(facts.classes.values(), key=lambda c: c.line):
        plan = plan_class(project, cls, receive_lines(cls))
        if isinstance(plan, Plan):
            return None
        if plan is not None:
            refused.append(plan)
    return refused
