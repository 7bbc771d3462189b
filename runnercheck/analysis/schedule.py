"""The collective schedule: what each rank runs, in order.

For an entry point of a worker (its ``execute_model``) and a role (the driver, the
other ranks), :meth:`Schedules.schedule` gives every path as the ordered collectives it
runs (:class:`Run` of a :class:`Collective`: the kind, the part of the engine that runs
it, its group and source, what it carries, the method and line), through ``self``/
``super()`` calls, the runner the worker drives, helper objects, inner workers (a
wrapper's proposer and scorer: one run is that worker's whole step, so many broadcasts)
and loops (``for _ in range(max(k, 1))`` keeps ``max(k, 1)``), with the
:class:`Decision` of every branch taken on it.

What decides a branch is what every rank can know of it:

* the role (the driver flag, ``self.rank == self._driver_rank``): each role's paths
  take their side only;
* a value received from a broadcast (``data["no_spec"]``, ``if not data``) is equal on
  every rank of the group; the driver's own name for it is the value it put under that
  key in the dict it sent (``broadcast_tensor_dict({"no_spec": no_spec})``): *shared*;
* the engine's state (``self.X``, a module's name): built alike on every rank, shared;
  the class an attribute holds, too;
* anything else (the request, a local computation, an unknown call): *local*, known
  only to the rank that computes it, so the roles may decide it differently.

:meth:`Schedules.disagreements` compares the roles: a path of one role *disagrees* when
no path of the other role, under the same shared values (loop counts included), runs
the same collectives in the same order; then whenever that path is taken the ranks hang
or one reads the other's dict. A path whose shared values no path of the other role
allows (the driver's ``if not self.do_metadata_broadcast`` side, where no other rank
exists) is not compared.
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import PurePath
from typing import Any

from runnercheck.analysis.bindings import SELF_ATTR
from runnercheck.analysis.conditions import AllOf, AnyOf, Atom, Not, Test
from runnercheck.analysis.constants import UNKNOWN, Constants
from runnercheck.analysis.decides import subject_of
from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.model import (
    AssertStep,
    BindStep,
    BranchStep,
    CallStep,
    ClassFacts,
    ExitStep,
    LoopStep,
    Role,
    RoleAssertStep,
    Step,
    TryStep,
    flatten_calls,
)
from runnercheck.analysis.project import Project
from runnercheck.analysis.roles import Roles
from runnercheck.analysis.stepwalk import ROLES, BroadcastSite
from runnercheck.analysis.syntax import last_name
from runnercheck.analysis.uses import BROADCAST_SWITCH
from runnercheck.analysis.wrappers import HANDED, Wrappers, handed_receives

#: States per block of one walk; past it the role's schedule is not followed further
#: (it is partial, and no path of either role is said to disagree).
MAX_STATES = 64
#: How deep calls are followed from the entry point.
MAX_DEPTH = 12
#: Conjunctions one test may split into (a longer test decides nothing).
MAX_CONJUNCTIONS = 16
#: Values a loop count is tried with when two paths are compared.
PROBES = (0, 1, 2, 3, 5)
#: Assignments of loop counts tried per pair of paths.
MAX_ASSIGNMENTS = 4096
#: Choices of the classes attributes hold tried per path.
MAX_CONFIGURATIONS = 64
#: The kind of a run whose collectives are not known: a call into an object of a class
#: that was not read, holding a worker.
UNKNOWN_KIND = "?"
#: The name of the project's :class:`Schedules` in ``Project.memo``.
SCHEDULES = "schedules"
#: An environment's entry ``ALIAS + value``: the shared value a local one was sent as.
ALIAS = "\0"
#: An environment's entry ``PENDING + "line:col"``: a receive whose dict the method hands
#: to an inner worker's step (:func:`~runnercheck.analysis.wrappers.handed_receives`),
#: not yet run: it becomes that step's first broadcast, or runs as it is before any
#: other collective and where the path ends. ``PENDING_NAME + name``: the receive a
#: name holds.
PENDING = "\1"
PENDING_NAME = "\2"
#: ``PENDING_NAME + name``'s value once its receive was handed on.
HANDED_ALREADY = "handed"
#: What ``self.do_metadata_broadcast`` stands for: whether any other rank runs the
#: step (False: the driver alone, whose schedule no other rank has to match).
SINGLE_RANK = "ranks:do_metadata_broadcast"

# --------------------------------------------------------------- the schedule


@dataclass(frozen=True)
class Collective:
    """One collective a rank runs: ``kind`` is the collective (``broadcast_tensor_dict``),
    or ``"step"`` for one run of an inner worker's whole step (``each`` broadcasts);
    ``part`` is the part of the engine that runs it: ``""`` the entry's own code,
    ``"model_runner"``, ``"proposer_worker"``, ... The driver's send and the other ranks'
    receive of one broadcast are the same collective of the same part."""

    kind: str
    part: str
    site: BroadcastSite
    sends: bool = False
    group: str = ""
    src: str = ""
    #: The keys of the dict sent, when known.
    carries: tuple[str, ...] = ()
    #: An inner worker's step: its broadcasts per run, and the class that runs it.
    each: int = 1
    worker: str = ""
    #: The contract's step-metadata broadcast; an empty dict sent (the stop signal).
    step_broadcast: bool = False
    empty: bool = False
    #: An inner step whose broadcasts depend on the class the attribute holds: the
    #: class's name (as a :class:`Decision` on ``choice`` names it) -> its broadcasts.
    each_by: tuple[tuple[str, int], ...] = ()
    choice: str = ""

    def broadcasts(self, values: Mapping[str, object]) -> int | None:
        """Broadcasts per run with the classes chosen in ``values`` (None: not chosen)."""
        if not self.each_by:
            return self.each
        chosen = values.get(self.choice)
        for name, each in self.each_by:
            if name == chosen:
                return each
        return None

    @property
    def key(self) -> tuple[str, str]:
        """What the two roles must agree on, run after run: a step-metadata broadcast
        (an inner step is so many of them) of the same part; the driver's empty stop
        dict pairs with whichever broadcast the other ranks wait in."""
        if self.kind == "step" or self.step_broadcast:
            return ("broadcast", "*" if self.empty else self.part)
        return (self.kind, self.part)

    def describe(self) -> str:
        where = f"{PurePath(self.site.path).name}:{self.site.line}"
        if self.kind == "step":
            amount = "" if self.each == 1 else f", {self.each} broadcasts"
            return f"{self.part or 'own'} step ({self.worker}{amount}; {where})"
        owner = f"{self.part} " if self.part else ""
        direction = " send" if self.sends else ""
        return f"{owner}{self.kind}{direction} ({self.site.where}, {where})"


@dataclass(frozen=True)
class Count:
    """A loop count as written (``max(num_lookahead_slots, 1)``), with what each name in
    it stands for on this path (a value's name, see :class:`Decision`, or a literal
    ``=repr``)."""

    text: str
    names: tuple[tuple[str, str], ...] = ()

    def value(self, values: Mapping[str, object]) -> int | None:
        """The count with each value as given (None: not a count)."""
        names = dict(self.names)
        try:
            tree = _parsed(self.text)
        except SyntaxError:
            return None
        return _eval_count(tree, names, values)

    @property
    def values(self) -> tuple[str, ...]:
        return tuple(v for _, v in self.names if not v.startswith("="))


@dataclass(frozen=True)
class Run:
    """A collective run ``times`` over (each a :class:`Count`; none: once)."""

    op: Collective
    times: tuple[Count, ...] = ()

    def describe(self) -> str:
        factor = "·".join(c.text for c in self.times)
        return f"{factor} x {self.op.describe()}" if factor else self.op.describe()


@dataclass(frozen=True)
class Decision:
    """A branch taken on a path: ``value`` names what decides it (``shared:PART:KEY``: a
    value received from a broadcast of that part, the dict itself for ``KEY`` "";
    ``self:PART:ATTR`` and ``global:NAME``: the engine's state; ``class:PART``: the
    class an attribute holds; ``local:ROLE:...``: known to that role only), ``op`` and
    ``literal`` the comparison (``truthy`` with no literal), ``holds`` whether it held.
    ``text`` and ``where`` say it as the code does."""

    value: str
    op: str
    literal: str
    holds: bool
    text: str = field(default="", compare=False)
    where: str = field(default="", compare=False)
    #: The part of the engine whose code took it ("" the entry's own).
    part: str = field(default="", compare=False)

    @property
    def shared(self) -> bool:
        return not self.value.startswith("local:")

    def describe(self) -> str:
        text = self.text or self.value
        if self.op == "truthy":
            return text if self.holds else f"not {text}"
        op = self.op if self.holds else _NEGATED.get(self.op, f"not {self.op}")
        return f"{text} {op} {self.literal}"


_NEGATED = {"==": "!=", "!=": "==", "is": "is not", "is not": "is", "<": ">=", ">=": "<"}
_NEGATED.update({">": "<=", "<=": ">"})


@dataclass(frozen=True)
class SchedulePath:
    """One path of one role: its collectives in order and the branches that select it."""

    runs: tuple[Run, ...] = ()
    decisions: tuple[Decision, ...] = ()

    def describe(self) -> str:
        return ", then ".join(run.describe() for run in self.runs) or "no collective"

    def count_values(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(v for run in self.runs for c in run.times for v in c.values))


@dataclass(frozen=True)
class Schedule:
    """The paths of one entry point, per role; ``partial`` marks a role whose paths were
    cut at :data:`MAX_STATES`."""

    cls: ClassFacts
    runner: ClassFacts | None
    entry: str
    paths: Mapping[Role, tuple[SchedulePath, ...]]
    partial: Mapping[Role, bool]


@dataclass(frozen=True)
class Disagreement:
    """A path of ``role`` that no path of the other role matches under the same shared
    values: ``other`` is the other role's closest path, ``site`` the first collective
    where they part (on ``role``'s path, or the other's when ``role``'s ends first)."""

    schedule: Schedule
    role: Role
    path: SchedulePath
    other: SchedulePath
    site: BroadcastSite
    #: The classes the attributes hold where they part (when the path does not say).
    configuration: tuple[Decision, ...] = ()
    #: A path the wrapper's own code selects alike agrees: what tells them apart is a
    #: value local to an inner worker's or a helper's code.
    inner_local: bool = False

    @property
    def selecting(self) -> tuple[Decision, ...]:
        """The decisions that select the path: shared values first, then local ones."""
        shared = [d for d in self.path.decisions if d.shared]
        local = [d for d in self.path.decisions if not d.shared]
        return tuple(dict.fromkeys([*shared, *local]))


# ----------------------------------------------------------------- counting


_PARSED: dict[str, ast.expr] = {}


def _parsed(text: str) -> ast.expr:
    tree = _PARSED.get(text)
    if tree is None:
        tree = _PARSED[text] = ast.parse(text, mode="eval").body
    return tree


def _count_subject(node: ast.AST) -> str | None:
    """A value a loop count reads, as :func:`~runnercheck.analysis.decides.subject_of`
    writes it (``k``, ``self.k``, ``data['k']``, ``len(seqs)``)."""
    if isinstance(node, (ast.Name, ast.Attribute, ast.Subscript, ast.Call)):
        return subject_of(node)
    return None


def _eval_count(
    node: ast.expr, names: Mapping[str, str], values: Mapping[str, object]
) -> int | None:
    if isinstance(node, ast.Constant) and type(node.value) is int:
        return node.value
    name = _count_subject(node)
    if name is not None:
        bound = names.get(name)
        if bound is None:
            return None
        if bound.startswith("="):
            literal = _literal(bound[1:])
            return literal if type(literal) is int else None
        found = values.get(bound)
        return found if type(found) is int else None
    if isinstance(node, ast.BinOp):
        a = _eval_count(node.left, names, values)
        b = _eval_count(node.right, names, values)
        if a is None or b is None:
            return None
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv) and b:
            return a // b
        return None
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("max", "min")
        and node.args
        and not node.keywords
    ):
        args = [_eval_count(a, names, values) for a in node.args]
        if any(a is None for a in args):
            return None
        return max(args) if node.func.id == "max" else min(args)  # type: ignore[type-var]
    return None


