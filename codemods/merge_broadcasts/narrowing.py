"""Asserts where the rewritten code reads an Optional value that the legacy code
relied on being set, so that plain mypy sees what the legacy code took for granted.

* a runner's ``execute_model`` read an unpacked local (untyped, from a tuple); it
  now reads ``model_input.<field>``, declared ``Optional[...]`` because a receiver
  may build it from an empty dict. Where the legacy code dereferenced it
  unchecked (``attn_metadata.prefill_metadata``), the field is asserted set just
  before the first statement that does, in that block;
* a worker passes ``self.<attr>`` (declared ``Optional[...]``, set before the
  first step) to a runner whose ``execute_model`` now has a typed signature:
  it is asserted set before the call;
* ``execute_model`` passes such a field to a method of the runner whose parameter
  states a type that is not Optional (vLLM's ``set_active_loras(lora_requests,
  lora_mapping: LoRAMapping)`` under ``if self.lora_config:``): the legacy code
  relied on the value being set there; it is asserted set before the call.

A read guarded by a test of the value itself (``if x.f is not None``, ``if x.f:``,
``x.f and x.f.y``) is left as it is.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

import libcst as cst

from codemods.toolkit import cstutil
from codemods.toolkit.cstutil import is_optional


def optional_attributes(cdef: cst.ClassDef) -> set[str]:
    """``self.<name>`` attributes the class declares Optional (``self.x: Optional[T] = ...``)."""
    found: set[str] = set()
    for node in cstutil.find_read(cdef, cst.AnnAssign):
        assert isinstance(node, cst.AnnAssign)
        target = cstutil.dotted(node.target)
        if target is not None and target.startswith("self.") and target.count(".") == 1:
            if is_optional(cstutil.code(node.annotation.annotation)):
                found.add(target.removeprefix("self."))
    return found


#: per method name, the positions (after ``self``) and keywords of its parameters
#: that take a value (typed, not Optional, no ``None`` default)
ValueParams = Mapping[str, frozenset[int | str]]


def value_parameters(classes: Iterable[cst.ClassDef]) -> dict[str, frozenset[int | str]]:
    """The methods of ``classes`` (a class and its bases, nearest first: the first
    definition of a name wins) and their parameters that take a value."""
    out: dict[str, frozenset[int | str]] = {}
    for cdef in classes:
        for item in cstutil.body_of(cdef.body):
            if not isinstance(item, cst.FunctionDef) or item.name.value in out:
                continue
            params = [*item.params.posonly_params, *item.params.params][1:]
            wanted: set[int | str] = set()
            for index, param in enumerate(params):
                if param.annotation is None:
                    continue
                text = cstutil.code(param.annotation.annotation).strip()
                none_default = (
                    param.default is not None and cstutil.code(param.default).strip() == "None"
                )
                if text in ("Any", "typing.Any", "object") or is_optional(text) or none_default:
                    continue
                wanted |= {index, param.name.value}
            for param in item.params.kwonly_params:
                if param.annotation is not None and not is_optional(
                    cstutil.code(param.annotation.annotation)
                ):
                    wanted.add(param.name.value)
            out[item.name.value] = frozenset(wanted)
    return out


def _passes(node: cst.CSTNode, value: str, params: ValueParams) -> bool:
    """``value`` is passed to ``self.<method>(...)`` where that parameter takes a value."""
    for found in cstutil.find_all(node, cst.Call):
        assert isinstance(found, cst.Call)
        func = found.func
        if not (
            isinstance(func, cst.Attribute)
            and cstutil.code(func.value).strip() == "self"
            and func.attr.value in params
        ):
            continue
        wanted = params[func.attr.value]
        for index, arg in enumerate(found.args):
            if arg.star or cstutil.code(arg.value).strip() != value:
                continue
            if (arg.keyword.value if arg.keyword is not None else index) in wanted:
                return True
    return False


def _assert_set(value: str) -> cst.BaseStatement:
    return cstutil.parse_statements(f"assert {value} is not None\n")[0]


def _guards(node: cst.CSTNode, value: str) -> bool:
    """The node tests ``value`` itself (a None comparison or a truth test)."""
    for found in cstutil.find_all(node, (cst.Comparison, cst.If)):
        if isinstance(found, cst.Comparison):
            if cstutil.code(found.left).strip() == value:
                return True
        elif isinstance(found, cst.If) and cstutil.code(found.test).strip() == value:
            return True
    for found in cstutil.find_all(node, cst.BooleanOperation):
        assert isinstance(found, cst.BooleanOperation)
        if value in (cstutil.code(found.left).strip(), cstutil.code(found.right).strip()):
            return True
    return False


def _dereferences(node: cst.CSTNode, value: str, params: ValueParams | None = None) -> bool:
    """``value.<attr>`` or ``value[...]`` is read under ``node``, or ``value`` is passed
    where ``params`` says a value is taken (outside nested blocks when ``node`` is a
    compound statement: its header only)."""
    if isinstance(node, cst.BaseCompoundStatement):
        parts: list[cst.CSTNode] = [
            n
            for n in (
                getattr(node, "test", None),
                getattr(node, "iter", None),
                getattr(node, "items", None),
            )
            if isinstance(n, cst.CSTNode)
        ]
        items = getattr(node, "items", None)
        if isinstance(items, Sequence):
            parts += [i for i in items if isinstance(i, cst.CSTNode)]
    else:
        parts = [node]
    for part in parts:
        for found in cstutil.find_all(part, (cst.Attribute, cst.Subscript)):
            assert isinstance(found, (cst.Attribute, cst.Subscript))
            if cstutil.code(found.value).strip() == value:
                return True
        if params and _passes(part, value, params):
            return True
    return False


class _Narrow(cst.CSTTransformer):
    """Per block, an assert before the first unguarded dereference of each value. It
    enters only what holds blocks: every other node (a simple statement, an expression
    of a header) is left as it is, not copied."""

    def __init__(self, values: Sequence[str], params: ValueParams | None = None) -> None:
        self.values = list(values)
        self.params = params
        self.settled: list[set[str]] = [set()]

    def on_visit(self, node: cst.CSTNode) -> bool:
        return isinstance(node, cstutil.BLOCK_HOLDERS) and super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        if not isinstance(original_node, cstutil.BLOCK_HOLDERS):
            return updated_node
        return super().on_leave(original_node, updated_node)

    def _block(self, body: Sequence[cst.BaseStatement]) -> list[cst.BaseStatement]:
        out: list[cst.BaseStatement] = []
        settled = self.settled[-1]
        for statement in body:
            for value in self.values:
                if value in settled:
                    continue
                if _guards(statement, value):
                    settled.add(value)  # the code checks it itself from here on
                    continue
                if _dereferences(statement, value, self.params):
                    check = _assert_set(value)
                    check = cstutil.with_leading(check, cstutil.leading(statement))
                    statement = cstutil.with_leading(statement, [])
                    out.append(check)
                    settled.add(value)
            out.append(statement)
        return out

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.settled.append(set(self.settled[-1]))

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        new = updated_node.with_changes(body=self._block(updated_node.body))
        self.settled.pop()
        return new


def narrow_reads(
    func: cst.FunctionDef, values: Sequence[str], params: ValueParams | None = None
) -> cst.FunctionDef:
    """``func`` with ``assert <value> is not None`` before the first statement of a
    block that dereferences ``value`` unguarded, or passes it where ``params`` says a
    value is taken (outer blocks first)."""
    if not values:
        return func
    # outer blocks first: an assert at the top level covers the nested blocks after it
    settled: set[str] = set()
    top: list[cst.BaseStatement] = []
    narrow = _Narrow(values, params)
    for statement in cstutil.body_of(func.body):
        narrow.settled = [set(settled)]
        for value in values:
            if value in settled:
                continue
            if _guards(statement, value):
                settled.add(value)
            elif _dereferences(statement, value, params):
                check = cstutil.with_leading(_assert_set(value), cstutil.leading(statement))
                statement = cstutil.with_leading(statement, [])
                top.append(check)
                settled.add(value)
        narrow.settled = [set(settled)]
        if isinstance(statement, cst.BaseCompoundStatement):
            new = statement.visit(narrow)
            assert isinstance(new, cst.BaseStatement)
            statement = new
        top.append(statement)
    assert isinstance(func.body, cst.IndentedBlock)
    return func.with_changes(body=func.body.with_changes(body=top))
