"""One worker base for the workers of a directory whose merged steps differ only in
what they send.

Two or more workers that share one worker input share one step when, split
(:func:`.worker_step.split_step`), their step methods are the same: the driver
builds the worker input, prepares the model input, broadcasts once, runs the cache
operation and the model and wraps the output; the other ranks receive, handle the stop
signal, rebuild both inputs, run the same cache operation and the model and return the
same values. Only the worker input they build (``prepare_worker_input``) and the cache
operation they run on it (``execute_worker``) may differ. Those workers then derive
from a generated ``LocalOrDistributedWorkerBase`` that holds the step once (the shape
vLLM 0.5.1 adopted), next to the class they all derive from (``WorkerBase``) or, where
that is not one of the run's files, in a created ``worker_base.py``; each keeps its two
methods.

A worker whose step differs keeps its own and gets one note naming the first
difference of its step's semantics against a worker that shares (or, when none does,
another worker of the directory): how the driver meets a missing request, whether the
other ranks check the stop signal and what they return then, and where the non-driver
path lives; else the first method that differs.
"""

from __future__ import annotations

import ast
import functools
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from codemods.facts.groups import ClassRef
from codemods.merge_broadcasts.runner_model import line_in_method, methods
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.merge_broadcasts.worker_step import EXECUTE, PREPARE, NotSplit, Split, split_step
from codemods.toolkit import cstutil
from codemods.toolkit.positions import Lines
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract

BASE_NAME = "LocalOrDistributedWorkerBase"
BASE_MODULE = "worker_base"


@dataclass
class Member:
    """A worker of the directory, rewritten by the merge."""

    ref: ClassRef
    plan: WorkerPlan
    #: the class as the merge rewrote it
    cdef: cst.ClassDef
    #: its module as read (its imports) and the line index of that module
    module: cst.Module
    lines: Lines
    #: (module, class) of the generic runner parent the rewrite annotates it with
    generic: list[tuple[Path, str]] = field(default_factory=list)
    split: Split | None = None
    why_not: NotSplit | None = None
    traits: list[_Trait] | None = None
    #: the ``ast`` facts of the class as read (its methods' lines)
    facts: ClassFacts | None = None


@dataclass
class Hoist:
    """The directory's shared step: who shares it, where it goes, and the notes."""

    members: dict[ClassRef, Split] = field(default_factory=dict)
    #: the module that gets the base, its parent class (None: none), whether it exists
    path: Path | None = None
    parent: str | None = None
    exists: bool = False
    #: the class statement of the base and the imports it needs
    base: cst.ClassDef | None = None
    #: the annotation the base declares for each ``self.<attribute>`` its step reads
    attributes: dict[str, str] = field(default_factory=dict)
    plain_imports: list[str] = field(default_factory=list)
    from_imports: list[tuple[str, list[str]]] = field(default_factory=list)
    #: per worker that keeps its own step: (line of its file as read, note)
    notes: dict[ClassRef, list[tuple[int, str]]] = field(default_factory=dict)


