"""Wrapper workers: a worker whose step (``execute_model``) runs other workers' steps,
and the broadcasts of one engine step through it.

vLLM's speculative-decoding worker is the example: it broadcasts its own control dict,
then runs its proposer worker's ``execute_model`` once per lookahead slot and its
scorer worker's once more, and each of those broadcasts. The per-worker count of
:mod:`~runnercheck.analysis.stepwalk` sees one broadcast in each; the engine step runs
``1 + k + 1``.

The classes an attribute may hold (:meth:`Wrappers.attr_classes`) come from
``self.X = Name(...)``, from the annotation of the parameter assigned (``self.X = x``
with ``x: T``), from a class-level annotation, and from the calls that construct the
class (``cls(proposer, scorer)`` in a factory classmethod, with ``proposer``'s classes
known from its assignments or its annotation); a class whose step is abstract stands
for its concrete subclasses. Each path of the step is a sum of :class:`Term`; a loop
``for _ in range(n)`` multiplies its body by ``n``, kept as text and renamed through
the calls' arguments (``sampler_output(req, num_lookahead_slots)`` turns its
``range(sample_len)`` into ``num_lookahead_slots``).
"""

from __future__ import annotations

import ast
import re
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass

from runnercheck.analysis.bindings import SELF_ATTR
from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.model import (
    BindStep,
    BranchStep,
    CallStep,
    ClassFacts,
    ConstructionFacts,
    ExitStep,
    FunctionFacts,
    LoopStep,
    Role,
    RoleAssertStep,
    Step,
    TryStep,
)
from runnercheck.analysis.roles import Roles
from runnercheck.analysis.stepwalk import ROLES, BroadcastSite, StepWalk
from runnercheck.analysis.syntax import last_name, unparse

#: The value every symbolic loop count takes when paths are compared.
PROBE = 4
#: Paths kept per block (the ones with the most broadcasts at :data:`PROBE`).
MAX_PATHS = 32
#: How deep calls are followed from the wrapper's step.
MAX_DEPTH = 10

#: The keyword an inner worker's step takes its dict by, when the caller received it
#: already (a wrapper that reads its own values from that dict first): that step then
#: makes one broadcast less, the caller's receive being its first.
HANDED = "received"

_NAME = re.compile(r"[A-Za-z_]\w*")
_DOTTED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*")
_KEYED = re.compile(r"[A-Za-z_]\w*(\.[A-Za-z_]\w*)*\[('[^'\\]*'|\"[^\"\\]*\")\]")


@dataclass(frozen=True)
class Term:
    """The broadcasts of one call on a step path: ``each`` per run, run once per value
    of every loop count in ``times``."""

    times: tuple[str, ...]
    each: int
    #: ``"SpecDecodeWorker"`` for the wrapper's own broadcast, else the attribute path
    #: and class of the inner worker (``"proposer_worker: MultiStepWorker"``).
    label: str
    #: An inner worker's step, not the wrapper's own broadcast.
    inner: bool
    #: The broadcast (own) or the inner ``execute_model`` call.
    site: BroadcastSite
    #: An own broadcast that sends a dict (not only receives, not the empty stop signal).
    sends: bool = False

    def value(self, values: Mapping[str, int]) -> int:
        total = self.each
        for text in self.times:
            total *= max(evaluate(text, values), 0)
        return total