def _count_names(text: str) -> list[str]:
    """The (dotted) names a loop count reads (not the functions it calls)."""
    try:
        tree = _parsed(text)
    except SyntaxError:
        return []
    out: list[str] = []

    def visit(node: ast.AST) -> None:
        name = _count_subject(node)
        if name is not None:
            if name not in out:
                out.append(name)
            return
        if isinstance(node, ast.Call):
            for arg in node.args:
                visit(arg)
            return
        for child in ast.iter_child_nodes(node):
            visit(child)

    visit(tree)
    return out


# --------------------------------------------------------------- decisions


class _Other:
    """A value equal to no literal named (a string, an object)."""

    def __bool__(self) -> bool:
        return True


_OTHER = _Other()
_NAMED: dict[str, object] = {"True": True, "False": False, "None": None}


def _literal(text: str) -> object:
    if text in _NAMED:
        return _NAMED[text]
    if text.lstrip("-").isdigit():
        return int(text)
    return text  # a string's repr, compared as text


def _check(op: str, value: object, literal: object) -> bool:
    if op == "truthy":
        return bool(value)
    if op == "==":
        return value == literal and value is not _OTHER
    if op == "!=":
        return not (value == literal and value is not _OTHER)
    if op == "is":
        return value is literal or (value == literal and type(value) is type(literal))
    if op == "is not":
        return not (value is literal or (value == literal and type(value) is type(literal)))
    if op == "in":
        return value in literal  # type: ignore[operator]
    if type(value) is not int or type(literal) is not int:
        return False
    if op == "<":
        return value < literal
    if op == "<=":
        return value <= literal
    if op == ">":
        return value > literal
    if op == ">=":
        return value >= literal
    return False


def _candidates(decisions: Iterable[Decision]) -> list[object]:
    out: list[object] = [None, False, True, 0, 1, 2, 3, 5, -1, _OTHER]
    for d in decisions:
        if d.op == "in":
            out += [_literal(part) for part in d.literal.split("|")]
        elif d.op != "truthy":
            literal = _literal(d.literal)
            out.append(literal)
            if type(literal) is int:
                out += [literal - 1, literal + 1]
    return out


def _operand(d: Decision) -> object:
    if d.op == "in":
        return {_literal(part) for part in d.literal.split("|")}
    return _literal(d.literal) if d.literal else None


def _satisfied(d: Decision, value: object) -> bool:
    ok = _check(d.op, value, _operand(d))
    return ok if d.holds else not ok


def consistent(decisions: Iterable[Decision]) -> bool:
    """Some value of each name satisfies every decision on it."""
    by_value: dict[str, list[Decision]] = {}
    for d in decisions:
        by_value.setdefault(d.value, []).append(d)
    for found in by_value.values():
        if len(found) > 1 and not _satisfiable(frozenset(found)):
            return False
    return True


_SATISFIABLE: dict[frozenset[Decision], bool] = {}


def _satisfiable(found: frozenset[Decision]) -> bool:
    """Some value satisfies every decision (all on one value)."""
    known = _SATISFIABLE.get(found)
    if known is None:
        if all(d.op == "truthy" for d in found):
            known = len({d.holds for d in found}) == 1
        else:
            known = any(all(_satisfied(d, v) for d in found) for v in _candidates(found))
        if len(_SATISFIABLE) > 100_000:
            _SATISFIABLE.clear()
        _SATISFIABLE[found] = known
    return known


def _merge(a: tuple[Decision, ...], b: Iterable[Decision]) -> tuple[Decision, ...] | None:
    """``a`` and ``b`` together, or None when they contradict each other."""
    if not b:
        return a
    have = set(a)
    more = [d for d in dict.fromkeys(b) if d not in have]
    if not more:
        return a
    merged = (*a, *more)
    touched = {d.value for d in more}
    if touched & {d.value for d in a} or len(touched) < len(more):
        if not consistent(d for d in merged if d.value in touched):
            return None
    return merged


Literal = tuple[Atom, bool]


def _dnf(test: Test, positive: bool) -> list[tuple[Literal, ...]] | None:
    """The ways ``test`` is ``positive`` as conjunctions of atoms (in the order Python
    evaluates them); None past :data:`MAX_CONJUNCTIONS`."""
    if isinstance(test, Atom):
        return [((test, positive),)]
    if isinstance(test, Not):
        return _dnf(test.part, not positive)
    conjunctive = isinstance(test, AllOf) == positive
    parts = test.parts
    if conjunctive:  # every part (all of them hold / none of them holds)
        out: list[tuple[Literal, ...]] = [()]
        for part in parts:
            ways = _dnf(part, positive)
            if ways is None:
                return None
            out = [a + b for a in out for b in ways]
            if len(out) > MAX_CONJUNCTIONS:
                return None
        return out
    # some part decides it: the first that does, the earlier ones the other way
    out = []
    before: list[tuple[Literal, ...]] = [()]
    for part in parts:
        ways = _dnf(part, positive)
        if ways is None:
            return None
        out += [a + b for a in before for b in ways]
        against = _dnf(part, not positive)
        if against is None:
            return None
        before = [a + b for a in before for b in against]
        if len(out) > MAX_CONJUNCTIONS or len(before) > MAX_CONJUNCTIONS:
            return None
    return out


# ---------------------------------------------------------------- the walk

#: What a local name holds on a path: a value's name (see :class:`Decision`), a literal
#: (``"=repr"``), ``("recv", part)`` a dict received from a broadcast of that part,
#: ``("dict", items)`` a literal dict (keys and values as written).
Value = str | tuple[str, object]
Env = Mapping[str, Value]


@dataclass(frozen=True)
class _Ctx:
    """Whose code runs: ``cls`` (``self``), the part of the engine it is, whether it is
    a worker (its ``execute_model`` is that part's step), the runner the entry drives,
    and for a helper object the worker part that holds it."""

    cls: ClassFacts
    part: str
    worker: bool
    runner: ClassFacts | None = None
    holder: tuple[str, ClassFacts] | None = None
    #: Which object it is, where that is not its part (a delegate's worker, whose step
    #: is the delegate's: ``proposer_worker.worker``).
    slot: str = ""

    @property
    def choice(self) -> str:
        """The value a choice of its class is a decision on."""
        return f"class:{self.slot or self.part}"

    def key(self) -> tuple[object, ...]:
        holder = (self.holder[0], id(self.holder[1])) if self.holder else None
        return (id(self.cls), self.part, self.worker, id(self.runner), holder, self.slot)


@dataclass
class _State:
    runs: tuple[Run, ...]
    decisions: tuple[Decision, ...]
    env: dict[str, Value]

    def key(self) -> tuple[object, ...]:
        return (self.runs, self.decisions, tuple(sorted(self.env.items(), key=lambda i: i[0])))


class _Cut(Exception):
    """More paths than :data:`MAX_STATES` in one block: the walk of that role stops."""


#: A call's outcomes: (runs, decisions) per way it ends; and whether cut.
Summary = tuple[tuple[tuple[tuple[Run, ...], tuple[Decision, ...]], ...], bool]


def _dedupe(states: list[_State]) -> list[_State]:
    if len(states) < 2:
        return states
    seen: dict[tuple[object, ...], _State] = {}
    for state in states:
        seen.setdefault(state.key(), state)
    return list(seen.values())