def plan_hoist(
    members: list[Member],
    project: Project,
    contract: Contract,
    sources: Mapping[Path, bytes],
    import_path: Callable[[Path, Path], str],
    input_path: Path,
    runner_base: tuple[str, Path] | None = None,
) -> Hoist:
    """The hoist of one directory's workers (all share one worker input); ``runner_base``:
    the runner base class and its module (the type of the runner the workers hold)."""
    hoist = Hoist()
    if len(members) < 2:
        return hoist
    for member in members:
        try:
            member.split = split_step(member.cdef, member.plan.cdef, member.plan, contract)
        except NotSplit as exc:
            # without its traceback: kept, its frames would hold this run's trees and
            # facts in a cycle that only the garbage collector frees
            member.why_not = exc.with_traceback(None)
    classes: dict[tuple[str, ...], list[Member]] = {}
    for member in members:
        if member.split is not None:
            classes.setdefault(member.split.shape(), []).append(member)
    sharing = max(classes.values(), key=len, default=[])
    if len(sharing) < 2:
        sharing = []
    placed = _place(sharing, project, contract, sources) if sharing else None
    if sharing and placed is None:
        for member in members:
            hoist.notes[member.ref] = [
                (
                    _line(member, member.plan.cdef),
                    f"{member.ref.name} keeps its own {contract.execute_method}: its step is "
                    f"the same as {_other(member, sharing).ref.name}'s, but no class they "
                    "all derive from is defined in this directory, and a worker_base.py "
                    "here does not hold one",
                )
            ]
        return hoist
    for member in members:
        if member in sharing:
            continue
        reference = sharing[0] if sharing else _closest(member, members, contract)
        hoist.notes[member.ref] = [_difference(member, reference, contract)]
    if not sharing or placed is None:
        return hoist
    hoist.path, hoist.parent, hoist.exists = placed
    first = sharing[0]
    assert first.split is not None
    attributes = _attribute_types(
        sharing, first.split.attributes, runner_base[0] if runner_base else None
    )
    if isinstance(attributes, str):
        for member in sharing:
            hoist.notes[member.ref] = [
                (
                    _line(member, member.plan.cdef),
                    f"{member.ref.name} keeps its own {contract.execute_method}: {attributes}",
                )
            ]
        return hoist
    hoist.members = {m.ref: m.split for m in sharing if m.split is not None}
    hoist.attributes = attributes
    hoist.base = _base_class(sharing, hoist.parent, attributes, contract)
    needed = _names_read(hoist.base)
    hoist.plain_imports, hoist.from_imports = _imports_for(
        needed, first.module, {hoist.parent or "", first.plan.input_name}
    )
    assert hoist.path is not None
    hoist.from_imports.append((import_path(hoist.path, input_path), [first.plan.input_name]))
    for path, name in [*first.generic, *([runner_base[::-1]] if runner_base else [])]:
        if name in needed:
            hoist.from_imports.append((import_path(hoist.path, path), [name]))
    hoist.from_imports.append(
        ("abc", ["abstractmethod"] if hoist.parent else ["ABC", "abstractmethod"])
    )
    return hoist


def _closest(member: Member, members: list[Member], contract: Contract) -> Member:
    """The other worker whose step has the most in common with ``member``'s."""
    mine = [t.mine for t in _traits(member, contract)]

    def alike(other: Member) -> int:
        return sum(a == b.mine for a, b in zip(mine, _traits(other, contract), strict=False))

    others = [m for m in members if m is not member]
    return max(others, key=alike)


def _other(member: Member, members: list[Member]) -> Member:
    return next(m for m in members if m is not member)


def _line(member: Member, node: cst.CSTNode | None) -> int:
    """The line of a node of the class as read (0: None, or not in its module); a node
    of a method is counted in a print of that method alone."""
    return _Where(member.lines, member.plan.cdef, member.facts, node).line


@dataclass(frozen=True)
class _Where:
    """A node of a worker class as read, and what tells its line."""

    lines: Lines
    cdef: cst.ClassDef
    facts: ClassFacts | None
    node: cst.CSTNode | None

    @property
    def line(self) -> int:
        if self.node is None:
            return 0
        if self.facts is None:
            return self.lines.line(self.node)
        return line_in_method(self.lines, self.cdef, self.facts, self.node)


# ------------------------------------------------------------------ differences


@dataclass
class _Trait:
    what: str
    #: the worker's own words for it, and the other's
    mine: str
    where: _Where

    @functools.cached_property
    def line(self) -> int:
        """Its line (counted only for a trait a note cites: a print of its method)."""
        return self.where.line


def _traits(member: Member, contract: Contract) -> list[_Trait]:
    """What the step does, in the order a reader meets it, from the class as read
    (found once per worker)."""
    if member.traits is None:
        member.traits = _find_traits(member, contract)
    return member.traits


def _find_traits(member: Member, contract: Contract) -> list[_Trait]:
    plan = member.plan

    def at(node: cst.CSTNode | None) -> _Where:
        return _Where(member.lines, plan.cdef, member.facts, node)

    assert plan.send_func is not None and plan.recv_func is not None
    out: list[_Trait] = []
    send = plan.send_func
    request = [*send.params.params][1].name.value if len(send.params.params) > 1 else ""
    stop = _driver_stop(send, request, contract)
    out.append(_Trait("driver", stop[0], at(stop[1] or send)))
    guard = _guard(plan)
    if guard is None:
        out.append(
            _Trait(
                "non-driver",
                "its non-driver path never checks the stop signal",
                at(plan.recv_anchor),
            )
        )
    else:
        returned = _returned(guard)
        out.append(
            _Trait(
                "non-driver",
                f"its non-driver path leaves on the stop signal returning `{returned}`",
                at(guard),
            )
        )
    inline = plan.recv_func is plan.send_func
    where = (
        f"its non-driver path runs inside `{send.name.value}`"
        if inline
        else f"its non-driver path is `{plan.recv_func.name.value}`"
    )
    out.append(_Trait("layout", where, at(plan.recv_func)))
    return out