@dataclass(frozen=True)
class StepPath:
    """One path of a step: its broadcasts, in order."""

    terms: tuple[Term, ...] = ()

    def __add__(self, other: StepPath) -> StepPath:
        return StepPath(self.terms + other.terms)

    def times(self, count: str) -> StepPath:
        return StepPath(tuple(Term((count, *t.times), *_rest(t)) for t in self.terms))

    def count(self, values: Mapping[str, int] | None = None) -> int:
        """Broadcasts on this path with the loop counts' names bound to ``values``
        (every name :data:`PROBE` when None)."""
        return sum(t.value(values if values is not None else _Probe()) for t in self.terms)

    @property
    def own(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if not t.inner)

    @property
    def inner(self) -> tuple[Term, ...]:
        return tuple(t for t in self.terms if t.inner)

    @property
    def symbolic(self) -> bool:
        return any(t.times for t in self.terms)

    def describe(self) -> str:
        """``1 + max(num_lookahead_slots, 1)·1 (proposer_worker: MultiStepWorker) + 1
        (scorer_worker: Worker)``: the terms in order, equal neighbours joined."""
        parts: list[tuple[tuple[str, ...], str, int]] = []
        for term in self.terms:
            if parts and parts[-1][0] == term.times and parts[-1][1] == term.label:
                times, label, each = parts[-1]
                parts[-1] = (times, label, each + term.each)
            else:
                parts.append((term.times, term.label, term.each))
        out = []
        for times, label, each in parts:
            factor = "·".join(_factor(t) for t in times)
            amount = f"{factor}·{each}" if factor else str(each)
            out.append(f"{amount} ({label})")
        return " + ".join(out) or "0"


def _factor(text: str) -> str:
    """A loop count as a factor: an operation in parentheses (``(k - 1)·1``)."""
    try:
        parsed = ast.parse(text, mode="eval").body
    except SyntaxError:
        return text
    bare = isinstance(parsed, ast.BinOp) and not text.startswith("(")
    return f"({text})" if bare else text


def _rest(term: Term) -> tuple[int, str, bool, BroadcastSite, bool]:
    return term.each, term.label, term.inner, term.site, term.sends


class _Probe(dict[str, int]):
    def __missing__(self, key: str) -> int:
        return PROBE


def evaluate(text: str, values: Mapping[str, int]) -> int:
    """The value of a loop count (names, dotted names, integers, ``+ - * //``,
    ``max``/``min``);
    raises ValueError when it is something else or names a value not given."""
    try:
        parsed = compile(text, "<count>", "eval", ast.PyCF_ONLY_AST)
    except SyntaxError as exc:
        raise ValueError(f"not a count: {text!r}") from exc
    assert isinstance(parsed, ast.Expression)
    return _eval(parsed.body, values, text)


def _eval(node: ast.expr, values: Mapping[str, int], text: str) -> int:
    if isinstance(node, ast.Constant) and isinstance(node.value, int):
        return int(node.value)
    if isinstance(node, ast.Name | ast.Attribute | ast.Subscript):
        # a dotted name (``self._num_spec_prefill_steps``) or a key of one
        # (``data['num_lookahead_slots']``) is a value like a plain one
        name = unparse(node)
        if not _DOTTED.fullmatch(name) and not _KEYED.fullmatch(name):
            raise ValueError(f"not a count: {text!r}")
        try:
            return values[name]
        except KeyError:
            raise ValueError(f"no value for {name!r} in {text!r}") from None
    if isinstance(node, ast.BinOp):
        a, b = _eval(node.left, values, text), _eval(node.right, values, text)
        if isinstance(node.op, ast.Add):
            return a + b
        if isinstance(node.op, ast.Sub):
            return a - b
        if isinstance(node.op, ast.Mult):
            return a * b
        if isinstance(node.op, ast.FloorDiv) and b:
            return a // b
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id in ("max", "min")
        and node.args
        and not node.keywords
    ):
        args = [_eval(a, values, text) for a in node.args]
        return max(args) if node.func.id == "max" else min(args)
    raise ValueError(f"not a count: {text!r}")


@dataclass(frozen=True)
class WrapperStep:
    """The paths of one ``execute_model`` call of a wrapper worker, per role."""

    worker: ClassFacts
    #: Attribute -> the worker classes it may hold (the inner workers).
    inner: Mapping[str, tuple[ClassFacts, ...]]
    paths: Mapping[Role, tuple[StepPath, ...]]

    def most(self, role: Role) -> StepPath:
        """The path with the most broadcasts (loop counts at :data:`PROBE`)."""
        return max(self.paths[role], key=lambda p: p.count(), default=StepPath())

    def counts(self, role: Role, values: Mapping[str, int]) -> set[int]:
        return {path.count(values) for path in self.paths[role]}

    def control_paths(self) -> list[StepPath]:
        """Paths (any role) where an own broadcast of the wrapper comes before an inner
        worker's step that broadcasts: the control dict the inner dict could carry."""
        found: list[StepPath] = []
        for role in ROLES:
            for path in self.paths[role]:
                first_own = next((i for i, t in enumerate(path.terms) if not t.inner), None)
                if first_own is None:
                    continue
                if any(t.inner and t.each > 0 for t in path.terms[first_own:]):
                    if path not in found:
                        found.append(path)
        return found