@dataclass
class _Walk:
    """One method's walk for one role."""

    owner: Schedules
    ctx: _Ctx
    ref: MethodRef
    role: Role
    depth: int
    stack: tuple[tuple[int, str], ...]
    #: The receiving collective of each call site, by ``(line, col)``.
    received: dict[tuple[int, int], str] = field(default_factory=dict)

    # ------------------------------------------------------------ values
    @property
    def qual(self) -> str:
        return f"{self.ctx.part}/{self.ref.func.qualname}"

    def local(self, name: str) -> str:
        return f"local:{self.role}:{self.qual}:{name}"

    def where(self, line: int) -> str:
        return f"{self.owner.file_name(self.ref.func.path)}:{line}"

    def self_value(self, rest: str) -> Value:
        """``self.<rest>``: a constant of the class, else the engine's state."""
        attr = rest.split(".", 1)[0].split("[", 1)[0].removesuffix("()")
        if rest == attr:
            constant = self.owner.constants.self_constant(self.ctx.cls, attr)
            if constant != UNKNOWN:
                return f"={constant}"
            if attr == BROADCAST_SWITCH:
                # the other ranks run a step only where the driver broadcasts
                return "=True" if self.role == "non-driver" else SINGLE_RANK
        if _rank_like(rest):
            return self.local(f"self.{rest}")
        return f"self:{self.ctx.part}:{rest}"

    def resolve(self, subject: str, env: Env) -> Value:
        """What ``subject`` (as :mod:`~runnercheck.analysis.decides` writes it) is."""
        if subject.startswith("len(") and subject.endswith(")"):
            inner = self.resolve(subject[4:-1], env)
            if isinstance(inner, str) and not inner.startswith("="):
                return f"{inner}|len"
            return self.local(subject)
        root, rest = _split(subject)
        self_name = self.ref.func.params[0] if self.ref.func.params else "self"
        if root == self_name and not self.ref.func.is_staticmethod and rest:
            return self.self_value(rest[1:] if rest.startswith(".") else rest)
        if root in env:
            held = env[root]
            if not rest:
                return held
            if isinstance(held, tuple):
                kind, data = held
                key = _key_of(rest)
                if kind == "recv":
                    return f"shared:{data}:{rest if key is None else key}"
                if kind == "dict" and key is not None:
                    for name, text in data:  # type: ignore[attr-defined]
                        if name == key and text:
                            return text if text.startswith("=") else self.resolve(text, env)
                return self.local(subject)
            if held.startswith("="):
                return self.local(subject)
            return f"{held}{rest}"
        if root in self.params or root in self.locals:
            return self.local(subject)
        if _rank_like(subject):
            return self.local(subject)
        return f"global:{subject}"

    @property
    def params(self) -> set[str]:
        func = self.ref.func
        return {*func.params, *func.param_defaults, *func.param_types}

    @property
    def locals(self) -> set[str]:
        names = self.owner.bound_names(self.ref.func)
        return names

    # ---------------------------------------------------------- decisions
    def decide(self, state: _State, literals: Sequence[Literal], line: int) -> _State | None:
        """``state`` with the atoms holding as given (None: not on this path)."""
        decisions: list[Decision] = []
        for atom, holds in literals:
            if atom.role is not None:
                if (atom.role == self.role) != holds:
                    return None
                continue
            if atom.subject.startswith("?"):
                value: Value = self.local(f"{atom.subject}@{line}")
            elif atom.subject.startswith("#"):
                value = atom.subject[1:]
            else:
                value = self.resolve(atom.subject, state.env)
            if isinstance(value, tuple):
                if value[0] == "recv":
                    value = f"shared:{value[1]}:"
                else:
                    value = self.local(atom.subject)
            alias = state.env.get(ALIAS + value)
            if isinstance(alias, str):
                value = alias
            if value.startswith("!"):  # ``not self.x`` passed in: its truth flipped
                if atom.op != "truthy":
                    value = self.local(atom.subject)
                else:
                    value, holds = value[1:], not holds
            if value.startswith("="):
                ok = _check(
                    atom.op, _literal(value[1:]), _literal(atom.value) if atom.value else None
                )
                if ok != holds:
                    return None
                continue
            text = atom.subject if atom.subject[0] not in "?#" else _shown(atom.subject[1:])
            decisions.append(
                Decision(value, atom.op, atom.value, holds, text, self.where(line), self.ctx.part)
            )
        merged = _merge(state.decisions, decisions)
        if merged is None:
            return None
        return _State(state.runs, merged, state.env)

    def branch(self, state: _State, test: Test | None, positive: bool, line: int) -> list[_State]:
        if test is None:
            return [state]
        ways = _dnf(test, positive)
        if ways is None:
            ways = [((Atom(f"?{line}:test"), positive),)]
        ways = self.expand(ways, state.env)
        out = []
        for way in ways:
            taken = self.decide(state, way, line)
            if taken is not None:
                out.append(taken)
        return out

    def expand(self, ways: list[tuple[Literal, ...]], env: Env) -> list[tuple[Literal, ...]]:
        """A truth test of a name bound to a formula is the formula (and, once the
        driver sent the name, the value every rank received)."""
        out: list[tuple[Literal, ...]] = []
        for way in ways:
            done: list[tuple[Literal, ...]] = [()]
            for atom, holds in way:
                formula = None
                if atom.op == "truthy" and atom.role is None and atom.subject[0] not in "?#":
                    root, rest = _split(atom.subject)
                    held = env.get(root) if not rest else None
                    if isinstance(held, tuple) and held[0] == "test":
                        formula = held[1]
                if formula is None:
                    done = [(*d, (atom, holds)) for d in done]
                    continue
                test: Test = formula[0]  # type: ignore[index]
                shared: str | None = formula[1]  # type: ignore[index]
                options = _dnf(test, holds) or [((atom, holds),)]
                if shared is not None:
                    options = [(*o, (Atom(f"#{shared}"), holds)) for o in options]
                done = [d + o for d in done for o in options]
            out += done
            if len(out) > MAX_CONJUNCTIONS:
                return ways
        return out

    # ---------------------------------------------------------------- calls
    def add(
        self, state: _State, runs: Sequence[Run], decisions: Iterable[Decision] = ()
    ) -> _State | None:
        merged = _merge(state.decisions, decisions)
        if merged is None:
            return None
        if runs:
            state = _flush(state)
        return _State((*state.runs, *runs), merged, state.env)

    def collective(self, state: _State, step: CallStep) -> _State | None:
        func = self.ref.func
        site = BroadcastSite(func.path, step.line, step.col, func.qualname, step.callee)
        part = self.ctx.part
        items: Sequence[tuple[str, str]] | None = step.carries
        if items is None and step.payload:
            held = state.env.get(step.payload)
            if isinstance(held, tuple) and held[0] == "dict":
                items = held[1]  # type: ignore[assignment]
        op = Collective(
            step.collective or "",
            part,
            site,
            step.sends,
            step.group,
            step.src,
            tuple(k for k, _ in items) if items else (),
            step_broadcast=step.step_broadcast,
            empty=step.sends_empty,
        )
        decisions: list[Decision] = []
        env = state.env
        if step.step_broadcast and step.sends:
            # the values the driver sends are the ones every rank receives
            empty = f"shared:{part}:"
            if step.sends_empty:
                decisions.append(
                    Decision(
                        empty, "truthy", "", False, "the dict sent", self.where(step.line), part
                    )
                )
            elif items:
                decisions.append(
                    Decision(
                        empty, "truthy", "", True, "the dict sent", self.where(step.line), part
                    )
                )
                env = dict(env)
                for key, text in items:
                    if not text:
                        continue
                    shared = f"shared:{part}:{key}"
                    held = text if text.startswith("=") else env.get(text)
                    if isinstance(held, str) and held.startswith("="):  # a literal sent
                        where = self.where(step.line)
                        decisions.append(Decision(shared, "==", held[1:], True, key, where, part))
                    if isinstance(held, str) and held.startswith("local:"):
                        env[ALIAS + held] = shared  # what was computed before, too
                    if isinstance(held, tuple) and held[0] == "test":
                        env[text] = ("test", (held[1][0], shared))  # type: ignore[index]
                    elif not text.startswith("=") and _split(text)[1] == "":
                        env[text] = shared
        elif step.step_broadcast:
            self.received[(step.line, step.col)] = part
            if (step.line, step.col) in handed_receives(func):
                # the first broadcast of the inner step its dict is handed to
                flushed = _flush(state)
                waiting = dict(flushed.env)
                waiting[f"{PENDING}{step.line}:{step.col}"] = ("pending", op)
                return _State(flushed.runs, state.decisions, waiting)
        after = self.add(_State(state.runs, state.decisions, env), [Run(op)], decisions)
        return after

    def handed(self, state: _State, step: CallStep) -> tuple[_State, Collective] | None:
        """The state without the receive that ``step`` hands to the inner step it calls
        (``received=<name>``), and that receive; None when it hands none."""
        text = next((t for k, t in step.kwargs if k == HANDED), None)
        if not text:
            return None
        where = state.env.get(PENDING_NAME + text)
        if not isinstance(where, str):
            return None
        pending = state.env.get(PENDING + where)
        if not isinstance(pending, tuple) or not isinstance(pending[1], Collective):
            return None
        env = dict(state.env)
        del env[PENDING + where]
        env[PENDING_NAME + text] = HANDED_ALREADY
        return _State(state.runs, state.decisions, env), pending[1]

    def handed_again(self, state: _State, step: CallStep) -> bool:
        """``step`` hands on a dict an inner step was handed before."""
        text = next((t for k, t in step.kwargs if k == HANDED), None)
        return bool(text) and state.env.get(PENDING_NAME + str(text)) == HANDED_ALREADY

    def call(self, state: _State, step: CallStep) -> list[_State] | None:
        """The states after a call (None: the call changes nothing the schedule sees)."""
        owner = self.owner
        execute = owner.contract.execute_method
        parts = step.callee.split(".")
        name = parts[-1]
        ctx = self.ctx
        if len(parts) == 2 and parts[0] in ("self", "cls", "super()"):
            after = self.ref.owner if parts[0] == "super()" else None
            ref = owner.hierarchy.resolve_method(ctx.cls, name, after=after)
            if ref is None:
                return None
            if name == execute and ctx.worker:
                if ctx.part:  # an inner worker's step: so many broadcasts
                    return self.inner_step(state, step, ctx.part, ctx.cls, ref, ())
                if parts[0] != "super()":
                    return None  # the entry's own step again: a recursion
            return self.enter(state, step, ctx, ref, ())
        if len(parts) != 3 or parts[0] != "self":
            return None
        attr = parts[1]
        options: list[tuple[_Ctx, ClassFacts, tuple[Decision, ...]]] = []
        held = owner.held(ctx, attr)
        if not held:
            if not owner.holds_unknown_worker(ctx.cls, attr):
                return None
            # an object of a class not read, handed a worker: it may run its steps
            func = self.ref.func
            site = BroadcastSite(func.path, step.line, step.col, func.qualname, step.callee)
            unknown = self.add(state, [Run(Collective(UNKNOWN_KIND, attr, site))])
            return [unknown] if unknown is not None else []
        many = len(held) > 1
        for klass, sub in held:
            chosen: tuple[Decision, ...] = (
                (
                    Decision(
                        sub.choice,
                        "==",
                        owner.class_literal(klass),
                        True,
                        f"type(self.{attr}).__name__",
                        self.where(step.line),
                        ctx.part,
                    ),
                )
                if many
                else ()
            )
            options.append((sub, klass, chosen))
        targets = []
        for sub, klass, chosen in options:
            ref = owner.hierarchy.resolve_method(klass, name)
            if ref is not None:
                reaches = owner.call_reaches(sub, klass, ref, name)
                targets.append((sub, klass, chosen, ref, reaches))
        if not any(reaches for *_, reaches in targets):
            return None  # no collective whichever class it is
        # an inner worker's step is so many broadcasts, but for a worker that hands its
        # request to a worker it holds (a delegate): that worker's step is followed
        units = [
            t for t in targets if t[0].worker and name == execute and not owner.delegates(t[1])
        ]
        if len(units) > 1 and len(units) == len(targets) and len({t[0].part for t in units}) == 1:
            return self.inner_steps(state, step, units)
        # the outcomes of each class; classes with the same outcomes are one choice
        by_outcome: dict[tuple[object, ...], tuple[list[_State], list[Decision]]] = {}
        for sub, klass, chosen, ref, reaches in targets:
            found: list[_State] | None = None
            if reaches and any(t[1] is klass for t in units):
                found = self.inner_step(state, step, sub.part, klass, ref, ())
            elif reaches:
                found = self.enter(state, step, sub, ref, ())
            if found is None:
                found = [state]
            key = tuple((s.runs, s.decisions) for s in found)
            by_outcome.setdefault(key, (found, []))[1].extend(chosen)
        groups = list(by_outcome.values())
        out: list[_State] = []
        for found, classes in groups:
            decisions = _choice(classes) if len(groups) > 1 else ()
            for one in found:
                taken = self.add(one, (), decisions)
                if taken is not None:
                    out.append(taken)
        return out

    def inner_steps(
        self,
        state: _State,
        step: CallStep,
        targets: list[tuple[_Ctx, ClassFacts, Any, MethodRef, bool]],
    ) -> list[_State]:
        """One inner step of whichever class the attribute holds: one run whose
        broadcasts the class decides (the engine's configuration, compared class by
        class), not a path per class."""
        counts = {
            self.owner.class_literal(klass): self.owner.step_broadcasts(klass, ref)
            for _, klass, _, ref, _ in targets
        }
        sub, klass = targets[0][0], targets[0][1]
        func = self.ref.func
        site = BroadcastSite(func.path, step.line, step.col, func.qualname, step.callee)
        if len(set(counts.values())) == 1:
            each = next(iter(counts.values()))
            runs = (
                [Run(Collective("step", sub.part, site, each=each, worker=klass.name))]
                if each
                else []
            )
        else:
            names = "|".join(n.strip("'") for n in counts)
            op = Collective(
                "step",
                sub.part,
                site,
                each=max(counts.values()),
                worker=names,
                each_by=tuple(counts.items()),
                choice=sub.choice,
            )
            runs = [Run(op)]
        after = self.add(state, runs)
        return [after] if after is not None else []

    def inner_step(
        self,
        state: _State,
        step: CallStep,
        part: str,
        klass: ClassFacts,
        ref: MethodRef,
        chosen: tuple[Decision, ...],
    ) -> list[_State]:
        each = self.owner.step_broadcasts(klass, ref)
        runs: list[Run] = []
        func = self.ref.func
        site = BroadcastSite(func.path, step.line, step.col, func.qualname, step.callee)
        handed = self.handed(state, step)
        if handed is not None and each:
            # the receive handed to it was its first broadcast: the step, from there
            state, receive = handed
            site = receive.site
        elif handed is None and self.handed_again(state, step):
            each -= 1  # a dict handed on before: this step receives nothing for it
        if each:
            runs.append(Run(Collective("step", part, site, each=each, worker=klass.name)))
        after = self.add(state, runs, chosen)
        return [after] if after is not None else []

    def arguments(
        self, state: _State, step: CallStep, ref: MethodRef
    ) -> tuple[tuple[str, Value], ...]:
        func = ref.func
        params = func.params if func.is_staticmethod else func.params[1:]
        out: dict[str, Value] = {k: f"={v}" for k, v in func.param_defaults.items()}
        for index, text in enumerate(step.args):
            if index < len(params):
                out[params[index]] = self.argument(text, state.env, params[index])
        for keyword, text in step.kwargs:
            out[keyword] = self.argument(text, state.env, keyword)
        return tuple(sorted(out.items(), key=lambda i: i[0]))

    def argument(self, text: str, env: Env, param: str) -> Value:
        if not text:
            return self.local(f"<arg {param}>")
        if text[0] in "'\"-0123456789" or text in ("True", "False", "None"):
            return f"={text}"
        if text.startswith("not "):
            inner = self.resolve(text[4:], env)
            return (
                f"!{inner}"
                if isinstance(inner, str) and not inner.startswith("=")
                else self.local(text)
            )
        if text.startswith("("):
            return ("expr", self.count(text, env))  # arithmetic: a count
        return self.resolve(text, env)

    def count(self, text: str, env: Env) -> Count:
        """A loop count, each name it reads standing for its value on this path (an
        argument that is itself a count written out in place)."""
        names: dict[str, str] = {}
        for name in _count_names(text):
            value = self.resolve(name, env)
            if isinstance(value, tuple) and value[0] == "expr":
                inner = value[1]
                assert isinstance(inner, Count)
                text = re.sub(rf"(?<![\w.]){re.escape(name)}(?![\w])", f"({inner.text})", text)
                names.update(inner.names)
            elif isinstance(value, str):
                names[name] = value
            else:
                names[name] = self.local(name)
        return Count(text, tuple(sorted(names.items())))

    def enter(
        self,
        state: _State,
        step: CallStep,
        ctx: _Ctx,
        ref: MethodRef,
        chosen: tuple[Decision, ...],
    ) -> list[_State] | None:
        frame = (id(ctx.cls), ref.func.qualname)
        if ref.func.is_stub or frame in self.stack or self.depth >= MAX_DEPTH:
            return None
        if not self.owner.reaches(ctx, ref):
            return None
        args = self.arguments(state, step, ref)
        summary = self.owner.summary(
            ctx, ref, self.role, args, self.depth + 1, (*self.stack, frame)
        )
        outcomes, _ = summary
        if not outcomes:
            return []
        if len(outcomes) == 1 and not outcomes[0][0] and not outcomes[0][1] and not chosen:
            return None
        suffix = f"@{self.where(step.line)}:{step.col}"
        out = []
        for runs, decisions in outcomes:
            renamed = [
                Decision(d.value + suffix, d.op, d.literal, d.holds, d.text, d.where, d.part)
                if not d.shared
                else d
                for d in decisions
            ]
            after = self.add(state, runs, (*chosen, *renamed))
            if after is not None:
                out.append(after)
        return out

    # -------------------------------------------------------------- blocks
    def bind(self, state: _State, step: BindStep) -> _State:
        env = dict(state.env)
        value = step.value
        held: Value
        if not value:
            held = self.local(f"{step.name}@{step.line}")
        elif value.startswith("="):
            held = value
        elif value == "{}":
            held = ("dict", step.keys)
        elif value.startswith("@"):
            where, _, key = value[1:].partition("[")
            line, _, col = where.partition(":")
            part = self.received.get((int(line), int(col)))
            if part is None:
                held = self.local(f"{step.name}@{step.line}")
            elif key:
                name = key.rstrip("]")
                if name[:1] in ("'", '"'):
                    name = name[1:-1]  # a string key's repr
                held = f"shared:{part}:{name}"
            else:
                held = ("recv", part)
                if PENDING + f"{line}:{col}" in env:
                    env[PENDING_NAME + step.name] = f"{line}:{col}"
        else:
            held = self.resolve(value, state.env)
        if step.test is not None:  # a truth value computed in place: its formula
            held = ("test", (self.freeze(step.test, state.env, step.line), None))
        if not isinstance(held, tuple) or held[0] != "recv":
            env.pop(PENDING_NAME + step.name, None)
        env[step.name] = held
        return _State(state.runs, state.decisions, env)

    def freeze(self, test: Test, env: Env, line: int) -> Test:
        """``test`` with each atom's subject replaced by the value it reads here
        (``#VALUE``), so that a later branch on the name decides on those values."""
        if isinstance(test, Not):
            return Not(self.freeze(test.part, env, line))
        if isinstance(test, (AllOf, AnyOf)):
            return type(test)(tuple(self.freeze(p, env, line) for p in test.parts))
        if test.role is not None:
            return test
        if test.subject.startswith("?"):
            return Atom(f"#{self.local(f'{test.subject}@{line}')}", test.op, test.value)
        value = self.resolve(test.subject, env)
        if isinstance(value, tuple):
            value = f"shared:{value[1]}:" if value[0] == "recv" else self.local(test.subject)
        return Atom(f"#{value}", test.op, test.value)

    def cap(self, states: list[_State]) -> list[_State]:
        states = _dedupe(states)
        if len(states) > MAX_STATES:
            raise _Cut
        return states

    def join(self, origin: _State, outcomes: list[_State], line: int) -> _State:
        """One state for branches that ran no collective and left the function on no
        path: the names they bound hold an unknown value."""
        env = dict(origin.env)
        names = {n for s in outcomes for n, v in s.env.items() if origin.env.get(n) != v}
        for name in names:
            values = {repr(s.env.get(name)) for s in outcomes}
            env[name] = (
                outcomes[0].env[name]
                if len(values) == 1 and name in outcomes[0].env
                else self.local(f"{name}@{line}")
            )
        return _State(origin.runs, origin.decisions, env)

    def block(
        self, steps: tuple[Step, ...], states: list[_State], last: bool = False
    ) -> tuple[list[_State], list[_State]]:
        """(states falling through, states that returned). ``last``: nothing after the
        block in the function may run a collective, so neither may the block's steps
        from :meth:`Schedules.tail` on: how the paths go on there changes nothing."""
        running = states
        exited: list[_State] = []
        tail = self.owner.tail(self.ctx, self.ref, steps) if last else len(steps)
        for index, step in enumerate(steps):
            if not running or index >= tail:
                break
            rest_quiet = last and index + 1 >= tail
            kind = step.__class__
            if kind is CallStep:
                assert isinstance(step, CallStep)
                if step.collective is not None:
                    running = [
                        s for s in (self.collective(s, step) for s in running) if s is not None
                    ]
                    continue
                nxt: list[_State] = []
                for state in running:
                    found = self.call(state, step)
                    nxt += [state] if found is None else found
                running = self.cap(nxt)
            elif kind is BindStep:
                assert isinstance(step, BindStep)
                running = [self.bind(s, step) for s in running]
            elif kind is BranchStep:
                assert isinstance(step, BranchStep)
                nxt = []
                for state in running:
                    ft_then: list[_State] = []
                    ex_then: list[_State] = []
                    ft_else: list[_State] = []
                    ex_else: list[_State] = []
                    for taken in self.branch(state, step.test, True, step.line):
                        ft, ex = self.block(step.body, [taken], rest_quiet)
                        ft_then += ft
                        ex_then += ex
                    for taken in self.branch(state, step.test, False, step.line):
                        ft, ex = self.block(step.orelse, [taken], rest_quiet)
                        ft_else += ft
                        ex_else += ex
                    outcomes = ft_then + ft_else
                    quiet = (
                        ft_then
                        and ft_else
                        and not ex_then
                        and not ex_else
                        and all(s.runs == state.runs for s in outcomes)
                    )
                    if quiet:  # either way the same collectives: nothing to decide
                        nxt.append(self.join(state, outcomes, step.line))
                    else:
                        nxt += outcomes
                        exited += ex_then + ex_else
                running = self.cap(nxt)
            elif kind is LoopStep:
                assert isinstance(step, LoopStep)
                running = self.loop(step, running, exited)
            elif kind is TryStep:
                assert isinstance(step, TryStep)
                ft, ex = self.block(step.body, running)
                exited += ex
                after = ft
                if step.orelse:
                    after, ex = self.block(step.orelse, after)
                    exited += ex
                for handler in step.handlers:
                    ft, ex = self.block(handler, running)
                    exited += ex
                    after = after + ft
                running = self.cap(after)
                if step.finalbody:
                    running, ex = self.block(step.finalbody, running)
                    exited += ex
            elif kind is ExitStep:
                assert isinstance(step, ExitStep)
                if step.kind == "return":
                    exited += running
                running = []
            elif kind is RoleAssertStep:
                assert isinstance(step, RoleAssertStep)
                if step.role != self.role:
                    running = []
            elif kind is AssertStep:
                assert isinstance(step, AssertStep)
                running = [t for s in running for t in self.branch(s, step.test, True, step.line)]
        return running, self.cap(exited)

    def handed_in_loop(
        self, step: LoopStep, state: _State, body: _State, count: Count
    ) -> list[_State]:
        """A loop whose first pass handed a pending receive to an inner step: that pass
        once, then the later passes, walked again from where the first left the names
        (a dict handed again is a step that receives nothing)."""
        first = tuple(Run(r.op, (_first(count), *r.times)) for r in body.runs)
        start = self.add(_consumed(state, body), first, body.decisions)
        if start is None:
            return []
        start.env = _consumed(self.join(state, [state, body], step.line), body).env
        for name, value in body.env.items():
            if name.startswith(PENDING_NAME):
                start.env[name] = value
        again, _ = self.block(step.body, [_State((), (), dict(body.env))])
        out: list[_State] = []
        for later in again:
            runs = tuple(Run(r.op, (_later(count), *r.times)) for r in later.runs)
            after = self.add(start, runs, later.decisions)
            if after is not None:
                out.append(after)
        return out

    def loop(self, step: LoopStep, running: list[_State], exited: list[_State]) -> list[_State]:
        out: list[_State] = []
        for state in running:
            start = _State((), (), dict(state.env))
            ft, ex = self.block(step.body, [start])
            if not ex and all(not s.runs for s in ft):
                joined = self.join(state, ft, step.line) if ft else state
                out.append(joined)
                continue
            if step.count is not None:
                count = self.count(step.count, state.env)
            else:
                count = Count("passes", (("passes", self.local(f"passes@{step.line}")),))
            for body in ft:
                if _consumed(state, body) is not state:
                    out += self.handed_in_loop(step, state, body, count)
                    continue
                runs = tuple(Run(r.op, (count, *r.times)) for r in body.runs)
                after = self.add(state, runs, body.decisions)
                if after is not None:
                    after.env = self.join(state, [state, body], step.line).env
                    out.append(after)
            for body in ex:
                after = self.add(_consumed(state, body), body.runs, body.decisions)
                if after is not None:
                    exited.append(after)
            if step.count is None:
                out.append(state)  # no pass at all
        running = self.cap(out)
        if step.orelse:
            running, ex = self.block(step.orelse, running)
            exited += ex
        return running


