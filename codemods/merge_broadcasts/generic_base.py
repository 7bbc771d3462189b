"""A generic intermediate runner base, so that subclasses with other inputs need no
``# type: ignore[override]``.

A runner ``R`` whose subclass ``S`` takes an input of its own cannot stay
``S``'s base: ``S.execute_model(self, model_input: SInput)`` would narrow
``R.execute_model(self, model_input: RInput)``. As vLLM 0.5.1 did by hand (its
``GPUModelRunnerBase``), ``R`` splits in two:

    TInput = TypeVar("TInput", bound="ModelRunnerInputBase")

    class RBase(ModelRunnerBase[TInput]):      # everything but the contract methods
        ...

    class R(RBase[RInput]):                    # prepare, rebuild, execute
        ...

and ``S`` derives from ``RBase[SInput]``.
"""

from __future__ import annotations

import libcst as cst

from codemods.merge_broadcasts.runner_model import RunnerPlan, is_docstring
from codemods.merge_broadcasts.shared_make import generic_members, is_input_class_attribute
from codemods.toolkit import cstutil
from runnercheck.contract import Contract


def _subscript(name: str, argument: str) -> cst.Arg:
    return cst.Arg(value=cst.parse_expression(f"{name}[{argument}]"))


def _starts_blank(statement: cst.BaseStatement) -> bool:
    lead = cstutil.leading(statement)
    return bool(lead) and lead[0].comment is None


def split_generic(
    plan: RunnerPlan, cdef: cst.ClassDef, contract: Contract, shares_make: bool = False
) -> list[cst.BaseStatement]:
    """The TypeVar, the generic base and the runner itself, in place of ``cdef``
    (the runner as rewritten, with ``ModelRunnerBase[<its input>]`` among its bases).
    ``shares_make``: the base holds the rebuilding method of its runners
    (:mod:`.shared_make`)."""
    own = {contract.prepare_input_method, contract.make_input_method, contract.execute_method}
    items = list(cstutil.body_of(cdef.body))
    doc = items[:1] if items and is_docstring(items[0]) else []
    concrete: list[cst.BaseStatement] = [
        i
        for i in items[len(doc) :]
        if (isinstance(i, cst.FunctionDef) and i.name.value in own) or is_input_class_attribute(i)
    ]
    shared = [i for i in items[len(doc) :] if not any(i is c for c in concrete)]
    if shares_make:
        declaration, method = generic_members(plan, contract)
        shared = [declaration, *shared, method]
    runner_base, input_base = contract.runner_bases[0], contract.input_bases[0]
    specific = f"{runner_base}[{plan.input_name}]"
    bases = [
        _subscript(runner_base, plan.generic_typevar).with_changes(comma=b.comma)
        if cstutil.code(b.value) == specific
        else b
        for b in cdef.bases
    ]
    summary = cstutil.parse_statements(
        cstutil.docstring(
            f"{plan.name} but for the methods that depend on its input type.",
            4,
            short=f"{plan.name} without its input-specific methods.",
        ).lstrip()
    )
    if shared:
        lead = cstutil.leading(shared[0])
        if not lead or lead[0].comment is not None:
            lead = [cst.EmptyLine(indent=False), *lead]
        shared[0] = cstutil.with_leading(shared[0], lead)
    generic = cdef.with_changes(
        name=cst.Name(plan.generic),
        bases=bases,
        body=cdef.body.with_changes(body=[*summary, *shared]),
    )
    # a blank line after the class line (or its docstring) where the class had one
    first = items[len(doc)] if len(items) > len(doc) else None
    blank = bool(doc) or (first is not None and _starts_blank(first))
    concrete[0] = cstutil.with_leading(
        concrete[0],
        [cst.EmptyLine(indent=False)] * blank + cstutil.comments(cstutil.leading(concrete[0])),
    )
    runner = cst.ClassDef(
        name=cst.Name(plan.name),
        bases=[_subscript(plan.generic, plan.input_name)],
        body=cst.IndentedBlock(body=[*doc, *concrete]),
        leading_lines=[cst.EmptyLine(), cst.EmptyLine()],
    )
    typevar = cstutil.parse_statements(
        f'{plan.generic_typevar} = TypeVar("{plan.generic_typevar}", bound="{input_base}")\n'
    )[0]
    typevar = cstutil.with_leading(typevar, cdef.leading_lines)
    generic = generic.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
    return [typevar, generic, runner]


def rebase(plan: RunnerPlan, cdef: cst.ClassDef) -> cst.ClassDef:
    """``cdef`` deriving from its parent's generic base instead of the parent."""
    parent = plan.rebase
    assert parent is not None
    bases = [
        _subscript(parent.generic, plan.input_name).with_changes(comma=b.comma)
        if (cstutil.dotted(b.value) or "").rpartition(".")[2] == parent.name
        else b
        for b in cdef.bases
    ]
    return cdef.with_changes(bases=bases)


