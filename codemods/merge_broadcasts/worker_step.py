"""A merged worker's step, split into what every worker of a directory could share and
what is its own.

After the merge a worker's step is: the driver builds the worker input and the model
input and broadcasts both once; the other ranks receive, rebuild both; every rank runs
a cache operation on the worker input and then the model. :func:`split_step` takes a
rewritten worker class apart along those lines:

* the driver's *build*: the statements just above ``worker_input = WorkerInput(...)``
  that compute its fields (assignments and asserts), which become the worker's
  ``prepare_worker_input``; the step calls it instead;
* the worker's *cache operation*: the ``self.<method>(...)`` statements that read
  only the worker input, which become the worker's ``execute_worker``; the step calls
  it instead (every path must run the same one);
* every local that held a field of the worker input (bound by the build, or by
  ``x = worker_input.x`` after the receive) is read from ``worker_input`` instead.

What is left, the step methods with those two calls, is what two workers must have in
common to share one base (:mod:`.worker_hoist`).
"""

from __future__ import annotations

import ast
import re
import textwrap
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from codemods.merge_broadcasts.runner_model import methods
from codemods.merge_broadcasts.worker_model import WORKER_INPUT, WorkerPlan, is_pure
from codemods.toolkit import cstutil
from runnercheck.contract import Contract

PREPARE = "prepare_worker_input"
EXECUTE = "execute_worker"


class NotSplit(Exception):
    """The step cannot be split; ``node`` (of the original class, where known) and why."""

    def __init__(self, why: str, node: cst.CSTNode | None = None) -> None:
        super().__init__(why)
        self.why = why
        self.node = node


@dataclass
class Split:
    """A worker's step, split."""

    #: the step methods as the base would hold them (class order)
    step: list[cst.FunctionDef]
    #: the worker's own two methods
    prepare: cst.FunctionDef
    execute: cst.FunctionDef
    #: the request parameter's name and its annotation on the step (None: none)
    request: str
    request_annotation: str | None
    #: ``self.<attribute>`` the step methods read (not methods)
    attributes: list[str] = field(default_factory=list)

    def shape(self) -> tuple[str, ...]:
        """The step methods as compared between workers: their ``ast`` without
        docstrings (comments and layout do not count)."""
        return tuple(_normal_dump(m) for m in self.step)


def step_names(cdef: cst.ClassDef, plan: WorkerPlan, contract: Contract) -> list[str]:
    """The methods of the step: ``execute_model``, the methods that broadcast, receive or
    call the runner, and the methods that run one of them in a ``while`` loop."""
    names = {contract.execute_method}
    for func in (plan.send_func, plan.recv_func):
        if func is not None:
            names.add(func.name.value)
    for site in (plan.driver_site, plan.non_driver_site):
        if site is not None:
            names.add(site.func.name.value)
    every = methods(cdef)
    grown = True
    while grown:
        grown = False
        for method in every:
            if method.name.value in names:
                continue
            loops = cstutil.find_all(method, cst.While)
            if any(_calls_self(loop.test, names) for loop in loops if isinstance(loop, cst.While)):
                names.add(method.name.value)
                grown = True
    return [m.name.value for m in every if m.name.value in names]


def _calls_self(node: cst.CSTNode, names: set[str]) -> bool:
    return cstutil.contains(
        node,
        cst.Call,
        lambda n: (
            isinstance(n, cst.Call)
            and isinstance(n.func, cst.Attribute)
            and cstutil.is_self_attr(n.func)
            and n.func.attr.value in names
        ),
    )


def _blocks(node: cst.CSTNode) -> list[Sequence[cst.BaseStatement]]:
    """Every statement list under ``node`` (function, branch, loop and ``with`` bodies)."""
    found = cstutil.find_all(node, cst.IndentedBlock)
    return [b.body for b in found if isinstance(b, cst.IndentedBlock)]


def _assigned_name(statement: cst.CSTNode) -> tuple[str, cst.BaseExpression] | None:
    small = cstutil.single_small(statement)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Name):
            return target.value, small.value
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name) and small.value:
        return small.target.value, small.value
    return None


