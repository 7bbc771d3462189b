"""The control-flow skeleton of a function (:class:`CallStep`, :class:`BranchStep`, ...):
calls in evaluation order, branches on the driver flag, loops, ``try``, exits; and the
classes that ``self.X = ...`` may hold."""

from __future__ import annotations

import ast

from runnercheck.analysis.decides import (
    dict_items,
    names_something,
    read_test,
    subject_of,
    value_text,
)
from runnercheck.analysis.model import (
    AssertStep,
    BindStep,
    BranchStep,
    CallStep,
    Condition,
    ExitStep,
    FunctionFacts,
    LoopStep,
    Role,
    RoleAssertStep,
    Step,
    TryStep,
)
from runnercheck.analysis.recognise import (
    broadcast_sends,
    classify_collective,
    guards_of,
    role_of,
)
from runnercheck.analysis.syntax import arg_text, dotted, last_name, literal_text, unparse
from runnercheck.contract import Contract

#: Nodes with nothing to record below them: names, constants, operators, contexts.
_LEAVES = frozenset(
    {
        ast.Name,
        ast.Constant,
        ast.Pass,
        ast.Break,
        ast.Continue,
        *(
            kind
            for base in (ast.expr_context, ast.operator, ast.unaryop, ast.cmpop, ast.boolop)
            for kind in base.__subclasses__()
        ),
    }
)
#: Nodes whose bodies do not run where they stand.
_NOT_EXECUTED = frozenset({ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef})
#: Recorded nodes that may read a dict's key (their guards are kept).
_GUARDED = frozenset({ast.Subscript, ast.Call, ast.Delete})
#: Nodes the dict and attribute readers look at.
_RECORDED = frozenset(
    {
        ast.Import,
        ast.ImportFrom,
        ast.Assign,
        ast.AnnAssign,
        ast.AugAssign,
        ast.Delete,
        ast.Subscript,
        ast.Call,
        ast.Return,
    }
)


def _exits(body: list[ast.stmt]) -> bool:
    """The block always leaves the function (its last statement returns or raises)."""
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