def _later(count: Count) -> Count:
    return Count(f"({count.text}) - 1", count.names)


def _first(count: Count) -> Count:
    return Count(f"min({count.text}, 1)", count.names)


def _flush(state: _State) -> _State:
    """``state`` with its pending receives run (see :data:`PENDING`)."""
    keys = [k for k in state.env if k.startswith(PENDING)]
    if not keys:
        return state
    env = dict(state.env)
    runs = list(state.runs)
    for key in keys:
        held = env.pop(key)
        if isinstance(held, tuple) and isinstance(held[1], Collective):
            runs.append(Run(held[1]))
    return _State(tuple(runs), state.decisions, env)


def _consumed(state: _State, body: _State) -> _State:
    """``state`` without the pending receives that a loop's ``body`` handed on (its
    first pass did)."""
    gone = [k for k in state.env if k.startswith(PENDING) and k not in body.env]
    if not gone:
        return state
    env = {k: v for k, v in state.env.items() if k not in gone}
    return _State(state.runs, state.decisions, env)


def _choice(classes: list[Decision]) -> tuple[Decision, ...]:
    """The decision that the attribute holds one of these classes (each named by a
    ``== CLASS`` decision on the same value)."""
    first = classes[0]
    literals = sorted({d.literal for d in classes})
    if len(literals) == 1:
        return (first,)
    literal = "|".join(literals)
    return (Decision(first.value, "in", literal, True, first.text, first.where, first.part),)