def _is_build_statement(statement: cst.BaseStatement) -> bool:
    return _assigned_name(statement) is not None or isinstance(
        cstutil.single_small(statement), cst.Assert
    )


def _find_make(func: cst.FunctionDef, input_name: str) -> tuple[Sequence[cst.BaseStatement], int]:
    for block in _blocks(func):
        for index, statement in enumerate(block):
            found = _assigned_name(statement)
            if (
                found is not None
                and found[0] == WORKER_INPUT
                and isinstance(found[1], cst.Call)
                and cstutil.dotted(found[1].func) == input_name
            ):
                return block, index
    raise NotSplit("its driver does not build the worker input in one statement")


def _request(func: cst.FunctionDef) -> tuple[str, str | None]:
    params = [*func.params.posonly_params, *func.params.params]
    if len(params) < 2:
        raise NotSplit(f"`{func.name.value}` takes no request")
    param = params[1]
    annotation = cstutil.code(param.annotation.annotation) if param.annotation else None
    return param.name.value, annotation


def split_step(
    cdef: cst.ClassDef, original: cst.ClassDef, plan: WorkerPlan, contract: Contract
) -> Split:
    """``cdef`` (the worker as the merge rewrote it) split (raises :class:`NotSplit`)."""
    assert plan.send_func is not None and plan.recv_func is not None
    by_name = {m.name.value: m for m in methods(cdef)}
    names = step_names(cdef, plan, contract)
    send = by_name[plan.send_func.name.value]
    recv = by_name[plan.recv_func.name.value]
    request, annotation = _request(send)
    block, index = _find_make(send, plan.input_name)
    make = block[index]
    start = index
    while start > 0 and _is_build_statement(block[start - 1]):
        start -= 1
    region = list(block[start:index])
    made = _assigned_name(make)
    assert made is not None and isinstance(made[1], cst.Call)
    # locals that hold a field: bound by the build, or unpacked after the receive
    fields: dict[str, str] = {}
    for arg in made[1].args:
        if arg.keyword is not None and isinstance(arg.value, cst.Name):
            fields.setdefault(arg.value.value, arg.keyword.value)
    unpacked: list[cst.BaseStatement] = []
    for statement in (s for b in _blocks(recv) for s in b):
        found = _assigned_name(statement)
        if (
            found is not None
            and isinstance(found[1], cst.Attribute)
            and isinstance(found[1].value, cst.Name)
            and found[1].value.value == WORKER_INPUT
        ):
            if fields.setdefault(found[0], found[1].attr.value) != found[1].attr.value:
                raise NotSplit(f"`{found[0]}` holds two fields of the worker input")
            unpacked.append(statement)
    inside = {id(n) for s in [*region, make] for n in cstutil.name_uses(s)[0]}
    read_later = {n.value for n in cstutil.name_uses(send)[0] if id(n) not in inside}
    kept: list[cst.BaseStatement] = []
    moved: list[cst.BaseStatement] = []
    for statement in region:
        found = _assigned_name(statement)
        if found is not None and found[0] in read_later and found[0] not in fields:
            kept.append(statement)
            needed = _needed(found[0], region, made[1])
            if needed:
                if not is_pure(found[1]):
                    raise NotSplit(
                        f"`{found[0]}` is both part of the worker input and read by the step",
                        statement,
                    )
                moved.append(statement)
            continue
        moved.append(statement)
    free = (
        set().union(*(cstutil.loaded(s) for s in [*moved, make]))
        - cstutil.bound_in(moved)
        - {"self", request}
    )
    params = {p.name.value for p in [*send.params.params, *send.params.kwonly_params]}
    if free & params:
        raise NotSplit(
            f"its worker input is built from `{sorted(free & params)[0]}`, which "
            f"`{send.name.value}` takes beside `{request}`: a shared step prepares the worker "
            "input from the request alone"
        )
    local = free & cstutil.bound(send)
    if local:
        raise NotSplit(
            f"its worker input is built from `{sorted(local)[0]}`, a local of "
            f"`{send.name.value}` bound before the build"
        )
    # the rewritten step: the build becomes a call, fields are read from the input
    call = cst.parse_statement(f"{WORKER_INPUT} = self.{PREPARE}({request})\n")
    lead = region[0].leading_lines if region else make.leading_lines  # type: ignore[attr-defined]
    replace: dict[int, cst.CSTNode] = {id(make): call.with_changes(leading_lines=lead)}
    for statement in region:
        replace[id(statement)] = cst.RemovalSentinel.REMOVE  # type: ignore[assignment]
    for statement in kept:
        replace[id(statement)] = statement
    if kept:
        replace[id(kept[0])] = kept[0].with_changes(leading_lines=lead)
        replace[id(make)] = call
    for statement in unpacked:
        replace[id(statement)] = cst.RemovalSentinel.REMOVE  # type: ignore[assignment]
    step = [by_name[n] for n in names]
    step = [_replaced(m, replace) for m in step]
    reads = {n: (lambda f=f: cstutil.attr_of(WORKER_INPUT, f)) for n, f in fields.items()}
    step = [
        cstutil.substitute_loads(m, reads)
        if m.name.value in (send.name.value, recv.name.value)
        else m
        for m in step
    ]
    still = {n for m in step for n in cstutil.bound(m)} & set(fields)
    if still:
        raise NotSplit(f"`{sorted(still)[0]}` holds a field of the worker input and another value")
    step, operation = _cache_operation(step, plan.runner_attr, {*names, PREPARE})
    prepare_body = [*moved, cst.parse_statement(f"return {cstutil.code(made[1]).strip()}\n")]
    if moved:
        prepare_body[0] = moved[0].with_changes(leading_lines=cstutil.comments(lead))
    param = f"{request}: {cstutil.without_optional(annotation)}" if annotation else request
    prepare = _method(PREPARE, param, plan.input_name, prepare_body)
    # the operation's own method asserts what it reads set (moved from the receive, so
    # workers whose step differed only there share it)
    checks = _set_checks(step, operation)
    drop: dict[int, cst.CSTNode] = {id(c): cst.RemovalSentinel.REMOVE for c in checks}  # type: ignore[misc]
    step = [_replaced(m, drop) for m in step]
    execute = _method(
        EXECUTE,
        f"{WORKER_INPUT}: {plan.input_name}",
        "None",
        [*(c.with_changes(leading_lines=[]) for c in checks), *operation],
    )
    attributes = sorted(
        {
            a.attr.value
            for m in step
            for a in cstutil.find_all(m, cst.Attribute)
            if isinstance(a, cst.Attribute)
            and cstutil.is_self_attr(a)
            and a.attr.value not in {*names, PREPARE, EXECUTE}
        }
    )
    own = {m.name.value for m in methods(original)} - set(names)
    calls_own = [a for a in attributes if a in own]
    if calls_own:
        raise NotSplit(f"its step calls `self.{calls_own[0]}`, a method of its own")
    return Split(step, prepare, execute, request, annotation, attributes)