class StepReader:
    """The control-flow half of a function reader (see :mod:`runnercheck.analysis.extract`)."""

    facts: FunctionFacts
    self_name: str | None
    imports: dict[str, str]
    contract: Contract
    nodes: list[ast.AST]
    nested: list[ast.AST]
    #: Every positional parameter but ``self``/``cls``.
    param_names: frozenset[str]
    #: Which ranks run the statement being read (None: every rank).
    role: Role | None
    #: The ``if`` conditions around the statement being read, and those of each call
    #: read so far (by line and column).
    conditions: tuple[Condition, ...]
    call_conditions: dict[tuple[int, int], tuple[Condition, ...]]
    call_roles: dict[tuple[int, int], Role]
    #: The role of each recorded node read under one (by ``id``; None: every rank).
    node_roles: dict[int, Role]
    #: The value being read cannot change what a non-driver rank does (an operand of
    #: ``x and self.is_driver_worker``: the whole is False there whatever ``x`` is).
    decided_for_others: bool = False
    #: The tests that decide whether the code being read runs (``if``/``while``/
    #: conditional-expression tests around it, earlier operands of a ``and``/``or``,
    #: an earlier ``if`` of the block that leaves the function), and whether a ``try``
    #: with handlers surrounds it.
    guard_tests: tuple[ast.expr, ...] = ()
    catching: bool = False
    #: Per subscript, call or ``del`` read under a guard (by ``id``): the guard.
    node_guards: dict[int, tuple[tuple[ast.expr, ...], bool]]

    def _call_steps(self, node: ast.AST, out: list[Step]) -> None:
        """Calls in ``node`` in evaluation order (arguments before the call); every node
        visited is also recorded, parents first, in ``self.nodes``."""
        kind = type(node)
        if kind in _LEAVES:
            return
        if kind is ast.BoolOp and self._driver_decides(node, out):  # type: ignore[arg-type]
            return
        if kind is ast.Attribute:
            value = node.value  # type: ignore[attr-defined]
            if (
                isinstance(value, ast.Name)
                and value.id in self.param_names
                and self.role != "driver"
                and not self.decided_for_others
            ):
                read = self.facts.param_attrs.get(value.id, ())
                if node.attr not in read:  # type: ignore[attr-defined]
                    self.facts.param_attrs[value.id] = (*read, node.attr)  # type: ignore[attr-defined]
                key = f"{value.id}.{node.attr}"  # type: ignore[attr-defined]
                needs = self._needs_set()
                before = self.facts.param_attr_guards.get(key)
                self.facts.param_attr_guards[key] = (
                    needs if before is None else tuple(n for n in before if n in needs)
                )
            if value.__class__ not in _LEAVES:
                self._call_steps(value, out)
            return
        if kind in _RECORDED:
            self.nodes.append(node)
            if self.role is not None:
                self.node_roles[id(node)] = self.role
            if (self.guard_tests or self.catching) and kind in _GUARDED:
                self.node_guards[id(node)] = (self.guard_tests, self.catching)
        if kind in _NOT_EXECUTED:
            self.nested.append(node)
            return
        if kind is ast.IfExp or kind is ast.BoolOp:
            self._guarded_parts(node, out)  # type: ignore[arg-type]
            return
        if kind is ast.Call:
            assert isinstance(node, ast.Call)
            if self.conditions or self.role is not None:
                where = (node.lineno, node.col_offset + 1)
                self.call_conditions[where] = self.conditions
                if self.role is not None:
                    self.call_roles[where] = self.role
            if node.func.__class__ not in _LEAVES:
                self._call_steps(node.func, out)
            for arg in node.args:
                if arg.__class__ not in _LEAVES:
                    self._call_steps(arg, out)
            for kw in node.keywords:
                if kw.value.__class__ not in _LEAVES:
                    self._call_steps(kw.value, out)
            callee = dotted(node.func)
            collective = classify_collective(callee, self.imports, self.contract)
            head = callee.split(".", 1)[0]
            if (
                collective is not None
                or head in ("self", "cls", "super()")
                or (self.self_name is not None and head == self.self_name)
            ):
                if self.self_name is not None and head == self.self_name and head != "self":
                    callee = "self" + callee[len(head) :]
                step_broadcast = collective == self.contract.broadcast_function
                sends = step_broadcast and broadcast_sends(node)
                args: tuple[str, ...] = ()
                kwargs: tuple[tuple[str, str], ...] = ()
                if collective is None:
                    args = tuple(arg_text(a) for a in node.args)
                    kwargs = tuple(
                        (kw.arg, arg_text(kw.value)) for kw in node.keywords if kw.arg is not None
                    )
                    out.append(
                        CallStep(
                            line=node.lineno,
                            col=node.col_offset + 1,
                            callee=callee,
                            args=args,
                            kwargs=kwargs,
                        )
                    )
                    return
                out.append(self._collective(node, callee, collective, step_broadcast, sends))
            return
        for name in node._fields:  # (a leaf is not visited: it records nothing)
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST) and item.__class__ not in _LEAVES:
                        self._call_steps(item, out)
            elif isinstance(value, ast.AST) and value.__class__ not in _LEAVES:
                self._call_steps(value, out)

    def _needs_set(self) -> tuple[str, ...]:
        """The ``self`` attributes the ``if`` tests around the code being read require to
        be set: ``if self.x:`` / ``if self.x is not None:`` (their body), ``if not
        self.x:`` / ``if self.x is None:`` alone (their ``else``)."""
        out: list[str] = []
        for cond in self.conditions:
            for guard in cond.guards:
                if not guard.name.startswith("self."):
                    continue
                if cond.then:
                    holds = guard.op == "truthy" or (guard.op == "is not" and guard.value == "None")
                else:
                    holds = (
                        cond.complete
                        and len(cond.guards) == 1
                        and (guard.op == "falsy" or (guard.op == "is" and guard.value == "None"))
                    )
                if holds:
                    out.append(guard.name[5:])
        return tuple(out)

    def _collective(
        self, node: ast.Call, callee: str, collective: str, step_broadcast: bool, sends: bool
    ) -> CallStep:
        """A collective's step: its source, group and payload as written."""
        src = group = ""
        payload: ast.expr | None = node.args[0] if node.args else None
        if len(node.args) > 1:
            src = value_text(node.args[1])
        for kw in node.keywords:
            if kw.arg == "src":
                src = value_text(kw.value)
            elif kw.arg == "group":
                group = value_text(kw.value)
            elif kw.arg == "tensor_dict":
                payload = kw.value
        if not group and "." in callee:
            group = callee.rsplit(".", 1)[0]
        return CallStep(
            line=node.lineno,
            col=node.col_offset + 1,
            callee=callee,
            collective=collective,
            step_broadcast=step_broadcast,
            sends=sends,
            sends_empty=sends and isinstance(payload, ast.Dict) and not payload.keys,
            src=src,
            group=group,
            payload=(subject_of(payload) or "") if payload is not None else "",
            carries=dict_items(payload),
        )

    def _bind(self, stmt: ast.Assign | ast.AnnAssign | ast.AugAssign, out: list[Step]) -> None:
        """What the local names a statement assigns hold from here on: a
        :class:`BindStep` each (an unpacked or augmented name holds an unknown value)."""
        value = stmt.value
        targets = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
        text = ""
        keys: tuple[tuple[str, str], ...] = ()
        test = None
        if value is not None and not isinstance(stmt, ast.AugAssign):
            text, keys = _bound_value(value)
            if isinstance(value, (ast.BoolOp, ast.Compare)) or (
                isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
            ):
                test = read_test(value, self.contract.driver_flag)
        for target in targets:
            if isinstance(target, ast.Name):
                out.append(BindStep(stmt.lineno, target.id, text, keys, test))
            else:
                out.extend(BindStep(stmt.lineno, name) for name in _store_names(target))

    def _guarded_parts(self, node: ast.IfExp | ast.BoolOp, out: list[Step]) -> None:
        """The parts of ``a if t else b`` (``a`` and ``b`` under ``t``) and of ``a and b``
        (``b`` under ``a``), in evaluation order."""
        around = self.guard_tests
        if isinstance(node, ast.IfExp):
            self._call_steps(node.test, out)
            self.guard_tests = (*around, node.test)
            self._call_steps(node.body, out)
            self._call_steps(node.orelse, out)
        else:
            for value in node.values:
                self._call_steps(value, out)
                self.guard_tests = (*self.guard_tests, value)
        self.guard_tests = around

    def _driver_decides(self, node: ast.BoolOp, out: list[Step]) -> bool:
        """``a and self.is_driver_worker and b`` (or ``a or not self.is_driver_worker or
        b``): on a non-driver rank the whole is decided by the flag, so ``a`` is read
        there to no effect and ``b`` is never evaluated (the driver's alone). Reads the
        operands so; False (nothing read) when no operand is the driver flag."""
        flag = self.contract.driver_flag
        # the operand that is False on non-driver ranks ends an ``and`` there; the one
        # that is True there ends an ``or``
        want = "driver" if isinstance(node.op, ast.And) else "non-driver"
        decider = next(
            (i for i, value in enumerate(node.values) if role_of(value, flag)[0] == want),
            None,
        )
        if decider is None:
            return False
        role, decided = self.role, self.decided_for_others
        self.decided_for_others = True
        for value in node.values[:decider]:
            self._call_steps(value, out)
        self.decided_for_others = decided
        if self.role is None:
            self.role = "driver"
        for value in node.values[decider:]:
            self._call_steps(value, out)
        self.role = role
        return True

    def _steps(self, body: list[ast.stmt]) -> tuple[Step, ...]:
        """The skeleton of a block. ``self.role`` follows which ranks run the statement
        being read (None: every rank): inside a branch on the driver flag, and after
        ``if not self.is_driver_worker: return`` or ``assert self.is_driver_worker``."""
        out: list[Step] = []
        flag = self.contract.driver_flag
        outer = self.role
        outer_tests = self.guard_tests
        for stmt in body:
            if isinstance(stmt, ast.If):
                self._call_steps(stmt.test, out)
                then_role, else_role = role_of(stmt.test, flag)
                guards, complete = guards_of(stmt.test)
                test = read_test(stmt.test, flag)
                here = self.role
                around = self.conditions
                tests = self.guard_tests
                self.guard_tests = (*tests, stmt.test)
                self.role = then_role or here
                if guards:
                    self.conditions = (*around, Condition(guards, True, complete))
                then_steps = self._steps(stmt.body)
                self.role = else_role or here
                if guards:
                    self.conditions = (*around, Condition(guards, False, complete))
                else_steps = self._steps(stmt.orelse)
                self.role = here
                self.conditions = around
                # what follows a branch that leaves the function runs under its test
                exits = _exits(stmt.body) or _exits(stmt.orelse)
                self.guard_tests = self.guard_tests if exits else tests
                out.append(
                    BranchStep(
                        stmt.lineno,
                        then_role,
                        else_role,
                        then_steps,
                        else_steps,
                        guards,
                        complete,
                        test,
                    )
                )
                if else_role is not None and _exits(stmt.body) and not stmt.orelse:
                    self.role = else_role
                elif then_role is not None and stmt.orelse and _exits(stmt.orelse):
                    self.role = then_role
            elif isinstance(stmt, (ast.For, ast.AsyncFor)):
                self._call_steps(stmt.iter, out)
                loop_body = self._steps(stmt.body)
                targets = _store_names(stmt.target)
                if targets:  # each pass binds the loop's names anew
                    loop_body = (*(BindStep(stmt.lineno, name) for name in targets), *loop_body)
                loop_else = self._steps(stmt.orelse)
                out.append(
                    LoopStep(
                        stmt.lineno,
                        loop_body,
                        loop_else,
                        range_count(stmt.iter),
                        first_value(stmt.target, stmt.iter),
                        stmt.end_lineno or stmt.lineno,
                    )
                )
            elif isinstance(stmt, ast.While):
                self._call_steps(stmt.test, out)
                tests = self.guard_tests
                self.guard_tests = (*tests, stmt.test)
                loop_body = self._steps(stmt.body)
                self.guard_tests = tests
                out.append(LoopStep(stmt.lineno, loop_body, self._steps(stmt.orelse)))
            elif isinstance(stmt, (ast.With, ast.AsyncWith)):
                for item in stmt.items:
                    self._call_steps(item.context_expr, out)
                out.extend(self._steps(stmt.body))
            elif isinstance(stmt, ast.Try) or type(stmt).__name__ == "TryStar":
                try_stmt = stmt
                catching = self.catching
                self.catching = catching or bool(try_stmt.handlers)  # type: ignore[attr-defined]
                try_body = self._steps(try_stmt.body)  # type: ignore[attr-defined]
                self.catching = catching
                out.append(
                    TryStep(
                        stmt.lineno,
                        try_body,
                        tuple(self._steps(h.body) for h in try_stmt.handlers),  # type: ignore[attr-defined]
                        self._steps(try_stmt.orelse),  # type: ignore[attr-defined]
                        self._steps(try_stmt.finalbody),  # type: ignore[attr-defined]
                    )
                )
            elif isinstance(stmt, ast.Match):
                self._call_steps(stmt.subject, out)
                cases = [self._steps(case.body) for case in stmt.cases]
                # each case is an alternative; model as nested branches
                rest: tuple[Step, ...] = ()
                for case_steps in reversed(cases):
                    rest = (BranchStep(stmt.lineno, None, None, case_steps, rest),)
                out.extend(rest)
            elif isinstance(stmt, ast.Return):
                self.nodes.append(stmt)
                if self.role is not None:
                    self.node_roles[id(stmt)] = self.role
                if stmt.value is not None:
                    self._call_steps(stmt.value, out)
                out.append(ExitStep(stmt.lineno, "return"))
            elif isinstance(stmt, ast.Raise):
                if stmt.exc is not None:
                    self._call_steps(stmt.exc, out)
                out.append(ExitStep(stmt.lineno, "raise"))
            elif isinstance(stmt, ast.Assert):
                self._call_steps(stmt.test, out)
                role, _ = role_of(stmt.test, flag)
                if role is not None:
                    out.append(RoleAssertStep(stmt.lineno, role))
                    self.role = role
                else:
                    test = read_test(stmt.test, flag)
                    if names_something(test):
                        out.append(AssertStep(stmt.lineno, test))
            elif isinstance(stmt, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
                self.nested.append(stmt)
            else:
                self._call_steps(stmt, out)
                if isinstance(stmt, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                    self._bind(stmt, out)
        self.role = outer
        self.guard_tests = outer_tests
        return tuple(out)

    def read_self_constants(self) -> None:
        """``self.X = <literal>`` in the body (``"?"`` when X is also assigned anything
        else), into :attr:`FunctionFacts.self_constants`."""
        if self.self_name is None:
            return
        out = self.facts.self_constants
        for node in self.nodes:
            if not isinstance(node, (ast.Assign, ast.AnnAssign, ast.AugAssign)):
                continue
            targets = node.targets if isinstance(node, ast.Assign) else [node.target]
            for target in targets:
                if (
                    isinstance(target, ast.Attribute)
                    and isinstance(target.value, ast.Name)
                    and target.value.id == self.self_name
                ):
                    literal = None if isinstance(node, ast.AugAssign) else literal_text(node.value)
                    seen = out.get(target.attr)
                    out[target.attr] = literal if literal and seen in (None, literal) else "?"

    def self_attrs(self, out: dict[str, tuple[str, ...]]) -> None:
        """``self.X = ...``: the class names X may hold (into ``out``)."""
        if self.self_name is None:
            return
        env: dict[str, tuple[str, ...]] = {}
        for node in self.nodes:
            if isinstance(node, (ast.Assign, ast.AnnAssign)) and node.value is not None:
                targets = node.targets if isinstance(node, ast.Assign) else [node.target]
                for target in targets:
                    if isinstance(target, ast.Name):
                        found = candidates(node.value, env)
                        env[target.id] = tuple(dict.fromkeys(env.get(target.id, ()) + found))
                    elif (
                        isinstance(target, ast.Attribute)
                        and isinstance(target.value, ast.Name)
                        and target.value.id == self.self_name
                    ):
                        found = candidates(node.value, env)
                        if found:
                            merged = out.get(target.attr, ()) + found
                            out[target.attr] = tuple(dict.fromkeys(merged))


def _bound_value(value: ast.expr) -> tuple[str, tuple[tuple[str, str], ...]]:
    """:attr:`BindStep.value` and :attr:`BindStep.keys` for a value assigned."""
    if isinstance(value, ast.Call):
        items = dict_items(value)
        if items is not None:
            return "{}", items
        return f"@{value.lineno}:{value.col_offset + 1}", ()
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Call):
        key = literal_text(value.slice)
        if key is not None:
            call = value.value
            return f"@{call.lineno}:{call.col_offset + 1}[{key}]", ()
        return "", ()
    if isinstance(value, ast.Dict):
        return "{}", dict_items(value) or ()
    return value_text(value), ()


def _store_names(target: ast.expr) -> list[str]:
    """The plain names an assignment target binds (``a, (b, *c)``)."""
    if isinstance(target, ast.Name):
        return [target.id]
    if isinstance(target, ast.Starred):
        return _store_names(target.value)
    if isinstance(target, (ast.Tuple, ast.List)):
        return [name for elt in target.elts for name in _store_names(elt)]
    return []


def range_count(node: ast.expr) -> str | None:
    """How many times ``for ... in range(N)`` runs its body: the text of ``N``."""
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "range"
        and len(node.args) == 1
        and not node.keywords
    ):
        return unparse(node.args[0])
    return None


