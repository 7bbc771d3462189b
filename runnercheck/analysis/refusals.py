"""What a class refuses to be built with: code under a test of such a value never runs.

vLLM's ``EncoderDecoderModelRunner.__init__`` calls
``assert_enc_dec_mr_supported_scenario(self)``, which raises ``NotImplementedError``
when ``enc_dec_mr.lora_config is not None``: the runner's ``if self.lora_config:`` block
(which reads the input's ``lora_requests``) never runs on any rank, so a key its input
drops there breaks nothing.

:func:`refused_attrs` reads a function body (the facts keep it per function); a
class's refusals (:func:`class_refusals`) are those of its constructor chain
(``__init__`` along the MRO, followed through ``super().__init__``) and of the
module-level helpers it hands ``self`` to.
"""

from __future__ import annotations

import ast
from typing import TYPE_CHECKING

from runnercheck.analysis.model import ClassFacts, FunctionFacts

if TYPE_CHECKING:  # the facts reader imports this module: it needs no hierarchy
    from runnercheck.analysis.hierarchy import Hierarchy


def refused_attrs(body: list[ast.stmt]) -> dict[str, tuple[str, ...]]:
    """Attributes of each name (a parameter) whose being set makes the body raise, at
    its top level: ``if p.x is not None: raise ...``, ``if p.x or p.y: raise ...``,
    ``assert p.x is None``, ``assert not p.x``."""
    out: dict[str, list[str]] = {}
    for stmt in body:
        if isinstance(stmt, ast.If) and stmt.body and isinstance(stmt.body[-1], ast.Raise):
            test = stmt.test
            tests = list(test.values) if isinstance(test, ast.BoolOp) and _is_or(test) else [test]
            found = [_set_attr(t) for t in tests]
        elif isinstance(stmt, ast.Assert):
            found = [_unset_attr(stmt.test)]
        else:
            continue
        for item in found:
            if item is not None and item[1] not in out.setdefault(item[0], []):
                out[item[0]].append(item[1])
    return {name: tuple(attrs) for name, attrs in out.items()}


def _is_or(test: ast.expr) -> bool:
    return isinstance(test, ast.BoolOp) and isinstance(test.op, ast.Or)


def _attr(node: ast.expr) -> tuple[str, str] | None:
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return node.value.id, node.attr
    return None


def _is_none(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and node.value is None


def _set_attr(test: ast.expr) -> tuple[str, str] | None:
    """``p.x`` or ``p.x is not None``: the test holds when ``p.x`` is set."""
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        if isinstance(test.ops[0], ast.IsNot) and _is_none(test.comparators[0]):
            return _attr(test.left)
        return None
    return _attr(test)


def _unset_attr(test: ast.expr) -> tuple[str, str] | None:
    """``p.x is None`` or ``not p.x``: the assertion fails when ``p.x`` is set."""
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        return _attr(test.operand)
    if isinstance(test, ast.Compare) and len(test.ops) == 1:
        if isinstance(test.ops[0], ast.Is) and _is_none(test.comparators[0]):
            return _attr(test.left)
    return None


def class_refusals(hierarchy: Hierarchy, cls: ClassFacts) -> frozenset[str]:
    """Attributes of ``self`` that ``cls``'s constructor raises on when set: its own,
    and what the helpers it passes ``self`` to refuse."""
    out: set[str] = set()
    ref = hierarchy.resolve_method(cls, "__init__")
    seen: set[int] = set()
    while ref is not None and id(ref.func) not in seen:
        seen.add(id(ref.func))
        func = ref.func
        out.update(_refused_by(func, 0))
        chained = False
        for call in func.calls:
            if call.nested:
                continue
            if call.callee == "super().__init__":
                chained = True
                continue
            if "self" not in call.args or call.callee.startswith(("self.", "super()")):
                continue
            helper = hierarchy.resolve_function(call.callee, func.path)
            if helper is not None:
                out.update(_refused_by(helper, call.args.index("self")))
        ref = hierarchy.resolve_method(cls, "__init__", after=ref.owner) if chained else None
    return frozenset(out)


def _refused_by(func: FunctionFacts, index: int) -> tuple[str, ...]:
    """What ``func`` refuses of its positional parameter ``index``."""
    if index >= len(func.params):
        return ()
    return func.refuses.get(func.params[index], ())