def _driver_stop(
    send: cst.FunctionDef, request: str, contract: Contract
) -> tuple[str, cst.CSTNode | None]:
    """How the driver meets a step without a request: (words, statement)."""
    for node in cstutil.find_all(send, cst.If):
        assert isinstance(node, cst.If)
        if cstutil.code(node.test).strip() != f"{request} is None":
            continue
        stops = cstutil.find_all(
            node.body,
            cst.Call,
            lambda n: (
                cstutil.is_broadcast(n, contract.broadcast_function)
                and isinstance(n, cst.Call)
                and isinstance(cstutil.broadcast_payload(n), cst.Dict)
            ),
        )
        if stops:
            returned = _returned(node)
            return (
                f"its driver broadcasts `{{}}` without a request and returns `{returned}`",
                node,
            )
    for node in cstutil.find_all(send, cst.Assert):
        assert isinstance(node, cst.Assert)
        if request and request in cstutil.loaded(node.test):
            text = cstutil.code(node.test).strip()
            return (f"its driver asserts `{text}` instead of sending the stop signal", node)
    return ("its driver never sends the stop signal", None)


def _guard(plan: WorkerPlan) -> cst.If | None:
    func = plan.recv_func
    if func is None or not plan.recv_guarded:
        return None
    for node in cstutil.find_all(func, cst.If):
        assert isinstance(node, cst.If)
        if cstutil.code(node.test).strip() == f"not {plan.recv_var}":
            return node
    return None


def _returned(node: cst.CSTNode) -> str:
    found = cstutil.find_all(node, cst.Return)
    if not found:
        return "nothing"
    ret = found[0]
    assert isinstance(ret, cst.Return)
    return cstutil.code(ret.value).strip() if ret.value is not None else "None"


def _difference(member: Member, other: Member, contract: Contract) -> tuple[int, str]:
    name, them = member.ref.name, other.ref.name
    head = f"{name} keeps its own {contract.execute_method}"
    mine, theirs = _traits(member, contract), _traits(other, contract)
    where, possessive = member.ref.path.name, f"{them}'s "
    differ = [
        f"{a.mine} ({where}:{a.line}), {b.mine.replace('its ', possessive, 1)}"
        for a, b in zip(mine, theirs, strict=False)
        if a.mine != b.mine
    ]
    if differ:
        first = next(a for a, b in zip(mine, theirs, strict=False) if a.mine != b.mine)
        return first.line, f"{head}: {'; '.join(differ)}"
    if member.why_not is not None:
        line = _line(member, member.why_not.node) or _line(member, member.plan.cdef)
        return line, f"{head}: {member.why_not.why}"
    if other.why_not is not None:
        return (
            _line(member, member.plan.cdef),
            f"{head}: {them}'s step cannot be shared ({other.why_not.why})",
        )
    assert member.split is not None and other.split is not None
    theirs_by = dict(zip(_names(other.split), other.split.shape(), strict=True))
    originals = {m.name.value: m for m in methods(member.plan.cdef)}
    for method, shape in zip(_names(member.split), member.split.shape(), strict=True):
        if theirs_by.get(method) != shape:
            line = _line(member, originals.get(method))
            return line, f"{head}: its `{method}` differs from {them}'s beyond what they send"
    return _line(member, member.plan.cdef), f"{head}: its step methods differ from {them}'s"


def _names(split: Split) -> list[str]:
    return [m.name.value for m in split.step]


# ------------------------------------------------------------------ placing


def _place(
    sharing: list[Member], project: Project, contract: Contract, sources: Mapping[Path, bytes]
) -> tuple[Path, str | None, bool] | None:
    """Where the base goes: the module of the first class every sharing worker derives
    from, in their directory and among the run's files; else a new worker_base.py."""
    directory = sharing[0].ref.path.parent
    mros = []
    for member in sharing:
        cls = project.modules[str(member.ref.path)].classes.get(member.ref.name)
        if cls is None:
            return None
        mros.append(project.mro(cls)[1:])
    common = [c for c in mros[0] if all(any(c is o for o in mro) for mro in mros[1:])]
    for cls in common:
        path = Path(cls.path)
        if cls.name == BASE_NAME:
            return None  # already there: nothing to generate
        if path.parent == directory and path in sources:
            return path, cls.name, True
    created = directory / f"{BASE_MODULE}.py"
    if created in sources or created.exists():
        return None
    return created, None, False