def representative(paths: Iterable[StepPath]) -> StepPath | None:
    """The path to describe: the most broadcasts among paths that run each inner call
    (per label) in one place, since two call sites of the same inner worker on one path
    are most often two exclusive branches on the same condition; else the most."""
    paths = list(paths)

    def plain(path: StepPath) -> bool:
        labels = [t.label for t in path.inner]
        return len(labels) == len(set(labels))

    pool = [p for p in paths if plain(p)] or paths
    return max(pool, key=lambda p: p.count(), default=None)


@dataclass(frozen=True)
class _Context:
    """Whose code a walk is in: the wrapper (``label`` None), an inner worker, or a helper
    object the wrapper holds (``worker`` False)."""

    cls: ClassFacts
    label: str | None
    worker: bool


Paths = tuple[StepPath, ...]
_EMPTY: Paths = (StepPath(),)


def _keep(paths: Iterable[StepPath]) -> Paths:
    unique = list(dict.fromkeys(paths))
    if len(unique) > MAX_PATHS:
        unique = sorted(unique, key=lambda p: -p.count())[:MAX_PATHS]
    return tuple(unique)


def _then(running: Paths, more: Paths) -> Paths:
    return _keep(a + b for a in running for b in more)


def _unique(classes: Iterable[ClassFacts]) -> list[ClassFacts]:
    return list({id(c): c for c in classes}.values())


