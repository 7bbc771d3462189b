"""Whether a wrapper worker's control broadcast can travel in its first inner step's
broadcast, read from the step model alone: the plan of ``runnercheck migrate``'s
``fold-control-broadcast``, or why it is refused (MIG204).

One question, two askers. The codemod (:mod:`codemods.fold_plan`,
:mod:`codemods.fold_control_broadcast`) rewrites a wrapper only where :func:`fold_plan`
gives a :class:`FoldPlan`, and refuses with its :class:`FoldRefusal` elsewhere; RC110
(:mod:`runnercheck.rules.wrapper_control_broadcast`) is an error only where there
is a plan, and a note naming the refusal elsewhere. A tree ``migrate`` leaves as it is
therefore passes ``check``.

The plan asks, on every path of the step (:meth:`Project.wrapper_step`), which inner
worker's step broadcasts first after the control values are sent or received: one and
the same worker, which hands the extras of its merged dict back (``received_extras``).
The non-driver's receiving method is then read statement by statement, as the rewrite
reads it: the receive is a statement of its own (``data = broadcast_tensor_dict(...)``,
at the top of the method), at most the stop check (``if not data: return ...``) and
statements without a step follow it before the first inner step, nothing leaves the
method before that step, and that step runs unconditionally: a plain call, or the one
call of a ``for _ in range(n)`` whose ``n`` is at least 1 whatever the names it reads.

Where the first inner step differs between paths (the values select it: vLLM 0.6+'s
scorer first without speculation, proposer first with it), the plan is *receive, then
dispatch* (:func:`_dispatch`): the other ranks receive the first inner step's broadcast
themselves, whichever step it is, read the values from it (the request's extras, under
``broadcast_extras``) and hand the dict to each call that runs first on some path (its
``received`` argument); every such step must take that argument. :func:`verify_fold`
checks a rewrite with the collective schedules (:mod:`runnercheck.analysis.schedule`).
"""

from __future__ import annotations

import ast
import itertools
from collections.abc import Iterator
from dataclasses import dataclass

from runnercheck.analysis.conditions import Guard
from runnercheck.analysis.model import (
    BranchStep,
    CallStep,
    ClassFacts,
    ExitStep,
    FunctionFacts,
    LoopStep,
    Step,
    TryStep,
)
from runnercheck.analysis.project import Project, StepPath, Term
from runnercheck.analysis.schedule import PROBES, SchedulePath, path_broadcasts, schedules
from runnercheck.analysis.stepwalk import ROLES
from runnercheck.analysis.syntax import last_name
from runnercheck.analysis.wrappers import HANDED, evaluate, receive_lines

#: The request field the driver fills and the worker attribute the other ranks read
#: (the inner worker's step sends the one in its merged dict and sets the other).
SENT = "broadcast_extras"
RECEIVED = "received_extras"


@dataclass(frozen=True)
class FoldPlan:
    """What the step model shows for one wrapper class whose fold applies."""

    cls: str
    #: Lines of the control broadcast (driver) and of the non-driver receive.
    sends: frozenset[int]
    receives: frozenset[int]
    #: The attribute holding the worker whose step runs first after the control values
    #: (several, joined by ", ", where the values select which: see ``handed``).
    inner: str
    #: Where the control values select the first inner step: the calls of the
    #: non-driver's inner steps (``(line, col)``, in the receiving method) that run first
    #: on some path, each handed the dict received ahead of it; empty otherwise.
    handed: frozenset[tuple[int, int]] = frozenset()
    #: The receiving method (its qualified name), where ``handed`` is not empty.
    receiver: str = ""


@dataclass(frozen=True)
class FoldRefusal:
    """Why the fold does not apply to a wrapper class: its control broadcast stays."""

    message: str
    #: The shape, named in a few words (``"first inner step differs between paths"``).
    shape: str
    line: int


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