def _shown(value: str) -> str:
    """A value's name as a message shows it (``local:driver:/f:x@12`` -> ``x``)."""
    if value.startswith("shared:"):
        return repr(value.split(":", 2)[2]) + " (received)"
    text = value.rsplit(":", 1)[-1] if ":" in value else value
    return text.split("@", 1)[0] or value


def _split(subject: str) -> tuple[str, str]:
    """``"data['k'].x"`` -> ``("data", "['k'].x")``."""
    for index, char in enumerate(subject):
        if char in ".[(":
            return subject[:index], subject[index:]
    return subject, ""


def _key_of(rest: str) -> str | None:
    """``"['k']"`` -> ``"k"`` (a string key read first), else None."""
    if rest.startswith("[") and rest.endswith("]") and rest.count("[") == 1:
        literal = _literal(rest[1:-1])
        if isinstance(literal, str) and rest[1] in "'\"":
            return literal[1:-1]
    return None


def _rank_like(text: str) -> bool:
    last = text.rsplit(".", 1)[-1].removesuffix("()")
    return last in ("rank", "_rank", "tp_rank", "local_rank", "rank_in_group") or (
        last.endswith("_rank") and "driver" not in last
    )


# --------------------------------------------------------------- the part


class Schedules:
    """Collective schedules per entry point and role (a part of a project)."""

    def __init__(
        self, hierarchy: Hierarchy, roles: Roles, constants: Constants, wrappers: Wrappers
    ) -> None:
        self.hierarchy = hierarchy
        self.roles = roles
        self.constants = constants
        self.wrappers = wrappers
        self.contract = hierarchy.contract
        self._summaries: dict[tuple[object, ...], Summary] = {}
        self._bound: dict[int, set[str]] = {}
        self._schedules: dict[tuple[int, int, str], Schedule] = {}
        self._alike: dict[tuple[object, ...], Schedule] = {}
        self._held: dict[tuple[object, ...], list[tuple[ClassFacts, _Ctx]]] = {}
        self._reaches: dict[tuple[object, ...], bool] = {}
        self._reaching: set[tuple[object, ...]] = set()
        self._open: list[tuple[object, ...]] = []
        self._cycles = 0
        self._silent_runners: dict[tuple[int, int], bool] = {}
        self._called: dict[tuple[int, str], set[str]] = {}
        self._tails: dict[tuple[object, ...], int] = {}
        self._steps: dict[tuple[int, int, str], int] = {}
        self._literals: dict[int, str] = {}
        self._delegating: dict[int, list[str]] = {}
        self._unknown: dict[tuple[int, str], bool] = {}
        self._calls: dict[int, tuple[tuple[Step, ...], list[CallStep]]] = {}
        self._names: dict[str, bool] = {}
        self._naming: set[str] = set()
        self._open_names: list[str] = []
        self._name_cycles = 0
        self._by_name: dict[str, list[tuple[Step, ...]]] | None = None
        self._file_names: dict[str, str] = {}

    def class_literal(self, klass: ClassFacts) -> str:
        """A class as a choice names it: its name, with its package where another class
        of the project has the same name."""
        found = self._literals.get(id(klass))
        if found is None:
            named = [c for c in self.hierarchy.all_classes() if c.name == klass.name]
            text = klass.name
            if len(named) > 1:
                text = f"{klass.name} ({PurePath(klass.path).parent.name})"
            found = self._literals[id(klass)] = repr(text)
        return found

    def step_broadcasts(self, klass: ClassFacts, ref: MethodRef) -> int:
        """The broadcasts of one step of an inner worker, the same on every role: how
        the inner worker's own roles pair up is its own schedule's question."""
        key = (id(klass), id(ref.owner), ref.func.qualname)
        found = self._steps.get(key)
        if found is None:
            wrappers = self.wrappers
            found = max(wrappers.inner_step_broadcasts(klass, ref, role) for role in ROLES)
            self._steps[key] = found
        return found

    def file_name(self, path: str) -> str:
        name = self._file_names.get(path)
        if name is None:
            name = self._file_names[path] = PurePath(path).name
        return name

    def holds_unknown_worker(self, cls: ClassFacts, attr: str) -> bool:
        """``self.<attr>`` of ``cls`` holds an object of a class that was not read, built
        with one of the workers ``cls`` holds (``self.scorer =
        BatchExpansionTop1Scorer(self.scorer_worker)`` with the scorer's file unread)."""
        key = (id(cls), attr)
        found = self._unknown.get(key)
        if found is None:
            found = self._unknown[key] = self._holds_unknown_worker(cls, attr)
        return found

    def _holds_unknown_worker(self, cls: ClassFacts, attr: str) -> bool:
        hierarchy = self.hierarchy
        mro = hierarchy.mro(cls)
        names = {n for klass in mro for n in klass.self_attrs.get(attr, ())}
        if not names or any(hierarchy.resolve_class(n, cls.path) for n in names):
            return False
        for klass in mro:
            for method in klass.methods.values():
                for cons in method.constructions:
                    if last_name(cons.callee) not in names:
                        continue
                    held = [n for group in cons.args for n in group]
                    held += [n for _, group in cons.kwargs for n in group]
                    for name in held:
                        if name.startswith(SELF_ATTR):
                            classes = self.wrappers.attr_classes(cls, name[len(SELF_ATTR) :])
                        else:
                            target = hierarchy.resolve_class(name, klass.path)
                            classes = (target,) if target is not None else ()
                        if any(self.wrappers._worker_like(c) for c in classes):
                            return True
        return False

    def call_reaches(self, sub: _Ctx, klass: ClassFacts, ref: MethodRef, name: str) -> bool:
        """A call of ``name`` on an instance of ``klass`` (run as ``sub``) may run a
        collective."""
        if sub.worker and name == self.contract.execute_method:
            return True  # an inner worker's step (its broadcasts are counted)
        return self.reaches(sub, ref)

    def reaches(self, ctx: _Ctx, ref: MethodRef) -> bool:
        """The method (run as ``ctx``) may run a collective, through the calls the
        schedule follows: the others need no walk."""
        if not self.name_reaches(ref.func.name):
            return False  # no method of that name, in any class, runs a collective
        key = (*ctx.key(), id(ref.owner), ref.func.qualname)
        found = self._reaches.get(key)
        if found is not None:
            return found
        if key in self._reaching:
            self._cycles += 1  # a method being asked about: no answer yet
            return False
        self._reaching.add(key)
        cycles = self._cycles
        try:
            result = self._reaches_now(ctx, ref)
        finally:
            self._reaching.discard(key)
        if result or self._cycles == cycles:
            self._reaches[key] = result
        else:
            self._open.append(key)  # a "no" that leaned on a method still being asked
        if not self._reaching:
            # the first question is answered: a "no" means no method it asked about
            # reaches one either (any that did would have made it a "yes")
            if not result:
                self._reaches.update(dict.fromkeys(self._open, False))
            self._open.clear()
        return result

    def name_reaches(self, name: str) -> bool:
        """Some method called ``name``, in any class, may run a collective, asked of
        names alone (a method calling ``self.X.other(...)`` may if a method ``other``
        may): what no method of that name can do needs no walk."""
        if self._by_name is None:
            self._by_name = {}
            for cls in self.hierarchy.all_classes():
                for method in cls.methods.values():
                    self._by_name.setdefault(method.name, []).append(method.steps)
        found = self._names.get(name)
        if found is not None:
            return found
        if name in self._naming:
            self._name_cycles += 1  # a name being asked about: no answer yet
            return False
        self._naming.add(name)
        cycles = self._name_cycles
        found = False
        try:
            for steps in self._by_name.get(name, ()):
                for call in self.calls(steps):
                    callee = call.callee.rsplit(".", 1)[-1]
                    if call.collective is not None or self.name_reaches(callee):
                        found = True
                        break
                if found:
                    break
        finally:
            self._naming.discard(name)
        if found or self._name_cycles == cycles:
            self._names[name] = found
        else:
            self._open_names.append(name)  # a "no" that leaned on an open question
        if not self._naming:  # (as in :meth:`reaches`)
            if not found:
                self._names.update(dict.fromkeys(self._open_names, False))
            self._open_names.clear()
        return found

    def calls(self, steps: tuple[Step, ...]) -> list[CallStep]:
        """The calls among ``steps`` (any depth), found once per block."""
        found = self._calls.get(id(steps))
        if found is None or found[0] is not steps:
            found = self._calls[id(steps)] = (steps, flatten_calls(steps))
        return found[1]

    def _reaches_now(self, ctx: _Ctx, ref: MethodRef) -> bool:
        return any(self.step_reaches(ctx, ref, step) for step in self.calls(ref.func.steps))

    def step_reaches(self, ctx: _Ctx, ref: MethodRef, step: CallStep) -> bool:
        """A call of ``ref`` (run as ``ctx``) may run a collective."""
        if step.collective is not None:
            return True
        parts = step.callee.split(".")
        name = parts[-1]
        if len(parts) == 2 and parts[0] in ("self", "cls", "super()"):
            after = ref.owner if parts[0] == "super()" else None
            target = self.hierarchy.resolve_method(ctx.cls, name, after=after)
            if target is None:
                return False
            if name == self.contract.execute_method and ctx.worker and ctx.part:
                return True
            return not target.func.is_stub and self.reaches(ctx, target)
        if len(parts) == 3 and parts[0] == "self":
            held = self.held(ctx, parts[1])
            if not held:
                return self.holds_unknown_worker(ctx.cls, parts[1])
            for klass, sub in held:
                target = self.hierarchy.resolve_method(klass, name)
                if target is not None and self.call_reaches(sub, klass, target, name):
                    return True
        return False

    def tail(self, ctx: _Ctx, ref: MethodRef, steps: tuple[Step, ...]) -> int:
        """The index in ``steps`` from which none may run a collective."""
        key = (*ctx.key(), id(ref.owner), id(steps))
        found = self._tails.get(key)
        if found is None:
            found = len(steps)
            while found and not self._matters(ctx, ref, steps[found - 1]):
                found -= 1
            self._tails[key] = found
        return found

    def _matters(self, ctx: _Ctx, ref: MethodRef, step: Step) -> bool:
        if isinstance(step, CallStep):
            return self.step_reaches(ctx, ref, step)
        if isinstance(step, (BranchStep, LoopStep)):
            calls = [*self.calls(step.body), *self.calls(step.orelse)]
            return any(self.step_reaches(ctx, ref, call) for call in calls)
        if isinstance(step, TryStep):
            blocks = (step.body, *step.handlers, step.orelse, step.finalbody)
            calls = [call for block in blocks for call in self.calls(block)]
            return any(self.step_reaches(ctx, ref, call) for call in calls)
        return False

    def bound_names(self, func: object) -> set[str]:
        """The local names a function binds (any :class:`BindStep`)."""
        key = id(func)
        found = self._bound.get(key)
        if found is None:
            found = set()
            _bound_in(func.steps, found)  # type: ignore[attr-defined]
            self._bound[key] = found
        return found

    def held(self, ctx: _Ctx, attr: str) -> list[tuple[ClassFacts, _Ctx]]:
        """The classes ``self.<attr>`` of ``ctx`` may hold, each with the context its
        methods run in."""
        key = (*ctx.key(), attr)
        found = self._held.get(key)
        if found is None:
            found = self._held[key] = self._find_held(ctx, attr)
        return found

    def _find_held(self, ctx: _Ctx, attr: str) -> list[tuple[ClassFacts, _Ctx]]:
        roles, hierarchy = self.roles, self.hierarchy
        part = f"{ctx.part}.{attr}" if ctx.part else attr
        if ctx.worker:
            runners = roles.runner_candidates(ctx.cls).get(attr, [])
            if runners:
                if ctx.runner is not None and ctx.runner in runners:
                    runners = [ctx.runner]
                return [(r, _Ctx(r, part, False)) for r in runners]
        slot = ""
        if ctx.worker and ctx.part and attr in self.delegates(ctx.cls):
            part = ctx.part  # the worker's step is the one it hands its request to
            slot = f"{ctx.slot or ctx.part}.{attr}"
        classes = self.wrappers.attr_classes(ctx.cls, attr)
        workers = [
            k for k in classes if self.wrappers._worker_like(k) and ctx.cls not in hierarchy.mro(k)
        ]
        if workers and ctx.holder is not None and not ctx.worker:
            declared = [*workers, *self._declared(ctx.cls, attr)]
            same = self._holders_worker(ctx.cls, ctx.holder, attr, declared)
            if same is not None:
                return same
        out: list[tuple[ClassFacts, _Ctx]] = []
        for klass in classes:
            if klass in workers:
                out.append((klass, _Ctx(klass, part, True, slot=slot)))
            else:
                holder = (ctx.part, ctx.cls) if ctx.worker else ctx.holder
                out.append((klass, _Ctx(klass, part, False, holder=holder)))
        return out

    def _declared(self, cls: ClassFacts, attr: str) -> list[ClassFacts]:
        """The classes ``self.<attr>`` is declared as, before subclasses stand in for a
        base (``self._worker = worker`` with ``worker: ProposerWorkerBase``)."""
        found: list[ClassFacts] = []
        for klass in self.hierarchy.mro(cls):
            names = list(klass.annotations.get(attr, ()))
            for name in klass.self_attrs.get(attr, ()):
                names.append(name)
                for method in klass.methods.values():
                    names += method.param_types.get(name, ())
            for name in names:
                target = self.hierarchy.resolve_class(name, klass.path)
                if target is not None and target not in found:
                    found.append(target)
        return found

    def delegates(self, cls: ClassFacts) -> list[str]:
        """The attributes whose worker's step ``cls``'s step runs (``return
        self.worker.execute_model(req)``)."""
        found = self._delegating.get(id(cls))
        if found is None:
            execute = self.contract.execute_method
            ref = self.hierarchy.resolve_method(cls, execute)
            found = []
            for call in self.calls(ref.func.steps) if ref is not None else ():
                parts = call.callee.split(".")
                if len(parts) != 3 or parts[0] != "self" or parts[2] != execute:
                    continue
                if self.roles.runner_candidates(cls).get(parts[1]):
                    continue  # the runner's step, not another worker's
                held = self.wrappers.attr_classes(cls, parts[1])
                if any(self.wrappers._worker_like(k) and k is not cls for k in held):
                    found.append(parts[1])
            self._delegating[id(cls)] = found
        return found

    def _holders_worker(
        self,
        helper: ClassFacts,
        holder: tuple[str, ClassFacts],
        attr: str,
        classes: list[ClassFacts],
    ) -> list[tuple[ClassFacts, _Ctx]] | None:
        """Which of its holder's workers a helper's worker is. What the holder passed
        where it built the helper says first: ``self.scorer_worker``
        (``BatchExpansionTop1Scorer(scorer_worker=self.scorer_worker)``) is that worker,
        a worker class names the one the holder keeps of it, and what no name says
        (``Top1Proposer(weakref.proxy(self))``) is the holder itself when it is of the
        declared class. Else the one worker the holder keeps under the same name
        (``_scorer_worker``: ``scorer_worker``) or of that class. None: none of them."""
        hierarchy = self.hierarchy
        held_part, held_cls = holder
        inner = self.wrappers.inner_workers(held_cls)

        def kept(name: str) -> list[tuple[ClassFacts, _Ctx]]:
            part = f"{held_part}.{name}" if held_part else name
            return [(k, _Ctx(k, part, True)) for k in inner[name]]

        passed = self._passed(helper, held_cls, attr)
        named: list[ClassFacts] = []
        for name in passed or ():
            if name.startswith(SELF_ATTR):
                if name[len(SELF_ATTR) :] in inner:
                    return kept(name[len(SELF_ATTR) :])
                continue
            target = hierarchy.resolve_class(name, held_cls.path)
            if target is not None and self.wrappers._worker_like(target):
                named.append(target)
        mro = hierarchy.mro(held_cls)
        itself = any(k in mro or held_cls in hierarchy.mro(k) for k in classes)
        if itself and passed is not None and not named:
            return [(held_cls, _Ctx(held_cls, held_part, True))]  # it passed itself
        bare = attr.lstrip("_")
        if bare in inner and not named:
            return kept(bare)
        for related in (
            lambda c, k: c is k,
            lambda c, k: k in hierarchy.mro(c) or c in hierarchy.mro(k),
        ):
            names = [
                name
                for name, held in inner.items()
                if any(related(c, k) for c in held for k in named or classes)
            ]
            if len(names) == 1:
                return kept(names[0])
        return [(held_cls, _Ctx(held_cls, held_part, True))] if itself else None

    def _passed(self, helper: ClassFacts, holder: ClassFacts, attr: str) -> list[str] | None:
        """What ``holder`` passes, where it builds ``helper``, for the parameter that
        ``helper.<attr>`` keeps: the names each such argument may hold
        (``"self.scorer_worker"``, a class, or a call's name such as ``"proxy"``); None
        when no such construction is read."""
        hierarchy = self.hierarchy
        init = hierarchy.resolve_method(helper, "__init__")
        if init is None:
            return None
        kept = set(init.owner.self_attrs.get(attr, ()))
        params = [p for p in init.func.params[1:] if p in kept]
        if not params:
            return None
        param = params[0]
        index = init.func.params.index(param) - 1
        found: list[str] | None = None
        for klass in hierarchy.mro(holder):
            for method in klass.methods.values():
                for cons in method.constructions:
                    built = hierarchy.resolve_class(cons.callee, klass.path)
                    by_keyword = param in {k for k, _ in cons.kwargs}
                    if built is not helper and (built is not None or not by_keyword):
                        continue  # (a class held in a variable counts by its keywords)
                    names = list(cons.args[index]) if 0 <= index < len(cons.args) else []
                    names += [n for k, group in cons.kwargs if k == param for n in group]
                    found = [*(found or []), *names]
        return found

    def summary(
        self,
        ctx: _Ctx,
        ref: MethodRef,
        role: Role,
        args: tuple[tuple[str, Value], ...],
        depth: int,
        stack: tuple[tuple[int, str], ...],
    ) -> Summary:
        key = (
            *ctx.key(),
            id(ref.owner),
            ref.func.qualname,
            role,
            args,
        )
        found = self._summaries.get(key)
        if found is not None:
            if found[1]:
                raise _Cut
            return found
        walk = _Walk(self, ctx, ref, role, depth, stack)
        start = _State((), (), dict(args))
        try:
            ft, ex = walk.block(ref.func.steps, [start], True)
        except _Cut:
            self._summaries[key] = ((), True)
            raise
        ft, ex = [_flush(s) for s in ft], [_flush(s) for s in ex]
        outcomes = tuple(dict.fromkeys((s.runs, s.decisions) for s in (*ft, *ex)))
        # ways that end alike under the same shared values keep the local decisions
        # they share
        by_runs: dict[tuple[tuple[Run, ...], tuple[Decision, ...]], list[tuple[Decision, ...]]]
        by_runs = {}
        for runs, decisions in outcomes:
            shared = tuple(d for d in decisions if d.shared)
            by_runs.setdefault((runs, shared), []).append(decisions)
        merged = tuple(
            (runs, tuple(d for d in ways[0] if all(d in w for w in ways[1:])))
            for (runs, _), ways in by_runs.items()
        )
        result: Summary = (merged, False)
        self._summaries[key] = result
        return result

    # ---------------------------------------------------------------- API
    def schedule(
        self, cls: ClassFacts, runner: ClassFacts | None = None, entry: str | None = None
    ) -> Schedule | None:
        """The schedule of ``cls``'s ``entry`` (the execute method) with ``runner``, per
        role; None when ``cls`` has no such method."""
        name = entry or self.contract.execute_method
        walked = self._walked_runner(cls, runner)
        key = (id(cls), id(walked), name)
        found = self._schedules.get(key)
        if found is not None:
            return found if found.runner is runner else replace(found, runner=runner)
        ref = self.hierarchy.resolve_method(cls, name)
        if ref is None:
            return None
        likeness = self._likeness(cls, walked, name)
        alike = self._alike.get(likeness)
        if alike is not None:  # another class whose step runs the same code alike
            schedule = replace(alike, cls=cls, runner=runner)
            self._schedules[key] = schedule
            return schedule
        ctx = _Ctx(cls, "", True, walked)
        paths: dict[Role, tuple[SchedulePath, ...]] = {}
        partial: dict[Role, bool] = {}
        for role in ROLES:
            walk = _Walk(self, ctx, ref, role, 0, ((id(cls), ref.func.qualname),))
            try:
                ft, ex = walk.block(ref.func.steps, [_State((), (), {})], True)
            except _Cut:  # too many paths to follow: this role's schedule is not known
                paths[role], partial[role] = (), True
                continue
            ft, ex = [_flush(s) for s in ft], [_flush(s) for s in ex]
            paths[role] = tuple(
                dict.fromkeys(SchedulePath(s.runs, s.decisions) for s in (*ft, *ex))
            )
            partial[role] = False
        schedule = Schedule(cls, runner, name, paths, partial)
        self._schedules[key] = schedule
        self._alike[likeness] = schedule
        return schedule

    def _likeness(
        self, cls: ClassFacts, runner: ClassFacts | None, entry: str
    ) -> tuple[object, ...]:
        """What a class's schedule depends on: the methods it resolves under the names
        that may reach a collective (and the classes along its MRO that define them,
        for ``super()``), the classes the attributes those methods call on hold, the
        constants its branches test, and the runner walked. Two classes alike in all of
        it have one schedule."""
        hierarchy = self.hierarchy
        mro = hierarchy.mro(cls)
        names = sorted({n for k in mro for n in k.methods if self.name_reaches(n)} | {entry})
        resolved: list[tuple[str, int]] = []
        attrs: set[str] = set()
        for name in names:
            ref = hierarchy.resolve_method(cls, name)
            if ref is None:
                continue
            resolved.append((name, id(ref.func)))
            for call in self.calls(ref.func.steps):
                parts = call.callee.split(".")
                if len(parts) == 3 and parts[0] == "self":
                    attrs.add(parts[1])
        defining = tuple(id(k) for k in mro if any(n in k.methods for n in names))
        held = tuple(
            (
                attr,
                tuple(id(c) for c in self.wrappers.attr_classes(cls, attr)),
                tuple(id(r) for r in self.roles.runner_candidates(cls).get(attr, ())),
                self.holds_unknown_worker(cls, attr),
            )
            for attr in sorted(attrs)
        )
        constants = tuple(sorted(self.constants.self_bindings(cls).items()))
        switch = self.constants.self_constant(cls, BROADCAST_SWITCH)
        return (tuple(resolved), defining, held, constants, switch, id(runner), entry)

    def _walked_runner(self, cls: ClassFacts, runner: ClassFacts | None) -> ClassFacts | None:
        """The runner to walk ``cls`` with: one whose methods that ``cls`` calls run no
        collective stands for every such runner of ``cls`` (their schedules are the
        same)."""
        if runner is None or not self._silent(cls, runner):
            return runner
        for runners in self.roles.runner_candidates(cls).values():
            for other in runners:
                if self._silent(cls, other):
                    return other
        return runner

    def _silent(self, cls: ClassFacts, runner: ClassFacts) -> bool:
        """No method of ``runner`` that ``cls`` calls on it runs a collective."""
        key = (id(cls), id(runner))
        found = self._silent_runners.get(key)
        if found is None:
            found = True
            for attr, runners in self.roles.runner_candidates(cls).items():
                if runner not in runners:
                    continue
                ctx = _Ctx(runner, attr, False)
                for name in self._called_on(cls, attr):
                    ref = self.hierarchy.resolve_method(runner, name)
                    if ref is not None and self.reaches(ctx, ref):
                        found = False
            self._silent_runners[key] = found
        return found

    def _called_on(self, cls: ClassFacts, attr: str) -> set[str]:
        """The methods ``cls`` calls on ``self.<attr>``."""
        key = (id(cls), attr)
        found = self._called.get(key)
        if found is None:
            prefix = f"self.{attr}."
            found = self._called[key] = {
                call.callee[len(prefix) :]
                for klass in self.hierarchy.mro(cls)
                for method in klass.methods.values()
                for call in self.calls(method.steps)
                if call.callee.startswith(prefix) and "." not in call.callee[len(prefix) :]
            }
        return found

    def disagreements(self, schedule: Schedule) -> list[Disagreement]:
        """The paths of each role that no path of the other role matches under the same
        shared values (see the module's documentation)."""
        if self.constants.self_constant(schedule.cls, BROADCAST_SWITCH) == "False":
            return []  # a single-rank worker: no other rank runs its step
        if any(schedule.partial.values()):
            return []  # a role whose paths were too many to follow
        out: list[Disagreement] = []
        every = [p for paths in schedule.paths.values() for p in paths]
        configurations = _configurations(every[0], [(p, _shared(p)) for p in every[1:]])
        for role, other in (("driver", "non-driver"), ("non-driver", "driver")):
            theirs = list(
                {
                    (p.runs, tuple(sorted(_shared(p).items(), key=lambda i: i[0]))): (p, _shared(p))
                    for p in schedule.paths[other]  # type: ignore[index]
                }.values()
            )
            found: list[Disagreement] = []
            verdicts: dict[tuple[object, ...], _Verdict] = {}
            for path in schedule.paths[role]:  # type: ignore[index]
                if any(d.value == SINGLE_RANK and not d.holds for d in path.decisions):
                    continue  # the driver alone: no other rank to disagree with
                key = (path.runs, frozenset(d for d in path.decisions if d.shared))
                if key not in verdicts:
                    verdicts[key] = _unmatched(path, theirs, configurations)
                verdict = verdicts[key]
                if verdict is not None:
                    closest, site, chosen = verdict
                    found.append(Disagreement(schedule, role, path, closest, site, chosen))  # type: ignore[arg-type]
            for one in found:
                # a path the wrapper's own code selects alike agrees, with the classes
                # chosen alike: a condition inside an inner worker or a helper tells
                # them apart
                mine = _own_decisions(one.path, role)  # type: ignore[arg-type]
                if any(
                    p != one.path
                    and _own_decisions(p, role) == mine  # type: ignore[arg-type]
                    and _under(p, theirs, one.configuration) is None
                    and _compatible(
                        _shared(p), {d.value: frozenset({d}) for d in one.configuration}
                    )
                    for p in schedule.paths[role]  # type: ignore[index]
                ):
                    one = replace(one, inner_local=True)
                out.append(one)
        return out