def _needed(name: str, region: list[cst.BaseStatement], make: cst.Call) -> bool:
    """Whether the worker input's fields read ``name`` (directly or through the build)."""
    wanted = cstutil.loaded(make)
    for statement in reversed(region):
        found = _assigned_name(statement)
        if found is not None and found[0] in wanted:
            wanted |= cstutil.loaded(found[1])
    return name in wanted


def _replaced(func: cst.FunctionDef, replace: dict[int, cst.CSTNode]) -> cst.FunctionDef:
    """``func`` with the nodes of ``replace`` in it replaced (the others kept)."""
    return cstutil.replace_nodes(func, replace)


def _is_operation(statement: cst.BaseStatement, runner_attr: str, step: set[str]) -> bool:
    """``self.<method>(...)`` on its own line, reading nothing but the worker input,
    ``self`` and constants, and neither the runner nor a step method."""
    small = cstutil.single_small(statement)
    if not (isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)):
        return False
    func = small.value.func
    if not (isinstance(func, cst.Attribute) and cstutil.is_self_attr(func)):
        return False
    if func.attr.value in step or func.attr.value == runner_attr:
        return False
    names = cstutil.loaded(small.value) - {"self"}
    return bool(small.value.args) and names == {WORKER_INPUT}


def _cache_operation(
    step: list[cst.FunctionDef], runner_attr: str, names: set[str]
) -> tuple[list[cst.FunctionDef], list[cst.BaseStatement]]:
    """The step with each run of cache-operation statements replaced by
    ``self.execute_worker(worker_input)``, and that run (the same on every path)."""
    runs: list[list[cst.BaseStatement]] = []
    for func in step:
        for block in _blocks(func):
            current: list[cst.BaseStatement] = []
            for statement in [*block, None]:
                if statement is not None and _is_operation(statement, runner_attr, names):
                    current.append(statement)
                    continue
                if current:
                    runs.append(current)
                current = []
    if not runs:
        raise NotSplit("its step runs no cache operation on the worker input")
    texts = {tuple(_normal_dump(s) for s in run) for run in runs}
    if len(texts) > 1:
        raise NotSplit("its driver and its other ranks run different cache operations")
    replace: dict[int, cst.CSTNode] = {}
    for run in runs:
        call = cst.parse_statement(f"self.{EXECUTE}({WORKER_INPUT})\n")
        replace[id(run[0])] = call.with_changes(leading_lines=run[0].leading_lines)  # type: ignore[attr-defined]
        for statement in run[1:]:
            replace[id(statement)] = cst.RemovalSentinel.REMOVE  # type: ignore[assignment]
    operation = [s.with_changes(leading_lines=cstutil.comments(s.leading_lines)) for s in runs[0]]  # type: ignore[attr-defined]
    return [_replaced(m, replace) for m in step], operation


