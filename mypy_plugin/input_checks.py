"""Checks of a class that defines the input side of the contract.

Any class defining ``from_broadcasted_tensor_dict`` or ``as_broadcastable_tensor_dict``
itself (a runner's input type, vLLM's ``WorkerInput``, ...) gets:

* RC202 ``from-dict-fixed-return``: the classmethod is declared to return a fixed
  class instead of ``Self`` or a ``cls``-bound type variable, or builds a fixed
  class (``ModelInput(...)``) instead of ``cls(...)``;
* RC205 ``unbroadcastable-value``: a value put in the dict that
  ``as_broadcastable_tensor_dict`` returns has a type that cannot be broadcast.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from mypy.nodes import (
    AssignmentStmt,
    Block,
    CallExpr,
    DictExpr,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    IfStmt,
    IndexExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    ReturnStmt,
    Statement,
    StrExpr,
    TryStmt,
    TypeInfo,
    Var,
    WhileStmt,
    WithStmt,
)
from mypy.plugin import CheckerPluginInterface
from mypy.types import (
    AnyType,
    CallableType,
    Instance,
    Overloaded,
    Type,
    TypeType,
    TypeVarType,
    get_proper_type,
)

from mypy_plugin import errors
from mypy_plugin.broadcastable import BroadcastableTypes
from mypy_plugin.compat import local_type_map, name_expressions
from mypy_plugin.config import PluginSettings
from mypy_plugin.members import Member
from mypy_plugin.report import Reporter


@dataclass(frozen=True)
class DictValue:
    """One value put in the broadcast dict, and how messages name it."""

    label: str
    expr: Expression


def defines_input_methods(info: TypeInfo, settings: PluginSettings) -> bool:
    names = info.names
    config = settings.config
    return config.from_dict_method in names or config.as_dict_method in names


class _BodyFacts:
    """Statements of one function body: returns, assignments and call statements, in
    nested blocks too (nested functions and classes left out)."""

    def __init__(self) -> None:
        self.returns: list[ReturnStmt] = []
        self.assignments: list[AssignmentStmt] = []
        self.calls: list[CallExpr] = []

    def collect(self, block: Block) -> None:
        for stmt in block.body:
            if isinstance(stmt, ReturnStmt):
                self.returns.append(stmt)
            elif isinstance(stmt, AssignmentStmt):
                self.assignments.append(stmt)
            elif isinstance(stmt, ExpressionStmt) and isinstance(stmt.expr, CallExpr):
                self.calls.append(stmt.expr)
            for inner in _inner_blocks(stmt):
                self.collect(inner)


def _inner_blocks(stmt: Statement) -> list[Block]:
    if isinstance(stmt, IfStmt):
        return [*stmt.body, *([stmt.else_body] if stmt.else_body else [])]
    if isinstance(stmt, (ForStmt, WhileStmt)):
        return [stmt.body, *([stmt.else_body] if stmt.else_body else [])]
    if isinstance(stmt, WithStmt):
        return [stmt.body]
    if isinstance(stmt, TryStmt):
        return [
            stmt.body,
            *stmt.handlers,
            *([stmt.else_body] if stmt.else_body else []),
            *([stmt.finally_body] if stmt.finally_body else []),
        ]
    if isinstance(stmt, Block):
        return [stmt]
    return []


def _body_facts(func: FuncDef) -> _BodyFacts:
    facts = _BodyFacts()
    facts.collect(func.body)
    return facts


def _is_cls_bound(signature: CallableType) -> bool:
    """``-> Self``, or ``(cls: type[T], ...) -> T``."""
    ret = get_proper_type(signature.ret_type)
    if not isinstance(ret, TypeVarType) or not signature.arg_types:
        return False
    first = get_proper_type(signature.arg_types[0])
    if not isinstance(first, TypeType):
        return False
    item = get_proper_type(first.item)
    return isinstance(item, TypeVarType) and item.id == ret.id


class InputChecker:
    """Runs RC202/RC205 on the contract methods ``info`` defines itself."""

    def __init__(
        self,
        info: TypeInfo,
        settings: PluginSettings,
        reporter: Reporter,
        types: BroadcastableTypes | None = None,
    ) -> None:
        self.info = info
        self.settings = settings
        self.config = settings.config
        self.reporter = reporter
        #: Shared by every class of a run, so that each type is decided once.
        self.types = (
            types if types is not None else BroadcastableTypes(settings.broadcastable_types)
        )

    def run(self, values_now: bool = True) -> list[DictValue]:
        """Run the checks; return the values of ``as_broadcastable_tensor_dict`` that have
        no type yet (mypy checks function bodies after the class statement), or all of
        them unless ``values_now``: pass them to :meth:`check_values` once the module's
        bodies are checked (their types are in mypy's type map then, nothing to infer)."""
        from_dict = self.member(self.config.from_dict_method)
        if from_dict is not None:
            self.check_from_dict(from_dict)
        as_dict = self.member(self.config.as_dict_method)
        if as_dict is None or as_dict.func is None or as_dict.kind != "method":
            return []
        values = list(_dict_values(as_dict.func))
        return self.check_values(as_dict, values) if values_now else values

    def member(self, name: str) -> Member | None:
        symbol = self.info.names.get(name)
        if symbol is None or symbol.node is None:
            return None
        return Member(self.info, name, symbol.node)

    # ------------------------------------------------------------------ RC202
    def check_from_dict(self, member: Member) -> None:
        func = member.func
        if func is None or member.kind != "classmethod" or self.info.is_final:
            return
        signature = member.signature
        ret = get_proper_type(signature.ret_type) if signature is not None else None
        if signature is not None and _is_cls_bound(signature):
            return  # a fixed class built in the body is mypy's [return-value] error
        if isinstance(ret, Instance):
            self.reporter.error(
                errors.FROM_DICT_FIXED_RETURN,
                f'"{member.qualname}" returns the fixed class {self.reporter.fmt(ret)}; '
                'declare "-> Self" (or a TypeVar bound by "cls") so subclasses need no cast()',
                func,
            )
        elif ret is not None and not _is_unannotated(ret):
            return  # some other declared type: not this rule's business
        for stmt in _body_facts(func).returns:
            built = _fixed_class_built(stmt.expr)
            if built is not None:
                self.reporter.error(
                    errors.FROM_DICT_FIXED_RETURN,
                    f'"{member.qualname}" builds "{built.name}(...)" instead of "cls(...)", '
                    f'so subclasses get a "{built.name}"',
                    stmt,
                )

    # ------------------------------------------------------------------ RC205
    def check_values(self, member: Member, values: list[DictValue]) -> list[DictValue]:
        """RC205 on ``values`` of ``member``'s dict; return those without a type yet."""
        untyped: list[DictValue] = []
        for value in values:
            typ = _expression_type(self.reporter.api, value.expr)
            if typ is None:
                untyped.append(value)
                continue
            found = self.types.offence(typ)
            if found is None:
                continue
            shown, part = self.reporter.fmt(typ), self.reporter.fmt(found.leaf)
            route = " -> ".join(found.steps())
            if route:
                subject = f"its type {shown} contains {part} at {route}, which"
            elif part != shown:
                subject = f"its type {shown} contains {part}, which"
            else:
                subject = f"its type {shown}"
            self.reporter.error(
                errors.UNBROADCASTABLE_VALUE,
                f'Value for {value.label} in the dict of "{member.qualname}" cannot be '
                f"broadcast: {subject} {_why_not(found.leaf)}",
                value.expr,
            )
        return untyped


def _why_not(offender: Type) -> str:
    proper = get_proper_type(offender)
    if isinstance(proper, TypeType) or (isinstance(proper, CallableType) and proper.is_type_obj()):
        return "is a class object"
    if isinstance(proper, (CallableType, Overloaded)):
        return "is a function"
    return (
        "is not a tensor, number, str, bytes, None, container or dataclass "
        '(if it pickles, list it in "broadcastable_types")'
    )


def _is_unannotated(typ: Type) -> bool:
    return isinstance(typ, AnyType)


def _fixed_class_built(expr: Expression | None) -> TypeInfo | None:
    """The class of ``return SomeClass(...)`` (None for ``cls(...)`` and anything else)."""
    if isinstance(expr, CallExpr) and isinstance(expr.callee, RefExpr):
        node = expr.callee.node
        if isinstance(node, TypeInfo):
            return node
    return None


def _label(key: Expression | None) -> str:
    if key is None:
        return "an unpacked mapping"
    if isinstance(key, StrExpr):
        return f'key "{key.value}"'
    return "a computed key"


def _dict_values(func: FuncDef) -> Iterator[DictValue]:
    """(label, value) of what the function puts in the dict it returns: a returned dict
    display, or a local name returned after being built from a display or ``dict(...)``
    and filled with ``d[key] = value``, ``d.update(...)`` or ``d.setdefault(...)``."""
    facts = _body_facts(func)
    returned: set[str] = set()
    for stmt in facts.returns:
        if isinstance(stmt.expr, DictExpr):
            yield from _display_values(stmt.expr)
        elif isinstance(stmt.expr, NameExpr):
            returned.add(stmt.expr.name)
    if not returned:
        return
    for assignment in facts.assignments:
        rvalue = assignment.rvalue
        for lvalue in assignment.lvalues:
            if isinstance(lvalue, NameExpr) and lvalue.name in returned:
                if isinstance(rvalue, DictExpr):
                    yield from _display_values(rvalue)
                elif _is_dict_call(rvalue):
                    assert isinstance(rvalue, CallExpr)
                    yield from _keyword_values(rvalue)
            elif (
                isinstance(lvalue, IndexExpr)
                and isinstance(lvalue.base, NameExpr)
                and lvalue.base.name in returned
            ):
                yield DictValue(_label(lvalue.index), rvalue)
    for call in facts.calls:
        callee = call.callee
        if not (
            isinstance(callee, MemberExpr)
            and isinstance(callee.expr, NameExpr)
            and callee.expr.name in returned
        ):
            continue
        if callee.name == "update":
            for arg, name in zip(call.args, call.arg_names, strict=True):
                if name is not None:
                    yield DictValue(f'key "{name}"', arg)
                elif isinstance(arg, DictExpr):
                    yield from _display_values(arg)
        elif callee.name == "setdefault" and len(call.args) == 2:
            yield DictValue(_label(call.args[0]), call.args[1])


def _display_values(display: DictExpr) -> Iterator[DictValue]:
    for key, value in display.items:
        if key is not None:
            yield DictValue(_label(key), value)


def _is_dict_call(expr: Expression) -> bool:
    return (
        isinstance(expr, CallExpr)
        and isinstance(expr.callee, RefExpr)
        and expr.callee.fullname == "builtins.dict"
    )


def _keyword_values(call: CallExpr) -> Iterator[DictValue]:
    for arg, name in zip(call.args, call.arg_names, strict=True):
        if name is not None:
            yield DictValue(f'key "{name}"', arg)


def _expression_type(api: CheckerPluginInterface, expr: Expression) -> Type | None:
    """The type of ``expr``, a value inside a method body checked separately from its
    class: the type the checker stored when it checked the body, or else the type of the
    expression evaluated now, as long as every variable it reads has a type already
    (None otherwise: the body has not been checked yet)."""
    checker: Any = api
    has_type = getattr(checker, "has_type", None)
    if has_type is not None and has_type(expr):
        typ = checker.lookup_type(expr)
        return typ if isinstance(typ, Type) else None
    names = name_expressions(expr)
    if any(isinstance(name.node, Var) and name.node.type is None for name in names):
        return None
    with api.msg.filter_errors(), local_type_map(checker):
        return api.get_expression_type(expr)
