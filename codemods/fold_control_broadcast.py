"""``fold-control-broadcast``: a wrapper worker's control dict travels in the first inner
step's broadcast instead of a broadcast of its own (RC110).

vLLM's speculative-decoding worker broadcasts ``num_lookahead_slots`` (and flags) on its
own, then runs its proposer ``k`` times and its scorer once, each of which broadcasts
again: ``k + 2`` broadcasts per decode step. The driver can hand the control values to
the first inner step as extras of its merged dict, the way ``previous_hidden_states``
travels; the other ranks read them back from that step::

    driver (before)                          driver (after)
    broadcast_tensor_dict(control, src=0)    execute_model_req.broadcast_extras = control

    non-driver (before)                      non-driver (after)
    data = broadcast_tensor_dict(src=0)      if self.proposer_worker.execute_model() is None:
    if not data:                                 return False
        return False                         data = self.proposer_worker.received_extras
    k = data["num_lookahead_slots"]          k = data["num_lookahead_slots"]
    for _ in range(max(k, 1)):               for _ in range(max(k, 1) - 1):
        self.proposer_worker.execute_model()     self.proposer_worker.execute_model()
    self.scorer_worker.execute_model()       self.scorer_worker.execute_model()

The driver's empty stop dict is left as it is: the first inner receive gets it and the
inner step returns None (``WorkerBase.start_worker_execution_loop``'s stop), so the
non-driver loop still ends. Later inner steps (the rest of the proposer's multi-step
loop, the scorer, a proposer step after scoring) are unchanged.

Where the control values select the first inner step (vLLM 0.6+: the scorer first
without speculation, the proposer first with it), the other ranks receive that step's
broadcast themselves and hand it on::

    non-driver (before)                      non-driver (after)
    data = broadcast_tensor_dict(src=0)      received = broadcast_tensor_dict(src=0)
    if not data:                             if not received:
        return False                             return False
                                             data = received["broadcast_extras"]
    if data["no_spec"]:                      if data["no_spec"]:
        self.scorer_worker.execute_model()       self.scorer_worker.execute_model(received=received)
                                                 received = None
    for _ in range(max(k, 1)):               for _ in range(max(k, 1)):
        self.proposer_worker.execute_model()     self.proposer_worker.execute_model(received=received)
                                                 received = None

Each call that runs first on some path is handed the dict (then None: later steps
receive their own); the inner steps must take a ``received`` argument.

The rewrite asks the step model (:meth:`Project.wrapper_step`) and refuses the class,
naming the shape, unless every path that sends or receives the control values runs the
same inner worker's step first (the values then reach the same point on every rank),
the non-driver's first inner step runs unconditionally (plain, or first in a loop that
provably runs at least once), and that worker's step carries extras (the request's
``broadcast_extras`` out, ``received_extras`` back). The result is re-analysed: no
control broadcast is left, every step path makes one broadcast less, and the collective
schedules before and after agree (:func:`runnercheck.analysis.fold.verify_fold`).
"""

from __future__ import annotations

import itertools
from collections.abc import Sequence

import libcst as cst
import libcst.matchers as m
from libcst.codemod import CodemodContext
from libcst.codemod.visitors import RemoveImportsVisitor
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods.fold_plan import CODE, RECEIVED, SENT, Plan, plan_class, refused
from codemods.framework import registry
from codemods.framework.command import ContractCommand
from codemods.toolkit import cstutil
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.fold import verify_fold
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.wrappers import HANDED, evaluate, receive_lines
from runnercheck.contract import VLLM, Contract
from runnercheck.records import Refused

NAME = registry.FOLD_CONTROL_BROADCAST.name


# ------------------------------------------------------------------ the rewrite
def _inner_call(attr: str, execute: str) -> m.Call:
    return m.Call(
        func=m.Attribute(
            value=m.Attribute(value=m.Name("self"), attr=m.Name(attr)), attr=m.Name(execute)
        )
    )


def _any_step_call(execute: str, broadcast: str) -> m.Call:
    return m.Call(
        func=m.Attribute(attr=m.Name(execute))
        | m.Name(broadcast)
        | m.Attribute(attr=m.Name(broadcast))
    )


class _Refuse(Exception):
    def __init__(self, message: str, shape: str, line: int) -> None:
        super().__init__(message)
        self.message, self.shape, self.line = message, shape, line


def _at_least_once(count: cst.BaseExpression) -> bool:
    """``count`` is at least 1 for every value 0..4 of the names it reads."""
    text = cstutil.code(count)
    names = sorted(cstutil.loaded(count))
    for values in itertools.product(range(5), repeat=len(names)):
        try:
            if evaluate(text, dict(zip(names, values, strict=True))) < 1:
                return False
        except ValueError:
            return False
    return True