def fold_plan(
    project: Project, cls: ClassFacts, receives: frozenset[int] | None = None
) -> FoldPlan | FoldRefusal | None:
    """The plan for ``cls``, or why it is refused; None when ``cls`` has no control
    broadcast to fold. ``receives``: the lines of its non-driver receives (a broadcast
    call without a dict; by default those of its own methods)."""
    if receives is None:
        receives = receive_lines(cls)
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
        return FoldRefusal(
            f"{cls.name}'s control broadcast is in another file",
            "control broadcast outside the class's file",
            cls.line,
        )
    if not receives:
        return FoldRefusal(
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
                continue  # the stop signal's exit (the statements are read below)
            if first is None or not isinstance(first, Term):
                line = min(lines)
                return FoldRefusal(
                    f"a path of {cls.name}'s step {side} the control values (line {line}) "
                    "and runs no inner step that broadcasts after it: nothing could carry them",
                    "control values with no inner step after them",
                    line,
                )
            firsts.setdefault(_attr(first), first)
    if len(firsts) != 1:
        return _dispatch(project, cls, sends, receives, firsts, paths)
    inner = next(iter(firsts))
    if "." in inner:
        return FoldRefusal(
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
        return FoldRefusal(
            f"{inner}'s step ({names}) sends no extras of the request in its merged dict "
            f"(no `{RECEIVED}` for the other ranks to read them back from)",
            "inner step without an extras channel",
            min(sends),
        )
    refusal = _statements(project, cls, sends, receives, inner)
    if refusal is not None:
        return refusal
    return FoldPlan(cls.name, sends, receives, inner)


# ------------------------------------------------------- the statements rewritten
def _kept(steps: tuple[Step, ...]) -> list[Step]:
    """The steps that stand for statements the rewrite reads (calls, branches, loops,
    ``try`` and exits; bindings and role assertions left out)."""
    return [
        s for s in steps if isinstance(s, CallStep | BranchStep | LoopStep | TryStep | ExitStep)
    ]


def _inside(step: Step) -> Iterator[Step]:
    """``step`` and every step nested in it."""
    yield step
    if isinstance(step, BranchStep | LoopStep):
        for sub in (*step.body, *step.orelse):
            yield from _inside(sub)
    elif isinstance(step, TryStep):
        for sub in (*step.body, *[s for h in step.handlers for s in h], *step.orelse):
            yield from _inside(sub)
        for sub in step.finalbody:
            yield from _inside(sub)


def _at_least_once(count: str) -> bool:
    """``count`` is at least 1 for every value 0..4 of the plain names it reads."""
    try:
        names = sorted(
            {n.id for n in ast.walk(ast.parse(count, mode="eval")) if isinstance(n, ast.Name)}
        )
    except SyntaxError:
        return False
    for values in itertools.product(range(5), repeat=len(names)):
        try:
            if evaluate(count, dict(zip(names, values, strict=True))) < 1:
                return False
        except ValueError:
            return False
    return True


def _statements(
    project: Project,
    cls: ClassFacts,
    sends: frozenset[int],
    receives: frozenset[int],
    inner: str,
) -> FoldRefusal | None:
    """What the rewrite of the statements refuses, read from the step skeleton of the
    class's methods (None: every statement has the shape the rewrite needs)."""
    contract = project.contract
    broadcast = contract.broadcast_function
    for func in cls.methods.values():
        for step in _kept(func.steps):
            for sub in _inside(step):
                if (
                    isinstance(sub, CallStep)
                    and sub.step_broadcast
                    and sub.sends
                    and sub.line in sends
                    and len(func.params) < 2
                ):
                    return FoldRefusal(
                        "the control broadcast sends no dict of a method with a request parameter",
                        "control broadcast without a request",
                        sub.line,
                    )
    found = False
    for func in cls.methods.values():
        steps = _kept(func.steps)
        at = next(
            (
                i
                for i, s in enumerate(steps)
                if isinstance(s, CallStep)
                and s.step_broadcast
                and not s.sends
                and s.line in receives
                and _received_into(func, broadcast) is not None
            ),
            None,
        )
        if at is None:
            continue
        found = True
        refusal = _after_receive(func, steps, at, inner, contract.execute_method, broadcast)
        if refusal is not None:
            return refusal
    if not found:
        return FoldRefusal(
            f"{cls.name}'s control broadcast or its receive is not a statement of its own",
            "nested broadcast",
            min(sends),
        )
    return None


def _received_into(func: FunctionFacts, broadcast: str) -> str | None:
    """The name a receive of the method is assigned to, the call being the whole value
    (``data = broadcast_tensor_dict(src=0)``), or None."""
    return next(
        (name for name, callee in func.assigned_calls.items() if last_name(callee) == broadcast),
        None,
    )


def _is_stop(step: Step, name: str) -> bool:
    """``if not <name>: return ...`` (the stop signal of the worker loop)."""
    if not isinstance(step, BranchStep) or step.orelse or not step.complete:
        return False
    body = _kept(step.body)
    return (
        step.guards == (Guard(name, "falsy"),)
        and len(body) == 1
        and isinstance(body[0], ExitStep)
        and body[0].kind == "return"
    )


def _after_receive(
    func: FunctionFacts,
    steps: list[Step],
    at: int,
    inner: str,
    execute: str,
    broadcast: str,
) -> FoldRefusal | None:
    receive = steps[at]
    assert isinstance(receive, CallStep)
    line = receive.line
    name = _received_into(func, broadcast) or ""
    # the statement column: the call starts after ``name = ``
    column = receive.col - len(name) - 3
    rest = steps[at + 1 :]
    if rest and _is_stop(rest[0], name):
        rest = rest[1:]
    wanted = f"self.{inner}.{execute}"

    def runs_a_step(step: Step) -> bool:
        return any(
            isinstance(s, CallStep)
            and (last_name(s.callee) == execute or last_name(s.callee) == broadcast)
            for s in _inside(step)
        )

    for position, step in enumerate(rest):
        # ``return self.x.execute_model()``: the call, then the exit on its line
        returns = isinstance(step, CallStep) and any(
            isinstance(s, ExitStep) and s.line == step.line for s in rest[position + 1 :]
        )
        if returns or any(isinstance(s, ExitStep) for s in _inside(step)):
            return FoldRefusal(
                "the non-driver can leave the step between the receive and its first "
                f"inner step (line {step.line})",
                "exit before the first inner step",
                line,
            )
        if not runs_a_step(step):
            continue
        if isinstance(step, CallStep) and step.callee == wanted and step.col == column:
            return None
        if isinstance(step, LoopStep) and step.count is not None and not step.orelse:
            body = _kept(step.body)
            if len(body) == 1 and isinstance(body[0], CallStep) and body[0].callee == wanted:
                if not _at_least_once(step.count):
                    return FoldRefusal(
                        f"the first inner step runs in `for ... in range({step.count})`, "
                        "which may run no time: the other ranks could miss the control values",
                        "first inner step in a loop that may not run",
                        line,
                    )
                return None
        return FoldRefusal(
            f"the non-driver's first inner step is not run unconditionally (line "
            f"{step.line}): which step carries the control values would depend on them",
            "first inner step under a condition",
            line,
        )
    return FoldRefusal(
        "no inner step follows the non-driver receive", "receive without an inner step", line
    )


# ------------------------------------------- receive, then dispatch (several firsts)
def _dispatch(
    project: Project,
    cls: ClassFacts,
    sends: frozenset[int],
    receives: frozenset[int],
    firsts: dict[str, Term],
    paths: list[StepPath],
) -> FoldPlan | FoldRefusal:
    """The plan where the control values select the first inner step (vLLM 0.6+: the
    scorer first without speculation, the proposer first with it): the other ranks
    receive that step's broadcast ahead of it, whichever step it is, read the values
    from the dict and hand it to the step they select (its ``received`` argument). Each
    first step must take that argument and carry the request's extras in its dict; the
    receive must be a statement of its own at the top of one method, which every first
    step is called from as a plain statement, and that method may leave only at its end
    or at the stop check."""
    contract = project.contract
    where = ", ".join(
        f"{attr} ({t.site.where}:{t.site.line})" for attr, t in sorted(firsts.items())
    )
    differs = (
        f"the first inner step after {cls.name}'s control values differs between paths: {where}"
    )
    # the steps the other ranks run first are handed the dict: checked first, they name
    # what stops the fold; the driver's (the same workers, maybe through a helper) send it
    theirs = {
        _attr(first): first
        for path in paths
        if isinstance(first := _first_inner(path, receives, cls.path), Term)
    }
    for attr in [*sorted(theirs), *sorted(set(firsts) - set(theirs))]:
        held = project.attr_classes(cls, attr) if "." not in attr else ()
        for klass in held:
            ref = project.resolve_method(klass, contract.execute_method)
            if ref is not None and not schedules(project).step_broadcasts(klass, ref):
                why = "never broadcasts (no dict to hand it)"
            elif ref is None or HANDED not in ref.func.params:
                why = f"takes no dict received ahead of it (a `{HANDED}` argument)"
            elif not any(RECEIVED in (*c.annotations, *c.self_attrs) for c in project.mro(klass)):
                why = "sends no extras of the request"
            else:
                continue
            return FoldRefusal(
                f"{differs}; {attr}'s step ({klass.name}) {why}: the other ranks could not "
                "hand it the broadcast they read the values from",
                "first inner step differs between paths",
                min(sends),
            )
        if not held:
            what = "a worker held by a helper object" if "." in attr else "a worker not known"
            return FoldRefusal(
                f"{differs}; {attr} is {what}: the other ranks could not hand it the "
                "broadcast they read the values from",
                "first inner step differs between paths",
                min(sends),
            )
    handed: set[tuple[int, int]] = set()
    receivers: set[str] = set()
    for path in paths:
        first = _first_inner(path, receives, cls.path)
        if isinstance(first, Term):
            handed.add((first.site.line, first.site.col))
            receivers.add(first.site.where)
            if first.site.path != cls.path:
                receivers.add("")
    methods = [f for f in cls.methods.values() if f.qualname in receivers]
    if len(receivers) != 1 or len(methods) != 1:
        return FoldRefusal(
            f"{differs}; the other ranks run those steps from more than one method",
            "first inner steps in several methods",
            min(receives),
        )
    func = methods[0]
    refusal = _receiver_shape(project, func, receives, handed)
    if refusal is not None:
        return refusal
    return FoldPlan(
        cls.name, sends, receives, ", ".join(sorted(firsts)), frozenset(handed), func.qualname
    )


def _receiver_shape(
    project: Project,
    func: FunctionFacts,
    receives: frozenset[int],
    handed: set[tuple[int, int]],
) -> FoldRefusal | None:
    broadcast = project.contract.broadcast_function
    steps = _kept(func.steps)
    name = _received_into(func, broadcast)
    at = next(
        (
            i
            for i, s in enumerate(steps)
            if isinstance(s, CallStep) and s.step_broadcast and not s.sends and s.line in receives
        ),
        None,
    )
    line = min(receives)
    if at is None or name is None:
        return FoldRefusal(
            f"{func.qualname}'s receive of the control values is not a statement of its own "
            "at the top of the method",
            "nested broadcast",
            line,
        )
    if (
        HANDED in func.params
        or HANDED in func.assigned_calls
        or any(HANDED == b for b in _bound(func.steps))
    ):
        return FoldRefusal(
            f"{func.qualname} already binds `{HANDED}`",
            "name taken",
            line,
        )
    rest = steps[at + 1 :]
    if rest and _is_stop(rest[0], name):
        rest = rest[1:]
    for position, step in enumerate(rest):
        last = position == len(rest) - 1
        for sub in _inside(step):
            if isinstance(sub, ExitStep) and not (last and sub is step):
                return FoldRefusal(
                    "the non-driver can leave the step after the receive before its end "
                    f"(line {sub.line}): the dict received could go to no step",
                    "exit before the first inner step",
                    line,
                )
            if (
                isinstance(sub, CallStep)
                and (sub.line, sub.col) in handed
                and (sub.args or sub.kwargs)
            ):
                return FoldRefusal(
                    f"the first inner step at line {sub.line} is called with arguments",
                    "first inner step called with arguments",
                    line,
                )
    return None


def _bound(steps: tuple[Step, ...]) -> Iterator[str]:
    for step in steps:
        for sub in _inside(step):
            name = getattr(sub, "name", None)
            if isinstance(name, str):
                yield name


# ------------------------------------------------------ verification of a fold
def verify_fold(
    before: Project, after: Project, path: str, name: str, sites: frozenset[int]
) -> str | None:
    """Why the fold of class ``name`` (file ``path``) is wrong, read from the collective
    schedules before and after (None: it is right). ``sites``: the lines, before, of
    its control broadcast and receive. Right is: the roles' sequences pair up on every
    path after where they did before, and with every loop count at each of the probe
    values, each role's paths that ran the control broadcast and an inner step make one
    broadcast less, the others as many."""
    old_cls = before.modules[path].classes.get(name)
    new_cls = after.modules[path].classes.get(name) if path in after.modules else None
    if old_cls is None or new_cls is None:
        return f"{name} is gone after the rewrite"
    old_all, new_all = schedules(before), schedules(after)
    old, new = old_all.schedule(old_cls), new_all.schedule(new_cls)
    if old is None or new is None:
        return f"{name} has no step to compare"
    if any(old.partial.values()) or any(new.partial.values()):
        return f"{name}'s step has too many paths to compare"
    differ = len(new_all.disagreements(new))
    if differ > len(old_all.disagreements(old)):
        return f"{name}'s roles run different collectives on {differ} paths after the rewrite"

    def control(p: SchedulePath) -> bool:
        own = any(
            r.op.kind != "step" and r.op.site.path == path and r.op.site.line in sites
            for r in p.runs
        )
        return own and any(r.op.kind == "step" for r in p.runs)

    for role in ROLES:
        for count in PROBES:
            was = {path_broadcasts(p, count) for p in old.paths[role]}
            wanted = {
                n - control(p)
                for p in old.paths[role]
                if (n := path_broadcasts(p, count)) is not None
            }
            now = {path_broadcasts(p, count) for p in new.paths[role]}
            if None in was or None in now:
                return f"{name}'s {role} step makes a number of broadcasts not known"
            if now != wanted:
                return (
                    f"{name}'s {role} paths make {sorted(n for n in now if n is not None)} "
                    f"broadcasts with every loop "
                    f"count {count} after the rewrite, not {sorted(wanted)}"
                )
    return None