def _own_decisions(path: SchedulePath, role: Role) -> frozenset[Decision]:
    """The decisions of a path taken in the entry point's own code (not inside an inner
    worker's or a helper's)."""
    return frozenset(d for d in path.decisions if not d.part)


def schedules(project: Project) -> Schedules:
    """The project's schedules (one :class:`Schedules`, made when first asked for)."""
    found = project.memo.get(SCHEDULES)
    if not isinstance(found, Schedules):
        found = Schedules(project.hierarchy, project.roles, project.constants, project.wrappers)
        project.memo[SCHEDULES] = found
    return found


def _bound_in(steps: tuple[Step, ...], out: set[str]) -> None:
    for step in steps:
        if isinstance(step, BindStep):
            out.add(step.name)
        elif isinstance(step, (BranchStep, LoopStep)):
            _bound_in(step.body, out)
            _bound_in(step.orelse, out)
        elif isinstance(step, TryStep):
            for block in (step.body, *step.handlers, step.orelse, step.finalbody):
                _bound_in(block, out)


# -------------------------------------------------------------- comparing


def _flatten(
    path: SchedulePath, values: Mapping[str, object]
) -> list[tuple[tuple[str, str], int, Run]] | None:
    out: list[tuple[tuple[str, str], int, Run]] = []
    for run in path.runs:
        each = run.op.broadcasts(values)
        if each is None:
            return None
        amount = each
        for count in run.times:
            value = count.value(values)
            if value is None:
                return None
            amount *= max(value, 0)
        if not amount:
            continue
        if out and out[-1][0] == run.op.key:
            out[-1] = (run.op.key, out[-1][1] + amount, out[-1][2])
        else:
            out.append((run.op.key, amount, run))
    return out