class Wrappers:
    """Steps through wrapper workers and the workers they hold (a part of a project)."""

    def __init__(self, hierarchy: Hierarchy, roles: Roles, steps: StepWalk) -> None:
        self.hierarchy = hierarchy
        self.roles = roles
        self.steps = steps
        self.contract = hierarchy.contract
        self._attr_memo: dict[tuple[int, str], tuple[ClassFacts, ...]] = {}
        self._constructions: dict[str, list[tuple[ConstructionFacts, str, ClassFacts | None]]]
        self._constructions = {}
        self._indexed = False
        self._wrapper_memo: dict[int, WrapperStep | None] = {}
        self._sub_memo: dict[tuple[object, ...], tuple[Paths, Paths]] = {}
        self._delegating: set[tuple[int, str, Role]] = set()

    # --------------------------------------------------------- attributes
    def _index_constructions(self) -> None:
        if self._indexed:
            return
        self._indexed = True
        for module in self.hierarchy.modules.values():
            owners: list[tuple[ClassFacts | None, Iterable[FunctionFacts]]] = [
                (None, module.functions.values())
            ]
            owners += [(c, c.methods.values()) for c in module.classes.values()]
            for owner, funcs in owners:
                for func in funcs:
                    for cons in func.constructions:
                        name = last_name(cons.callee)
                        if cons.callee == "cls" and owner is not None:
                            name = owner.name
                        entry = (cons, module.path, owner)
                        self._constructions.setdefault(name, []).append(entry)

    def _named(self, names: Iterable[str], klass: ClassFacts) -> list[ClassFacts]:
        found: list[ClassFacts] = []
        for name in names:
            if name.startswith(SELF_ATTR):
                found += self.attr_classes(klass, name[len(SELF_ATTR) :])
                continue
            target = self.hierarchy.resolve_class(name, klass.path)
            if target is not None:
                found.append(target)
        return found

    def _constructed_with(self, klass: ClassFacts, param: str) -> list[ClassFacts]:
        """Classes passed as ``param`` of ``klass.__init__`` where ``klass`` is built."""
        init = self.hierarchy.resolve_method(klass, "__init__")
        if init is None or param not in init.func.params:
            return []
        index = init.func.params.index(param) - 1  # after self
        self._index_constructions()
        found: list[ClassFacts] = []
        for cons, path, owner in self._constructions.get(klass.name, ()):
            if cons.callee == "cls":
                if owner is None or klass not in self.hierarchy.mro(owner):
                    continue
            elif self.hierarchy.resolve_class(cons.callee, path) is not klass:
                continue
            held: tuple[str, ...] = ()
            if 0 <= index < len(cons.args):
                held = cons.args[index]
            held += tuple(n for k, names in cons.kwargs if k == param for n in names)
            context = owner if owner is not None else klass
            for target in self._named(held, context):
                if target not in found:
                    found.append(target)
        return found

    def attr_classes(self, cls: ClassFacts, attr: str) -> tuple[ClassFacts, ...]:
        """The classes ``self.<attr>`` of ``cls`` may hold; an abstract worker stands for
        its concrete subclasses when nothing concrete is known."""
        key = (id(cls), attr)
        if key in self._attr_memo:
            return self._attr_memo[key]
        self._attr_memo[key] = ()  # a cycle adds nothing
        found: list[ClassFacts] = []
        for klass in self.hierarchy.mro(cls):
            for name in klass.self_attrs.get(attr, ()):
                target = self.hierarchy.resolve_class(name, klass.path)
                if target is not None:
                    found.append(target)
                    continue
                for method in klass.methods.values():
                    if name in method.params:
                        found += self._named(method.param_types.get(name, ()), klass)
                        if method.name == "__init__":
                            found += self._constructed_with(klass, name)
            found += self._named(klass.annotations.get(attr, ()), klass)
        unique = _unique(found)
        concrete = [c for c in unique if not self._abstract_step(c)]
        if not concrete:
            concrete = [s for c in unique for s in self._stand_ins(c, cls)]
        result = tuple(_unique(concrete))
        self._attr_memo[key] = result
        return result

    def _worker_like(self, cls: ClassFacts) -> bool:
        """A worker, or one of the configured worker bases itself (vLLM 0.7+'s
        ``WorkerBase`` is a plain class, not an ABC: it stands for its subclasses)."""
        return self.roles.is_worker(cls) or cls.name in self.contract.worker_bases

    def _abstract_step(self, cls: ClassFacts) -> bool:
        if not self._worker_like(cls):
            return False
        ref = self.hierarchy.resolve_method(cls, self.contract.execute_method)
        return ref is None or ref.func.is_stub or ref.func.is_abstract

    def _walking(self, cls: ClassFacts) -> bool:
        """A wrapper whose step is being walked (it is no delegate's target)."""
        return id(cls) in self._wrapper_memo and self._wrapper_memo[id(cls)] is None

    def _stand_ins(self, base: ClassFacts, holder: ClassFacts) -> list[ClassFacts]:
        """The subclasses a worker base held by ``holder`` stands for: those with a
        concrete step, less the holder's own kind; those that run a step themselves
        (not through another worker they hold: wrappers, delegates) when there are any."""
        # a class abstract for other reasons still has a step to count (vLLM 0.7+'s
        # LocalOrDistributedWorkerBase, whose concrete Worker lives in an unread file)
        subs = [
            c
            for c in self.hierarchy.all_classes()
            if c is not base
            and base in self.hierarchy.mro(c)
            and holder not in self.hierarchy.mro(c)
            and not self._abstract_step(c)
        ]
        leaves = [c for c in subs if not self.inner_workers(c)]
        return leaves or subs

    def inner_workers(self, cls: ClassFacts) -> dict[str, tuple[ClassFacts, ...]]:
        """Attributes of ``cls`` that hold other workers."""
        out: dict[str, tuple[ClassFacts, ...]] = {}
        attrs = {
            a for klass in self.hierarchy.mro(cls) for a in (*klass.self_attrs, *klass.annotations)
        }
        for attr in sorted(attrs):
            held = tuple(
                c
                for c in self.attr_classes(cls, attr)
                if self._worker_like(c) and cls not in self.hierarchy.mro(c)
            )
            if held:
                out[attr] = held
        return out

    # --------------------------------------------------------- the walk
    def wrapper_step(self, cls: ClassFacts) -> WrapperStep | None:
        """The broadcasts of one step of ``cls`` through the inner workers' steps it
        runs, per role; None when its step runs no inner worker's step."""
        if id(cls) in self._wrapper_memo:
            return self._wrapper_memo[id(cls)]
        self._wrapper_memo[id(cls)] = None
        result: WrapperStep | None = None
        inner = self.inner_workers(cls) if self.roles.is_worker(cls) else {}
        ref = self.hierarchy.resolve_method(cls, self.contract.execute_method)
        if inner and ref is not None:
            context = _Context(cls, None, True)
            paths: dict[Role, Paths] = {}
            for role in ROLES:
                through, exited = self._walk_method(context, ref, role, {}, (), 0)
                paths[role] = _keep((*through, *exited))
            if any(p.inner for ps in paths.values() for p in ps):
                result = WrapperStep(cls, inner, paths)
        self._wrapper_memo[id(cls)] = result
        return result

    def _walk_method(
        self,
        ctx: _Context,
        ref: MethodRef,
        role: Role,
        names: Mapping[str, str],
        stack: tuple[tuple[int, str], ...],
        depth: int,
    ) -> tuple[Paths, Paths]:
        key = (id(ctx.cls), ctx.label, id(ref.owner), ref.func.qualname, role, *names.items())
        memo = self._sub_memo.get(key)
        if memo is not None:
            return memo
        frame = (id(ctx.cls), ref.func.qualname)
        if ref.func.is_stub or frame in stack or depth > MAX_DEPTH:
            return _EMPTY, ()
        walker = _Walker(self, ctx, ref, role, names, (*stack, frame), depth)
        result = walker.block(ref.func.steps, _EMPTY)
        self._sub_memo[key] = result
        return result

    def inner_step_broadcasts(self, cls: ClassFacts, ref: MethodRef, role: Role) -> int:
        """Broadcasts of one ``execute_model`` of an inner worker on ``role``'s path (the
        most over the runners it may hold)."""
        runners: list[ClassFacts | None] = [
            r for rs in self.roles.runner_candidates(cls).values() for r in rs
        ]
        best = 0
        for runner in runners or [None]:
            counted = self.steps._count_function(cls, ref, role, runner)
            if counted is not None:
                best = max(best, counted.count)
        if not best:
            best = self._delegated_broadcasts(cls, ref, role)
        return best

    def _delegated_broadcasts(self, cls: ClassFacts, ref: MethodRef, role: Role) -> int:
        """A step that hands the request to a worker it holds (``return
        self.worker.execute_model(req)``, vLLM 0.7+'s ``DelegateWorkerBase``): the most
        broadcasts of the held workers' steps. A class already being counted (a cycle
        through a wrapper) adds nothing."""
        key = (id(cls), "<delegate>", role)
        if key in self._delegating:
            return 0
        self._delegating.add(key)
        try:
            best = 0
            execute = self.contract.execute_method
            for attr in _delegate_attrs(ref.func.steps, execute):
                for klass in self.attr_classes(cls, attr):
                    if not self.roles.is_worker(klass) or klass is cls:
                        continue
                    if self._walking(klass):
                        continue  # a wrapper being walked: its step is not a delegate's
                    inner = self.hierarchy.resolve_method(klass, execute)
                    if inner is not None:
                        best = max(best, self.inner_step_broadcasts(klass, inner, role))
            return best
        finally:
            self._delegating.discard(key)