class _AnnotateRunner(cstutil.Along):
    """Annotates ``self.<attr> = ...`` with the generic base, and the local that
    holds the runner class the worker picks (``cls = A if c else B``), with
    ``Type[<generic>]``: a type checker joins two subclasses of one generic base over
    different input types to ``object``, so the picked class would not be callable."""

    def __init__(self, attr: str, annotation: str, direct: set[str], to_visit: set[int]) -> None:
        super().__init__(to_visit)  # the way to the assignments of the attribute
        self.attr, self.annotation, self.direct = attr, annotation, direct
        self.done = False
        #: (method, local) holding a picked runner class
        self.class_locals: set[tuple[str, str]] = set()
        self._assigned: list[tuple[str, dict[str, int]]] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        counts: dict[str, int] = {}
        for found in cstutil.find_all(node.body, cst.Assign):
            assert isinstance(found, cst.Assign)
            for target in found.targets:
                if isinstance(target.target, cst.Name):
                    counts[target.target.value] = counts.get(target.target.value, 0) + 1
        self._assigned.append((node.name.value, counts))

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        self._assigned.pop()
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        body = list(updated.body)
        for index, small in enumerate(body):
            if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
                continue
            if cstutil.dotted(small.targets[0].target) != f"self.{self.attr}":
                continue
            value = small.value
            if isinstance(value, cst.Call) and cstutil.dotted(value.func) in self.direct:
                continue
            body[index] = cst.AnnAssign(
                target=small.targets[0].target,
                annotation=cst.Annotation(cst.Name(self.annotation)),
                value=value,
            )
            self.done = True
            picked = value.func if isinstance(value, cst.Call) else None
            if isinstance(picked, cst.Name) and self._assigned:
                method, counts = self._assigned[-1]
                if counts.get(picked.value) == 1:
                    self.class_locals.add((method, picked.value))
        return updated.with_changes(body=body)


class _AnnotateClassLocal(cstutil.Along):
    """``cls: Type[<generic>] = ...``. A conditional expression of plain names
    becomes a default and an ``if``: a type checker joins the two arms before it looks
    at the annotation, and the join of two such runner classes is ``object``. Only
    the named methods' own locals are touched."""

    def __init__(self, names: set[tuple[str, str]], annotation: str, to_visit: set[int]) -> None:
        super().__init__(to_visit)  # the way to the assignments of those names
        self.names, self.annotation = names, annotation
        self._methods: list[str] = []

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._methods.append(node.name.value)

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        self._methods.pop()
        return updated

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        small = updated.body[0] if len(updated.body) == 1 else None
        if not (isinstance(small, cst.Assign) and len(small.targets) == 1):
            return updated
        target = small.targets[0].target
        if not (
            isinstance(target, cst.Name)
            and self._methods
            and (self._methods[-1], target.value) in self.names
        ):
            return updated
        annotation = cst.Annotation(cst.parse_expression(f"Type[{self.annotation}]"))
        arms = _arms(small.value)
        if arms is None:
            return updated.with_changes(
                body=[cst.AnnAssign(target=target, annotation=annotation, value=small.value)]
            )
        chosen, default = arms
        first = updated.with_changes(
            body=[cst.AnnAssign(target=target, annotation=annotation, value=default)]
        )
        branch: cst.If | None = None
        for test, value in reversed(chosen):
            assign = cst.SimpleStatementLine([cst.Assign([cst.AssignTarget(target)], value)])
            branch = cst.If(test=test, body=cst.IndentedBlock([assign]), orelse=branch)
        assert branch is not None
        return cst.FlattenSentinel([first, branch])


def _assigns_one_of(node: cst.CSTNode, names: set[str]) -> bool:
    """A line that only assigns one of ``names``."""
    if not (isinstance(node, cst.SimpleStatementLine) and len(node.body) == 1):
        return False
    small = node.body[0]
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and small.targets[0].target.value in names
    )


def _plain(node: cst.BaseExpression) -> cst.BaseExpression:
    return node.with_changes(lpar=[], rpar=[])


def _arms(
    value: cst.BaseExpression,
) -> tuple[list[tuple[cst.BaseExpression, cst.BaseExpression]], cst.BaseExpression] | None:
    """``a if c else b if d else e`` as ``([(c, a), (d, b)], e)``, when every arm is
    a name or attribute (nothing runs on evaluating it)."""
    chosen: list[tuple[cst.BaseExpression, cst.BaseExpression]] = []
    node = value
    while isinstance(node, cst.IfExp):
        if not isinstance(node.body, (cst.Name, cst.Attribute)):
            return None
        chosen.append((_plain(node.test), _plain(node.body)))
        node = node.orelse
    if not chosen or not isinstance(node, (cst.Name, cst.Attribute)):
        return None
    return chosen, _plain(node)


def annotate_runner_attribute(
    worker: cst.ClassDef, attr: str, generic: str, runners: set[str]
) -> tuple[cst.ClassDef, bool, bool]:
    """``self.<attr>: <generic> = ...`` where the worker assigns its runner from
    something other than one runner class's constructor (a class picked at run time
    could be the parent or a subclass, which no longer share the parent's type), and
    ``Type[<generic>]`` on the local the picked class is held in. Returns the class,
    whether it changed, and whether ``Type`` is now used."""
    target = f"self.{attr}"
    assigned = cstutil.find_all(
        worker,
        cst.Assign,
        lambda n: (
            isinstance(n, cst.Assign)
            and len(n.targets) == 1
            and cstutil.dotted(n.targets[0].target) == target
        ),
        words=(attr,),
    )
    if not assigned:
        return worker, False, False
    visitor = _AnnotateRunner(attr, generic, runners, cstutil.holding(worker, map(id, assigned)))
    new = worker.visit(visitor)
    assert isinstance(new, cst.ClassDef)
    if visitor.class_locals:
        names = {name for _, name in visitor.class_locals}
        lines = cstutil.find_all(
            new, cst.SimpleStatementLine, lambda n: _assigns_one_of(n, names), words=sorted(names)
        )
        to_visit = cstutil.holding(new, map(id, lines))
        new = new.visit(_AnnotateClassLocal(visitor.class_locals, generic, to_visit))
        assert isinstance(new, cst.ClassDef)
    return new, visitor.done, bool(visitor.class_locals)