def path_broadcasts(path: SchedulePath, count: int) -> int | None:
    """The broadcasts ``path`` runs with every loop count's value ``count`` (None: an
    inner step's broadcasts depend on a class not chosen, or a count not evaluated)."""
    flat = _flatten(path, dict.fromkeys(path.count_values(), count))
    return None if flat is None else sum(n for _, n, _ in flat)


def _same_shape(a: SchedulePath, b: SchedulePath) -> bool:
    if len(a.runs) != len(b.runs):
        return False
    for x, y in zip(a.runs, b.runs, strict=True):
        if x.op.key != y.op.key or x.op.each != y.op.each or x.op.each_by != y.op.each_by:
            return False
        if [c.text for c in x.times] != [c.text for c in y.times]:
            return False
        if [c.names for c in x.times] != [c.names for c in y.times]:
            return False
    return True


def _assignments(
    values: Sequence[str], decisions: Sequence[Decision]
) -> Iterable[dict[str, object]]:
    """Assignments of the loop counts' values that the decisions allow."""
    options: list[list[object]] = []
    for value in values:
        on = [d for d in decisions if d.value == value]
        pool: list[object] = list(
            dict.fromkeys([*PROBES, *(c for c in _candidates(on) if type(c) is int)])
        )
        allowed = [v for v in pool if all(_satisfied(d, v) for d in on)]
        if not allowed:
            return
        options.append(allowed)
    for combo in itertools.islice(itertools.product(*options), MAX_ASSIGNMENTS):
        yield dict(zip(values, combo, strict=True))