def _calls(steps: Iterable[Step]) -> Iterator[CallStep]:
    """Every call among ``steps``, at any depth, in source order."""
    for step in steps:
        if isinstance(step, CallStep):
            yield step
        elif isinstance(step, BranchStep | LoopStep):
            yield from _calls((*step.body, *step.orelse))
        elif isinstance(step, TryStep):
            yield from _calls((*step.body, *[s for h in step.handlers for s in h]))
            yield from _calls((*step.orelse, *step.finalbody))


def _delegate_attrs(steps: Iterable[Step], execute: str) -> list[str]:
    """``X`` of every ``self.X.<execute>(...)`` call among ``steps`` (any depth)."""
    found: list[str] = []
    for step in _calls(steps):
        parts = step.callee.split(".")
        if len(parts) == 3 and parts[0] == "self" and parts[2] == execute:
            if parts[1] not in found:
                found.append(parts[1])
    return found


def handed_receives(func: FunctionFacts) -> dict[tuple[int, int], str]:
    """The receives of ``func`` (``(line, col)`` -> the name bound) whose dict it hands
    to an inner worker's step (``self.X.execute_model(received=<name>)``): that step's
    first broadcast, received ahead of it."""
    known = _HANDED_MEMO.get(id(func))
    if known is not None and known[0] is func:
        return known[1]
    if len(_HANDED_MEMO) > 50_000:
        _HANDED_MEMO.clear()
    found = _HANDED_MEMO[id(func)] = (func, _handed_receives(func))
    return found[1]