def first_value(target: ast.expr, node: ast.expr) -> tuple[str, str] | None:
    """The loop variable and the literal it holds on the first pass: ``for i in
    range(n)`` / ``range(1, n)`` and ``for i, x in enumerate(xs[, start])``."""
    if not (isinstance(node, ast.Call) and isinstance(node.func, ast.Name)) or node.keywords:
        return None
    if node.func.id == "range" and isinstance(target, ast.Name) and 1 <= len(node.args) <= 3:
        start = node.args[0] if len(node.args) > 1 else ast.Constant(0)
        name = target.id
    elif (
        node.func.id == "enumerate"
        and isinstance(target, ast.Tuple)
        and target.elts
        and isinstance(target.elts[0], ast.Name)
        and 1 <= len(node.args) <= 2
    ):
        start = node.args[1] if len(node.args) > 1 else ast.Constant(0)
        name = target.elts[0].id
    else:
        return None
    if isinstance(start, ast.Constant) and type(start.value) is int:
        return name, repr(start.value)
    return None


def candidates(node: ast.expr | None, env: dict[str, tuple[str, ...]]) -> tuple[str, ...]:
    """Class names an expression may construct or name (following local variables)."""
    if node is None:
        return ()
    if isinstance(node, ast.Call):
        callee = dotted(node.func)
        name = last_name(callee)
        if name == "partial" and node.args:
            out: tuple[str, ...] = ()
            for arg in node.args:
                out += candidates(arg, env)
            return tuple(dict.fromkeys(out))
        if isinstance(node.func, ast.Name) and node.func.id in env:
            return env[node.func.id]
        if isinstance(node.func, (ast.Name, ast.Attribute)):
            return (name,)
        return ()
    if isinstance(node, ast.Name):
        return env.get(node.id, (node.id,))
    if isinstance(node, ast.IfExp):
        return tuple(dict.fromkeys(candidates(node.body, env) + candidates(node.orelse, env)))
    if isinstance(node, ast.Attribute):
        return (node.attr,)
    return ()