# ------------------------------------------------------------------ the base


def _attribute_types(
    sharing: list[Member], attributes: list[str], runner_base: str | None
) -> dict[str, str] | str:
    """The annotation of each ``self.<attribute>`` the step reads, as a sharing worker
    states it (the runner base for the runner the workers hold, unless they all state
    one type); a message when none does."""
    out: dict[str, str] = {}
    runner = sharing[0].plan.runner_attr
    for attribute in attributes:
        if attribute == runner and runner_base is not None:
            stated = {_stated(m.cdef, attribute) for m in sharing}
            one = stated.pop() if len(stated) == 1 else None
            out[attribute] = one if one is not None else runner_base
            continue
        for member in sharing:
            found = _stated(member.cdef, attribute)
            if found is not None:
                out[attribute] = found
                break
        else:
            return f"no worker states the type of `self.{attribute}`, which the step reads"
    return out


def _stated(cdef: cst.ClassDef, attribute: str) -> str | None:
    for item in cstutil.body_of(cdef.body):
        small = cstutil.single_small(item)
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            if small.target.value == attribute:
                return cstutil.code(small.annotation.annotation).strip()
    for method in methods(cdef):
        params = {
            p.name.value: cstutil.code(p.annotation.annotation).strip()
            for p in method.params.params
            if p.annotation is not None
        }
        for node in cstutil.find_all(method, (cst.AnnAssign, cst.Assign)):
            if isinstance(node, cst.AnnAssign) and cstutil.is_self_attr(node.target, attribute):
                return cstutil.code(node.annotation.annotation).strip()
            if (
                isinstance(node, cst.Assign)
                and method.name.value == "__init__"
                and any(cstutil.is_self_attr(t.target, attribute) for t in node.targets)
                and isinstance(node.value, cst.Name)
                and node.value.value in params
            ):
                return params[node.value.value]
    return None