_HANDED_MEMO: dict[int, tuple[FunctionFacts, dict[tuple[int, int], str]]] = {}


def _handed_receives(func: FunctionFacts) -> dict[tuple[int, int], str]:
    handed = {
        text for step in _calls(func.steps) for keyword, text in step.kwargs if keyword == HANDED
    }
    if not handed:
        return {}
    out: dict[tuple[int, int], str] = {}
    for step in _binds(func.steps):
        if step.name in handed and step.value.startswith("@") and "[" not in step.value:
            line, _, col = step.value[1:].partition(":")
            if line.isdigit() and col.isdigit():
                out[(int(line), int(col))] = step.name
    return out


def _binds(steps: Iterable[Step]) -> Iterator[BindStep]:
    for step in steps:
        if isinstance(step, BindStep):
            yield step
        elif isinstance(step, BranchStep | LoopStep):
            yield from _binds((*step.body, *step.orelse))
        elif isinstance(step, TryStep):
            yield from _binds((*step.body, *[s for h in step.handlers for s in h]))
            yield from _binds((*step.orelse, *step.finalbody))


def receive_lines(cls: ClassFacts) -> frozenset[int]:
    """Lines of the step broadcasts in ``cls``'s own methods that only receive (no dict:
    a non-driver rank's receive)."""
    return frozenset(
        step.line
        for method in cls.methods.values()
        for step in _calls(method.steps)
        if step.step_broadcast
        and not step.sends
        and (step.line, step.col) not in handed_receives(method)
    )