def _agree(
    a: SchedulePath,
    b: SchedulePath,
    decisions: tuple[Decision, ...],
    configuration: tuple[Decision, ...] = (),
) -> bool:
    if _same_shape(a, b):
        return True
    if any(run.op.kind == UNKNOWN_KIND for run in (*a.runs, *b.runs)):
        return True  # code not read may run anything there
    chosen = {d.value: d.literal for d in configuration}
    values = list(dict.fromkeys([*a.count_values(), *b.count_values()]))
    for assignment in _assignments(values, decisions):
        assignment.update(chosen)
        x, y = _flatten(a, assignment), _flatten(b, assignment)
        if x is None or y is None:
            return True  # a count that cannot be evaluated: nothing is known
        if _match(x, y):
            return True
    return False


def _match(
    x: Sequence[tuple[tuple[str, str], int, Run]], y: Sequence[tuple[tuple[str, str], int, Run]]
) -> bool:
    """The two flattened schedules pair up, collective for collective (an empty stop
    dict pairs with one broadcast of any part)."""
    a = [[key, n] for key, n, _ in x]
    b = [[key, n] for key, n, _ in y]
    i = j = 0
    while i < len(a) and j < len(b):
        (ka, na), (kb, nb) = a[i], b[j]
        assert isinstance(ka, tuple) and isinstance(kb, tuple)
        assert isinstance(na, int) and isinstance(nb, int)
        if ka[0] != kb[0]:
            return False
        if "*" in (ka[1], kb[1]):
            step = 1
        elif ka == kb:
            step = min(na, nb)
        else:
            return False
        a[i][1] = na - step
        b[j][1] = nb - step
        i += a[i][1] == 0
        j += b[j][1] == 0
    return i == len(a) and j == len(b)


def _divergence(
    a: SchedulePath, b: SchedulePath, configuration: tuple[Decision, ...] = ()
) -> tuple[int, BroadcastSite]:
    values: dict[str, object] = {v: 2 for v in (*a.count_values(), *b.count_values())}
    values.update({d.value: d.literal for d in configuration})
    x = _flatten(a, values) or []
    y = _flatten(b, values) or []
    index = 0
    while index < len(x) and index < len(y) and _match(x[index : index + 1], y[index : index + 1]):
        index += 1
    if index < len(x):
        return index, x[index][2].op.site
    if index < len(y):
        return index, y[index][2].op.site
    run = (a.runs or b.runs)[0]
    return index, run.op.site


Shared = dict[str, frozenset[Decision]]
#: The other role's closest path, where they part and the classes chosen; or None.
_Verdict = tuple[SchedulePath, BroadcastSite, tuple[Decision, ...]] | None


_SHARED: dict[int, tuple[SchedulePath, Shared]] = {}


def _shared(path: SchedulePath) -> Shared:
    """The path's decisions on values every rank knows alike, by value (the others
    cannot contradict another role's); found once per path (not to be changed)."""
    known = _SHARED.get(id(path))
    if known is not None and known[0] is path:
        return known[1]
    if len(_SHARED) > 50_000:
        _SHARED.clear()
    found = _SHARED[id(path)] = (path, _shared_now(path))
    return found[1]


def _shared_now(path: SchedulePath) -> Shared:
    out: dict[str, set[Decision]] = {}
    for d in path.decisions:
        if d.shared:
            out.setdefault(d.value, set()).add(d)
    return {value: frozenset(found) for value, found in out.items()}


def _compatible(x: Shared, y: Shared) -> bool:
    """Some values satisfy both paths' shared decisions."""
    if len(y) < len(x):
        x, y = y, x
    for value, found in x.items():
        other = y.get(value)
        if other is not None and other != found and not _satisfiable(found | other):
            return False
    return True


def _configurations(
    path: SchedulePath, others: Sequence[tuple[SchedulePath, Shared]]
) -> list[tuple[Decision, ...]]:
    """Every choice of the classes the attributes hold that the paths tell apart (the
    engine's configuration: the same on every rank, not a value of the step); classes
    that every decision and every inner step treats alike are one choice."""
    literals: dict[str, dict[str, None]] = {}
    decisions = [
        d
        for p in (path, *(o for o, _ in others))
        for d in p.decisions
        if d.value.startswith("class:")
    ]
    steps = [run.op for p in (path, *(o for o, _ in others)) for run in p.runs if run.op.each_by]
    for d in decisions:
        names = d.literal.split("|") if d.op == "in" else [d.literal]
        for name in names:
            literals.setdefault(d.value, {}).setdefault(name, None)
    for op in steps:
        for name, _ in op.each_by:
            literals.setdefault(op.choice, {}).setdefault(name, None)
    if not literals:
        return [()]
    choices: list[list[Decision]] = []
    for value, named in literals.items():
        alike: dict[tuple[object, ...], str] = {}
        for name in named:
            sign: tuple[object, ...] = tuple(
                _satisfied(d, _literal(name)) for d in decisions if d.value == value
            )
            sign += tuple(dict(op.each_by).get(name) for op in steps if op.choice == value)
            alike.setdefault(sign, name)
        choices.append([Decision(value, "==", name, True, "") for name in alike.values()])
    return [tuple(c) for c in itertools.islice(itertools.product(*choices), MAX_CONFIGURATIONS)]


def _under(
    path: SchedulePath,
    others: Sequence[tuple[SchedulePath, Shared]],
    configuration: tuple[Decision, ...],
) -> list[SchedulePath] | None:
    """With the classes chosen so, the other role's paths ``path`` could meet, when none
    of them agrees with it; None when one does, or when the choice contradicts it."""
    base = dict(_shared(path))
    for d in configuration:
        base[d.value] = base.get(d.value, frozenset()) | {d}
    if not all(_satisfiable(found) for found in base.values() if len(found) > 1):
        return None
    possible: list[SchedulePath] = []
    for other, theirs in others:
        if not _compatible(base, theirs):
            continue
        decisions = (*path.decisions, *configuration, *(d for f in theirs.values() for d in f))
        if _agree(path, other, decisions, configuration):
            return None
        possible.append(other)
    return possible


def _unmatched(
    path: SchedulePath,
    others: Sequence[tuple[SchedulePath, Shared]],
    configurations: Sequence[tuple[Decision, ...]] = (),
) -> _Verdict:
    """The other role's closest path, where they part and the classes chosen, when for
    some choice of the classes the attributes hold no path of the other role agrees
    with ``path`` under the same shared values; None when one always does, or when none
    is possible under them."""
    mine = _shared(path)
    classes = {d for d in path.decisions if d.value.startswith("class:")}
    steps = any(run.op.each_by for run in path.runs)
    for other, theirs in others:
        # the same collectives, allowed by the same values and taking no class the
        # path does not: they agree whatever the classes
        if (
            not steps
            and _same_shape(path, other)
            and _compatible(mine, theirs)
            and all(
                d in classes for f in theirs.values() for d in f if d.value.startswith("class:")
            )
        ):
            return None
    for configuration in configurations or _configurations(path, others):
        possible = _under(path, others, configuration)
        if possible:
            closest = max(possible, key=lambda o: _divergence(path, o, configuration)[0])
            site = _divergence(path, closest, configuration)[1]
            chosen = tuple(d for d in configuration if d.value not in mine)
            return closest, site, chosen
    return None