class _Rewrite(cst.CSTTransformer):
    METADATA_DEPENDENCIES = (PositionProvider,)

    def __init__(self, plan: Plan, contract: Contract) -> None:
        super().__init__()
        self.plan = plan
        self.contract = contract
        self.execute = contract.execute_method
        self.broadcast = contract.broadcast_function
        self.done_send = self.done_receive = False
        self._request: list[str | None] = []

    def _line(self, node: cst.CSTNode) -> int:
        return self.get_metadata(PositionProvider, node).start.line

    # the request parameter of the method being rewritten
    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        params = [p.name.value for p in node.params.params]
        self._request.append(params[1] if len(params) > 1 else None)

    def leave_FunctionDef(
        self, original: cst.FunctionDef, updated: cst.FunctionDef
    ) -> cst.FunctionDef:
        self._request.pop()
        body = list(updated.body.body) if isinstance(updated.body, cst.IndentedBlock) else []
        for index, statement in enumerate(
            original.body.body if isinstance(original.body, cst.IndentedBlock) else []
        ):
            if self._is_receive(statement):
                if self.plan.handed:
                    new = self._dispatch(body, index)
                else:
                    new = self._receive(body, index, self._line(statement))
                return updated.with_changes(body=updated.body.with_changes(body=new))
        return updated

    # ---------------------------------------- receive, then dispatch (several firsts)
    def _dispatch(self, body: list[cst.BaseStatement], index: int) -> list[cst.BaseStatement]:
        """``data = broadcast(...)`` becomes ``received = broadcast(...)`` (the first
        inner step's dict, whichever step it is) and ``data = received[SENT]`` after the
        stop check; the first inner steps are handed it (:meth:`leave_SimpleStatementLine`)."""
        receive = body[index]
        assert isinstance(receive, cst.SimpleStatementLine)
        assign = receive.body[0]
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Name)
        data = assign.targets[0].target.value
        comment = [
            cst.EmptyLine(indent=True, comment=cst.Comment(f"# {line}"))
            for line in (
                "The control values come with the first inner step's broadcast, whichever",
                "step they select: that step is handed the dict received here.",
            )
        ]
        head = receive.with_changes(
            body=[assign.with_changes(targets=[cst.AssignTarget(cst.Name(HANDED))])],
            leading_lines=[*receive.leading_lines, *comment],
        )
        rest = body[index + 1 :]
        out: list[cst.BaseStatement] = [*body[:index], head]
        if rest and m.matches(
            rest[0],
            m.If(test=m.UnaryOperation(operator=m.Not(), expression=m.Name(data)), orelse=None),
        ):
            stop = rest[0]
            assert isinstance(stop, cst.If) and isinstance(stop.test, cst.UnaryOperation)
            out.append(stop.with_changes(test=stop.test.with_changes(expression=cst.Name(HANDED))))
            rest = rest[1:]
        out.append(cst.parse_statement(f'{data} = {HANDED}["{SENT}"]\n'))
        self.done_receive = True
        return [*out, *rest]

    def _handed_call(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement] | None:
        """A first inner step's call, handed the dict received ahead of it (None: not
        one)."""
        small = cstutil.single_small(updated)
        if not (
            isinstance(small, cst.Expr)
            and isinstance(small.value, cst.Call)
            and self._line(original) in {line for line, _ in self.plan.handed}
            and m.matches(small.value.func, m.Attribute(attr=m.Name(self.execute)))
        ):
            return None
        call = small.value
        if call.args:
            raise _Refuse(
                f"the first inner step at line {self._line(original)} is called with arguments",
                "first inner step called with arguments",
                self._line(original),
            )
        handed = call.with_changes(
            args=[
                cst.Arg(
                    keyword=cst.Name(HANDED),
                    value=cst.Name(HANDED),
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""),
                        whitespace_after=cst.SimpleWhitespace(""),
                    ),
                )
            ]
        )
        cleared = cst.parse_statement(f"{HANDED} = None\n")
        return cst.FlattenSentinel(
            [updated.with_changes(body=[small.with_changes(value=handed)]), cleared]
        )

    def _is_receive(self, statement: cst.CSTNode) -> bool:
        if not m.matches(
            statement,
            m.SimpleStatementLine(
                body=[m.Assign(targets=[m.AssignTarget(m.Name())], value=m.Call())]
            ),
        ):
            return False
        assert isinstance(statement, cst.SimpleStatementLine)
        value = statement.body[0]
        assert isinstance(value, cst.Assign) and isinstance(value.value, cst.Call)
        return (
            self._line(statement) in self.plan.receives
            and cstutil.is_broadcast(value.value, self.broadcast)
            and cstutil.broadcast_payload(value.value) is None
        )

    def leave_SimpleStatementLine(
        self, original: cst.SimpleStatementLine, updated: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if self.plan.handed:
            handed = self._handed_call(original, updated)
            if handed is not None:
                return handed
        small = cstutil.single_small(updated)
        if not (
            self._line(original) in self.plan.sends
            and isinstance(small, cst.Expr)
            and cstutil.is_broadcast(small.value, self.broadcast)
        ):
            return updated
        assert isinstance(small.value, cst.Call)
        payload = cstutil.broadcast_payload(small.value)
        request = self._request[-1] if self._request else None
        if payload is None or request is None:
            raise _Refuse(
                "the control broadcast sends no dict of a method with a request parameter",
                "control broadcast without a request",
                self._line(original),
            )
        self.done_send = True
        assign = cst.parse_statement(f"{request}.{SENT} = _\n")
        assert isinstance(assign, cst.SimpleStatementLine)
        target = assign.body[0]
        assert isinstance(target, cst.Assign)
        comment = cst.EmptyLine(
            indent=True,
            comment=cst.Comment(
                "# The control values travel with the first inner step's broadcast."
            ),
        )
        return assign.with_changes(
            body=[target.with_changes(value=payload)],
            leading_lines=[*updated.leading_lines, comment],
        )

    def _receive(
        self, body: list[cst.BaseStatement], index: int, line: int
    ) -> list[cst.BaseStatement]:
        receive = body[index]
        assert isinstance(receive, cst.SimpleStatementLine)
        assign = receive.body[0]
        assert isinstance(assign, cst.Assign) and isinstance(assign.targets[0].target, cst.Name)
        data = assign.targets[0].target.value
        rest = body[index + 1 :]
        stop: cst.If | None = None
        if rest and m.matches(
            rest[0],
            m.If(
                test=m.UnaryOperation(operator=m.Not(), expression=m.Name(data)),
                body=m.IndentedBlock(body=[m.SimpleStatementLine(body=[m.Return()])]),
                orelse=None,
            ),
        ):
            stop = rest[0]  # type: ignore[assignment]
            rest = rest[1:]
        wanted = _inner_call(self.plan.inner, self.execute)
        anything = _any_step_call(self.execute, self.broadcast)
        between: list[cst.BaseStatement] = []
        for position, statement in enumerate(rest):
            if m.findall(statement, m.Return() | m.Raise()):
                raise _Refuse(
                    "the non-driver can leave the step between the receive and its first "
                    f"inner step (line {self._line_of(statement, line)})",
                    "exit before the first inner step",
                    line,
                )
            if not m.findall(statement, anything):
                between.append(statement)
                continue
            first, after = self._peel(statement, wanted, line)
            head = self._head(first, stop, data)
            tail = [after] if after is not None else []
            head[0] = cstutil.with_leading(
                head[0], [*receive.leading_lines, *cstutil.leading(head[0])]
            )
            self.done_receive = True
            return [*body[:index], *head, *between, *tail, *rest[position + 1 :]]
        raise _Refuse(
            "no inner step follows the non-driver receive", "receive without an inner step", line
        )

    def _line_of(self, statement: cst.CSTNode, default: int) -> int:
        try:
            return self._line(statement)
        except KeyError:
            return default

    def _peel(
        self, statement: cst.BaseStatement, wanted: m.Call, line: int
    ) -> tuple[cst.Call, cst.BaseStatement | None]:
        """The first inner call, and what is left of its statement (a loop one shorter)."""
        small = cstutil.single_small(statement)
        if isinstance(small, cst.Expr) and m.matches(small.value, wanted):
            assert isinstance(small.value, cst.Call)
            return small.value, None
        if isinstance(statement, cst.For) and statement.orelse is None:
            loop = statement
            iterator = loop.iter
            body = cstutil.body_of(loop.body)
            inner = cstutil.single_small(body[0]) if len(body) == 1 else None
            if (
                m.matches(
                    iterator, m.Call(func=m.Name("range"), args=[m.Arg(keyword=None, star="")])
                )
                and isinstance(inner, cst.Expr)
                and m.matches(inner.value, wanted)
            ):
                assert isinstance(iterator, cst.Call) and isinstance(inner.value, cst.Call)
                count = iterator.args[0].value
                if not _at_least_once(count):
                    raise _Refuse(
                        f"the first inner step runs in `for ... in range({cstutil.code(count)})`, "
                        "which may run no time: the other ranks could miss the control values",
                        "first inner step in a loop that may not run",
                        line,
                    )
                fewer = cst.BinaryOperation(
                    left=count, operator=cst.Subtract(), right=cst.Integer("1")
                )
                shorter = loop.with_changes(
                    iter=iterator.with_changes(args=[iterator.args[0].with_changes(value=fewer)])
                )
                return inner.value, shorter
        raise _Refuse(
            f"the non-driver's first inner step is not run unconditionally "
            f"(`{cstutil.code(statement).strip().splitlines()[0]}`): which step carries the "
            "control values would depend on them",
            "first inner step under a condition",
            line,
        )

    def _head(self, call: cst.Call, stop: cst.If | None, data: str) -> list[cst.BaseStatement]:
        read = cst.parse_statement(f"{data} = self.{self.plan.inner}.{RECEIVED}\n")
        comment = cst.EmptyLine(
            indent=True,
            comment=cst.Comment(
                f"# The control values come with the first {self.plan.inner} step's broadcast."
            ),
        )
        if stop is None:
            first = cst.SimpleStatementLine(body=[cst.Expr(call)], leading_lines=[comment])
            return [first, read]
        test = cst.Comparison(
            left=call,
            comparisons=[cst.ComparisonTarget(operator=cst.Is(), comparator=cst.Name("None"))],
        )
        ended = stop.with_changes(test=test, leading_lines=[comment, *stop.leading_lines])
        return [ended, read]


def rewrite_module(
    module: cst.Module, project: Project, path: str, contract: Contract = VLLM
) -> tuple[cst.Module, list[str], list[Refused]]:
    """Fold the control broadcast of each wrapper class of ``path`` (as ``project``
    sees it); returns the module, the classes changed and those refused with why."""
    facts = project.modules.get(path)
    if facts is None:
        return module, [], []
    changed: list[str] = []
    skipped: list[Refused] = []
    # bottom-up: a rewritten class moves no line of the classes above it
    for cls in sorted(facts.classes.values(), key=lambda c: -c.line):
        plan = plan_class(project, cls, receive_lines(cls))
        if plan is None:
            continue
        if isinstance(plan, Refused):
            skipped.append(plan)
            continue
        rewrite = _Rewrite(plan, contract)
        try:
            new = MetadataWrapper(module, unsafe_skip_copy=True).visit(rewrite)
        except _Refuse as exc:
            skipped.append(refused(cls, CODE, exc.message, exc.shape, exc.line))
            continue
        if not (rewrite.done_send and rewrite.done_receive):
            message = f"{cls.name}'s control broadcast or its receive is not a statement of its own"
            skipped.append(refused(cls, CODE, message, "nested broadcast", min(plan.sends)))
            continue
        failed = _verify(project, path, cls, new, contract, plan)
        if failed is not None:
            skipped.append(refused(cls, "MIG110", failed, "not one broadcast less", cls.line))
            continue
        module = new
        changed.append(cls.name)
    if changed:
        module = _drop_unused_import(module, contract)
    return module, changed[::-1], skipped[::-1]


def _verify(
    project: Project, path: str, cls: ClassFacts, new: cst.Module, contract: Contract, plan: Plan
) -> str | None:
    """None when the rewritten class has no control broadcast left, its most
    broadcasts per step drop by one on every role, and its collective schedules
    before and after agree (:func:`~runnercheck.analysis.fold.verify_fold`)."""
    before = project.wrapper_step(cls)
    others = [facts for p, facts in project.modules.items() if p != path]
    after_project = Project([*others, extract_source(new.code, path, contract)], contract)
    after_cls = after_project.modules[path].classes.get(cls.name)
    after = after_project.wrapper_step(after_cls) if after_cls is not None else None
    if before is None or after is None:
        return f"{cls.name} no longer runs inner steps after the rewrite"
    if after.control_paths():
        return f"{cls.name} still broadcasts a control dict before an inner step"
    for role in before.paths:
        old, new_count = before.most(role).count(), after.most(role).count()
        if new_count != old - 1:
            return (
                f"{cls.name}'s {role} step makes {new_count} broadcasts after the rewrite, "
                f"not {old - 1} (was {old})"
            )
    return verify_fold(project, after_project, path, cls.name, plan.sends | plan.receives)


def _drop_unused_import(module: cst.Module, contract: Contract) -> cst.Module:
    context = CodemodContext()
    for imported in module.body:
        small = cstutil.single_small(imported)
        if isinstance(small, cst.ImportFrom) and isinstance(small.names, Sequence):
            for alias in small.names:
                if cstutil.code(alias.name) == contract.broadcast_function and small.module:
                    RemoveImportsVisitor.remove_unused_import(
                        context, cstutil.code(small.module), contract.broadcast_function
                    )
    return RemoveImportsVisitor(context).transform_module(module)


class FoldControlBroadcastCommand(ContractCommand):
    """A wrapper worker's control dict travels in its first inner step's broadcast
    (the inner worker must be in the same file when run on one file)."""

    DESCRIPTION = registry.FOLD_CONTROL_BROADCAST.summary
    NEEDLE = "broadcast_function"

    def rewrite(self, tree: cst.Module) -> cst.Module:
        path, project = self.project(tree)
        new, _changed, skipped = rewrite_module(tree, project, path, self.contract)
        self.warn_skipped(skipped)
        return new
