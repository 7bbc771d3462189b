"""What decides a test: an ``if``/``assert`` test read into a :data:`~runnercheck.
analysis.conditions.Test` over :class:`~runnercheck.analysis.conditions.Atom` (the
collective schedule, :mod:`runnercheck.analysis.schedule`, tells from them which
branches every rank takes alike), and the values a statement binds or a collective
carries, written as subjects (``data['no_spec']``, ``self.do_metadata_broadcast``).
"""

from __future__ import annotations

import ast

from runnercheck.analysis.conditions import AllOf, AnyOf, Atom, Not, Role, Test
from runnercheck.analysis.syntax import literal_text

_COMPARE = {
    ast.Eq: "==",
    ast.NotEq: "!=",
    ast.Is: "is",
    ast.IsNot: "is not",
    ast.Lt: "<",
    ast.LtE: "<=",
    ast.Gt: ">",
    ast.GtE: ">=",
}
#: The flipped comparison (``0 < x`` is ``x > 0``).
_FLIP = {"==": "==", "!=": "!=", "is": "is", "is not": "is not", "<": ">", "<=": ">="}
_FLIP.update({">": "<", ">=": "<="})
#: Names of a rank within the tensor-parallel group (``self.rank``, ``tp_rank``,
#: ``get_tensor_model_parallel_rank()``, ``get_tp_group().rank_in_group``).
_RANK_NAMES = frozenset(
    {
        "rank",
        "_rank",
        "tp_rank",
        "_tp_rank",
        "rank_in_group",
        "get_tensor_model_parallel_rank",
        "get_tp_rank",
    }
)
#: Groups whose rank is not a rank of the tensor-parallel group.
_OTHER_GROUPS = ("pp_", "dp_", "ep_", "pipeline", "data_parallel", "local")
#: At most this many atoms in one test (a longer one is one atom: nothing decides it).
MAX_ATOMS = 8


def subject_of(node: ast.expr) -> str | None:
    """The value ``node`` reads, as written: a name, an attribute chain, a key of one
    (``data['k']``, ``data.get('k', 0)``), ``len(x)``, a call without arguments
    (``get_pp_group().is_first_rank``); None for anything else."""
    kind = node.__class__
    if kind is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if kind is ast.Attribute:
        inner = subject_of(node.value)  # type: ignore[attr-defined]
        return f"{inner}.{node.attr}" if inner else None  # type: ignore[attr-defined]
    if kind is ast.Subscript:
        inner = subject_of(node.value)  # type: ignore[attr-defined]
        key = literal_text(node.slice)  # type: ignore[attr-defined]
        return f"{inner}[{key}]" if inner and key is not None else None
    if kind is ast.Call:
        assert isinstance(node, ast.Call)
        func = node.func
        if node.keywords:
            return None
        if isinstance(func, ast.Name) and func.id == "len" and len(node.args) == 1:
            inner = subject_of(node.args[0])
            return f"len({inner})" if inner else None
        if isinstance(func, ast.Attribute) and func.attr == "get" and 1 <= len(node.args) <= 2:
            key = literal_text(node.args[0])
            inner = subject_of(func.value)
            if inner and key is not None and key[:1] in ("'", '"'):
                return f"{inner}[{key}]"
            return None
        if not node.args:
            inner = subject_of(func)
            return f"{inner}()" if inner else None
    return None


def value_text(node: ast.expr) -> str:
    """A value as :class:`~runnercheck.analysis.model.BindStep` and a collective's
    ``src``/``group``/``carries`` write it: a literal's ``repr`` behind ``=``, a subject,
    else ""."""
    literal = literal_text(node)
    if literal is not None:
        return f"={literal}"
    return subject_of(node) or ""