def _base_class(
    sharing: list[Member], parent: str | None, attributes: dict[str, str], contract: Contract
) -> cst.ClassDef:
    first = sharing[0]
    split = first.split
    assert split is not None
    names = " and ".join(f"``{m.ref.name}``" for m in sharing)
    request = split.request
    annotation = cstutil.without_optional(split.request_annotation or "Any")
    input_name = first.plan.input_name
    doc = cstutil.docstring(
        f"The step {names} share: each says only what it sends and what it does with it.",
        4,
        short="The step the workers of this package share.",
    )
    declared = "".join(f"    {name}: {kind}\n" for name, kind in attributes.items())
    text = (
        f"class {BASE_NAME}({parent or 'ABC'}):\n"
        f"{doc}\n"
        f"{declared}\n"
        "    # The driver builds the worker input and the model input and broadcasts them\n"
        "    # once; every rank runs the worker's cache operation on it, then the model.\n"
        "    @abstractmethod\n"
        f"    def {PREPARE}(self, {request}: {annotation}) -> {input_name}:\n"
        f'        """The worker input of this step, on the driver."""\n'
        "        raise NotImplementedError\n\n"
        "    @abstractmethod\n"
        f"    def {EXECUTE}(self, worker_input: {input_name}) -> None:\n"
        f'        """What every rank does with the worker input before the model runs."""\n'
        "        raise NotImplementedError\n"
    )
    cdef = cst.parse_statement(text)
    assert isinstance(cdef, cst.ClassDef)
    body = [*cstutil.body_of(cdef.body)]
    for method in split.step:
        body.append(method.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
    new = cdef.with_changes(
        body=cdef.body.with_changes(body=body),
        leading_lines=[cst.EmptyLine(indent=False), cst.EmptyLine(indent=False)],
    )
    return new


def _names_read(node: cst.CSTNode) -> set[str]:
    tree = ast.parse(cstutil.code(node).strip() + "\n")
    out: set[str] = set()
    for item in ast.walk(tree):
        if isinstance(item, ast.Name):
            out.add(item.id)
        elif isinstance(item, ast.Constant) and isinstance(item.value, str):
            try:  # a string annotation names its types too
                out |= {n.id for n in ast.walk(ast.parse(item.value)) if isinstance(n, ast.Name)}
            except SyntaxError:
                pass
    return out


def _imports_for(
    names: set[str], module: cst.Module, skip: set[str]
) -> tuple[list[str], list[tuple[str, list[str]]]]:
    """The imports of ``module`` that bind ``names``, as ``import`` and ``from``."""
    plain: list[str] = []
    froms: list[tuple[str, list[str]]] = []
    for statement in module.body:
        for small in cstutil.small_statements(statement):
            if isinstance(small, cst.Import):
                for alias in small.names:
                    dotted = cstutil.code(alias.name).strip()
                    if alias.asname is None and dotted in names:
                        plain.append(dotted)
            elif isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
                source = "." * len(small.relative) + (
                    cstutil.code(small.module).strip() if small.module is not None else ""
                )
                wanted = [
                    cstutil.code(a.name).strip()
                    for a in small.names
                    if a.asname is None
                    and cstutil.code(a.name).strip() in names
                    and cstutil.code(a.name).strip() not in skip
                ]
                if wanted:
                    froms.append((source, wanted))
    return plain, froms


# ------------------------------------------------------------------ the workers


class _KeepConstructedType(cst.CSTTransformer):
    """``self.<attribute>: C = C(...)`` in ``__init__`` for an attribute the base
    declares with a wider type: the worker keeps the methods of what it builds."""

    def __init__(self, declared: dict[str, str]) -> None:
        self.declared = declared

    def visit_FunctionDef(self, node: cst.FunctionDef) -> bool:
        return node.name.value == "__init__"

    def leave_Assign(self, original: cst.Assign, updated: cst.Assign) -> cst.Assign | cst.AnnAssign:
        if len(updated.targets) != 1 or not isinstance(updated.value, cst.Call):
            return updated
        built = updated.value.func
        target = updated.targets[0].target
        for attribute, annotation in self.declared.items():
            if (
                cstutil.is_self_attr(target, attribute)
                and isinstance(built, cst.Name)
                and built.value != annotation
            ):
                return cst.AnnAssign(
                    target=target,
                    annotation=cst.Annotation(cst.Name(built.value)),
                    value=updated.value,
                )
        return updated


def slim_worker(
    cdef: cst.ClassDef, split: Split, parent: str | None, declared: dict[str, str]
) -> cst.ClassDef:
    """The worker with its step methods replaced by its two own, deriving from the
    base; an attribute the base declares wider keeps the type of what the worker builds."""
    unstated = {a: t for a, t in declared.items() if _stated(cdef, a) is None}
    if unstated:
        kept = cdef.visit(_KeepConstructedType(unstated))
        assert isinstance(kept, cst.ClassDef)
        cdef = kept
    step = {m.name.value for m in split.step}
    body: list[cst.BaseStatement] = []
    placed = False
    for item in cstutil.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value in step:
            if not placed:
                lead = item.leading_lines
                body.append(split.prepare.with_changes(leading_lines=lead))
                body.append(split.execute.with_changes(leading_lines=[cst.EmptyLine(indent=False)]))
                placed = True
            continue
        body.append(item)
    bases = list(cdef.bases)
    swapped = False
    for index, arg in enumerate(bases):
        if parent is not None and cstutil.dotted(arg.value) == parent:
            bases[index] = arg.with_changes(value=cst.Name(BASE_NAME))
            swapped = True
    if not swapped:
        if bases:
            bases[-1] = bases[-1].with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        bases.append(cst.Arg(value=cst.Name(BASE_NAME)))
    return cdef.with_changes(
        body=cdef.body.with_changes(body=body),
        bases=bases,
        lpar=cst.LeftParen() if isinstance(cdef.lpar, cst.MaybeSentinel) else cdef.lpar,
        rpar=cst.RightParen() if isinstance(cdef.rpar, cst.MaybeSentinel) else cdef.rpar,
    )


def with_base(module: cst.Module, hoist: Hoist) -> cst.Module:
    """``module`` (the base's, as read, or empty) with the base class at its end."""
    assert hoist.base is not None
    return module.with_changes(body=[*module.body, hoist.base])