class _Walker:
    """One method's walk: paths through its steps as :class:`StepPath` sets."""

    def __init__(
        self,
        project: Wrappers,
        ctx: _Context,
        ref: MethodRef,
        role: Role,
        names: Mapping[str, str],
        stack: tuple[tuple[int, str], ...],
        depth: int,
    ) -> None:
        self.p = project
        self.ctx = ctx
        self.ref = ref
        self.role = role
        self.names = names
        self.stack = stack
        self.depth = depth

    def rename(self, text: str) -> str:
        if not self.names:
            return text
        return _NAME.sub(lambda m: self.names.get(m.group(0), m.group(0)), text)

    def site(self, step: CallStep) -> BroadcastSite:
        func = self.ref.func
        return BroadcastSite(func.path, step.line, step.col, func.qualname, step.callee)

    def bindings(self, step: CallStep, ref: MethodRef) -> dict[str, str]:
        """Callee parameter -> the caller's text, for arguments passed by name."""
        params = ref.func.params
        skip = 0 if ref.func.is_staticmethod else 1
        out: dict[str, str] = {}
        for index, name in enumerate(step.args):
            if name and skip + index < len(params):
                out[params[skip + index]] = self.rename(name)
        for keyword, name in step.kwargs:
            if name and keyword in params:
                out[keyword] = self.rename(name)
        return out

    def call(self, step: CallStep) -> Paths | None:
        """The paths of one call (None: nothing to count)."""
        p, ctx = self.p, self.ctx
        if step.collective is not None:
            if not step.step_broadcast:
                return None
            if (step.line, step.col) in handed_receives(self.ref.func):
                return None  # the first broadcast of the inner step it is handed to
            own = ctx.label is None
            label = ctx.cls.name if own else ctx.label or ctx.cls.name
            sends = step.sends and not step.sends_empty
            return (
                StepPath(
                    (Term((), 1, label, not own, self.site(step), sends),),
                ),
            )
        parts = step.callee.split(".")
        name = parts[-1]
        execute = p.contract.execute_method
        if len(parts) == 2 and parts[0] in ("self", "cls", "super()"):
            after = self.ref.owner if parts[0] == "super()" else None
            ref = p.hierarchy.resolve_method(ctx.cls, name, after=after)
            if ref is None:
                return None
            if name == execute and ctx.worker:
                if ctx.label is None:
                    return None  # the wrapper's own step again: a recursion
                each = p.inner_step_broadcasts(ctx.cls, ref, self.role)
                term = Term((), each, ctx.label, True, self.site(step))
                return (StepPath((term,)),)
            return self.enter(ctx, ref, step)
        if len(parts) == 3 and parts[0] == "self":
            options: list[StepPath] = []
            held = p.attr_classes(ctx.cls, parts[1])
            prefix = f"{ctx.label}." if ctx.label and not ctx.worker else ""
            best: Term | None = None
            for klass in held:
                worker = p.roles.is_worker(klass) and ctx.cls not in p.hierarchy.mro(klass)
                label = f"{prefix}{parts[1]}: {klass.name}"
                ref = p.hierarchy.resolve_method(klass, name)
                if ref is None:
                    continue
                if worker and name == execute:
                    each = p.inner_step_broadcasts(klass, ref, self.role)
                    if best is None or each > best.each:
                        best = Term((), each, label, True, self.site(step))
                    continue
                sub = _Context(klass, label if worker else f"{prefix}{parts[1]}", worker)
                found = self.enter(sub, ref, step)
                if found is not None:
                    options += found
            if best is not None:
                options.append(StepPath((best,)))
            return _keep(options) if options else None
        return None

    def enter(self, ctx: _Context, ref: MethodRef, step: CallStep) -> Paths | None:
        through, exited = self.p._walk_method(
            ctx, ref, self.role, self.bindings(step, ref), self.stack, self.depth + 1
        )
        paths = _keep((*through, *exited))
        return None if paths == _EMPTY else paths

    def block(self, steps: tuple[Step, ...], start: Paths) -> tuple[Paths, Paths]:
        """(paths falling through the block, paths that returned)."""
        running: Paths = start
        exited: list[StepPath] = []
        role = self.role
        for step in steps:
            if not running:
                break
            if isinstance(step, CallStep):
                found = self.call(step)
                if found is not None:
                    running = _then(running, found)
            elif isinstance(step, BranchStep):
                through: list[StepPath] = []
                for body, branch_role in (
                    (step.body, step.then_role),
                    (step.orelse, step.else_role),
                ):
                    if branch_role is None or branch_role == role:
                        ft, ex = self.block(body, running)
                        through += ft
                        exited += ex
                running = _keep(through)
            elif isinstance(step, LoopStep):
                ft, ex = self.block(step.body, _EMPTY)
                exited += _then(running, ex)
                if step.count is not None:
                    count = self.rename(step.count)
                    running = _then(running, tuple(path.times(count) for path in ft))
                else:
                    running = _keep((*running, *_then(running, ft)))
                if step.orelse:
                    ft, ex = self.block(step.orelse, running)
                    exited += ex
                    running = ft
            elif isinstance(step, TryStep):
                ft, ex = self.block(step.body, running)
                exited += ex
                after = list(ft)
                if step.orelse:
                    ft, ex = self.block(step.orelse, ft)
                    exited += ex
                    after = list(ft)
                for handler in step.handlers:
                    ft, ex = self.block(handler, running)
                    exited += ex
                    after += ft
                running = _keep(after)
                if step.finalbody:
                    ft, ex = self.block(step.finalbody, running)
                    exited += ex
                    running = ft
            elif isinstance(step, ExitStep):
                if step.kind == "return":
                    exited += running
                running = ()
            elif isinstance(step, RoleAssertStep):
                if step.role != role:
                    running = ()
        return running, _keep(exited)