def dict_items(node: ast.expr | None) -> tuple[tuple[str, str], ...] | None:
    """A literal dict's keys and values as written (``{"k": v}``, ``dict(k=v)``; a
    ``**rest`` is left out); None when ``node`` is not one."""
    if isinstance(node, ast.Dict):
        items: list[tuple[str, str]] = []
        for key, value in zip(node.keys, node.values, strict=True):
            if key is None:
                continue
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                items.append((key.value, value_text(value)))
        return tuple(items)
    if (
        isinstance(node, ast.Call)
        and isinstance(node.func, ast.Name)
        and node.func.id == "dict"
        and not node.args
    ):
        return tuple((kw.arg, value_text(kw.value)) for kw in node.keywords if kw.arg is not None)
    return None


def _last(subject: str) -> str:
    return subject.rsplit(".", 1)[-1].removesuffix("()")


def _is_rank(subject: str | None) -> bool:
    if not subject or "driver" in subject:
        return False
    return _last(subject) in _RANK_NAMES and not any(g in subject for g in _OTHER_GROUPS)


def _is_driver_rank(node: ast.expr) -> bool:
    """``0`` or a name of the driver's rank (``self._driver_rank``)."""
    if literal_text(node) == "0":
        return True
    subject = subject_of(node)
    return subject is not None and "driver" in _last(subject)


def rank_role(node: ast.Compare) -> tuple[str, Role] | None:
    """``self.rank == self._driver_rank`` (``!=``, ``rank == 0``, either way round): the
    comparison (``"=="``/``"!="``) and the role on which ``==`` holds."""
    if len(node.ops) != 1 or type(node.ops[0]) not in (ast.Eq, ast.NotEq):
        return None
    op = _COMPARE[type(node.ops[0])]
    left, right = node.left, node.comparators[0]
    if (_is_rank(subject_of(left)) and _is_driver_rank(right)) or (
        _is_rank(subject_of(right)) and _is_driver_rank(left)
    ):
        return op, "driver"
    return None


def _opaque(node: ast.expr) -> Atom:
    return Atom(f"?{node.lineno}:{node.col_offset + 1}")


def _read(node: ast.expr, flag: str, budget: list[int]) -> Test:
    kind = node.__class__
    if kind is ast.BoolOp:
        assert isinstance(node, ast.BoolOp)
        parts = tuple(_read(value, flag, budget) for value in node.values)
        return AllOf(parts) if isinstance(node.op, ast.And) else AnyOf(parts)
    if kind is ast.UnaryOp and isinstance(node.op, ast.Not):  # type: ignore[attr-defined]
        return Not(_read(node.operand, flag, budget))  # type: ignore[attr-defined]
    budget[0] -= 1
    if kind is ast.Compare:
        assert isinstance(node, ast.Compare)
        rank = rank_role(node)
        if rank is not None:
            atom = Atom(subject_of(node.left) or "rank", role=rank[1])
            return atom if rank[0] == "==" else Not(atom)
        if len(node.ops) == 1 and type(node.ops[0]) in _COMPARE:
            op = _COMPARE[type(node.ops[0])]
            left, right = node.left, node.comparators[0]
            subject, literal = subject_of(left), literal_text(right)
            if subject is not None and literal is not None:
                return Atom(subject, op, literal)
            subject, literal = subject_of(right), literal_text(left)
            if subject is not None and literal is not None:
                return Atom(subject, _FLIP[op], literal)
            a, b = subject_of(left), subject_of(right)
            if a and b:
                return Atom(f"?{a} {op} {b}")  # a truth value named by its text
        return _opaque(node)
    subject = subject_of(node)
    if subject is not None:
        if _last(subject) == flag:
            return Atom(subject, role="driver")
        return Atom(subject)
    return _opaque(node)


def read_test(node: ast.expr, flag: str) -> Test:
    """The test as a formula over atoms (``flag``: the contract's driver flag); a test
    of more than :data:`MAX_ATOMS` atoms is one atom that nothing decides."""
    budget = [MAX_ATOMS]
    test = _read(node, flag, budget)
    return test if budget[0] >= 0 else _opaque(node)


def names_something(test: Test) -> bool:
    """Some atom of the test is a value, not only an unnamed one."""
    if isinstance(test, Atom):
        return not test.subject.startswith("?")
    if isinstance(test, Not):
        return names_something(test.part)
    return any(names_something(part) for part in test.parts)