_SET_CHECK = re.compile(rf"assert {WORKER_INPUT}\.(\w+) is not None")


def _set_checks(
    step: list[cst.FunctionDef], operation: list[cst.BaseStatement]
) -> list[cst.SimpleStatementLine]:
    """The step's ``assert worker_input.<field> is not None`` (a field its ranks relied
    on being set, made ``Optional`` by a shared input) for each field the cache
    operation reads: a type checker narrows within one method, so the operation,
    moved into its own, asserts it there instead."""
    read = "\n".join(cstutil.code(s) for s in operation)
    out: list[cst.SimpleStatementLine] = []
    seen: set[str] = set()
    for func in step:
        for line in cstutil.find_all(func, cst.SimpleStatementLine):
            assert isinstance(line, cst.SimpleStatementLine)
            match = _SET_CHECK.fullmatch(cstutil.code(line).strip())
            if match is None or match[1] in seen:
                continue
            if re.search(rf"\b{WORKER_INPUT}\.{match[1]}\b", read):
                seen.add(match[1])
                out.append(line)
    return out


def _method(name: str, param: str, returns: str, body: list[cst.BaseStatement]) -> cst.FunctionDef:
    head = f"def {name}(self, {param}) -> {returns}:\n    pass\n"
    func = cst.parse_statement(head)
    assert isinstance(func, cst.FunctionDef)
    return func.with_changes(body=cst.IndentedBlock(body=body))


def _normal_dump(node: cst.CSTNode) -> str:
    """The ``ast`` of a statement or method, docstrings left out."""
    text = textwrap.dedent(cstutil.code(node))
    tree = ast.parse(text)
    for item in ast.walk(tree):
        body = getattr(item, "body", None)
        if (
            isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and body
            and isinstance(body[0], ast.Expr)
            and isinstance(body[0].value, ast.Constant)
            and isinstance(body[0].value.value, str)
        ):
            item.body = body[1:] or [ast.Pass()]
    return ast.dump(tree)
