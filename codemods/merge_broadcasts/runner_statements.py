"""Recognisers of the statements a legacy method builds its broadcast dict with."""

from __future__ import annotations

import libcst as cst

from codemods.toolkit import cstutil


def assigned_value(statement: cst.BaseStatement, var: str) -> cst.BaseExpression | None:
    small = cstutil.single_small(statement)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Name) and target.value == var:
            return small.value
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
        if small.target.value == var and small.value is not None:
            return small.value
    return None


def _update_call(statement: cst.BaseStatement, var: str) -> cst.Call | None:
    small = cstutil.single_small(statement)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "update"
            and isinstance(func.value, cst.Name)
            and func.value.value == var
            and len(small.value.args) == 1
        ):
            return small.value
    return None


def subscript_key(statement: cst.BaseStatement, var: str) -> str | None:
    small = cstutil.single_small(statement)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if (
            isinstance(target, cst.Subscript)
            and isinstance(target.value, cst.Name)
            and target.value.value == var
            and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)
        ):
            return cstutil.string_value(target.slice[0].slice.value)
    return None


def _is_assert(statement: cst.BaseStatement, var: str) -> bool:
    small = cstutil.single_small(statement)
    return isinstance(small, cst.Assert) and var not in cstutil.loaded(small)


def is_mutation(statement: cst.BaseStatement, var: str) -> bool:
    """``var.update(...)``, ``var[k] = ...``, or an ``if`` (with ``elif``/``else``) whose
    branches only do that (and assert), under a test that does not read ``var``."""
    if _update_call(statement, var) is not None or subscript_key(statement, var) is not None:
        return True
    if isinstance(statement, cst.If):
        if var in cstutil.loaded(statement.test):
            return False
        inner = cstutil.body_of(statement.body)
        if (
            not inner
            or not all(is_mutation(s, var) or _is_assert(s, var) for s in inner)
            or all(_is_assert(s, var) for s in inner)
        ):
            return False
        orelse = statement.orelse
        if orelse is None:
            return True
        if isinstance(orelse, cst.If):
            return is_mutation(orelse, var)
        inner = cstutil.body_of(orelse.body)
        return bool(inner) and all(is_mutation(s, var) or _is_assert(s, var) for s in inner)
    return False


def mutation_update(statement: cst.BaseStatement, var: str) -> cst.Call | None:
    """The first ``var.update(...)`` of a mutation."""
    call = _update_call(statement, var)
    if call is None and isinstance(statement, cst.If):
        for inner in cstutil.body_of(statement.body):
            call = mutation_update(inner, var)
            if call is not None:
                break
    return call


def is_not_none_assert(statement: cst.BaseStatement, var: str) -> bool:
    small = cstutil.single_small(statement)
    if not (isinstance(small, cst.Assert) and small.msg is None):
        return False
    test = small.test
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == var
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )


def spread_target(statements: list[cst.BaseStatement], spread: cst.Call) -> str | None:
    for statement in statements:
        for node in cstutil.find_all(statement, cst.Assign):
            assert isinstance(node, cst.Assign)
            if node.value is spread and len(node.targets) == 1:
                target = node.targets[0].target
                if isinstance(target, cst.Name):
                    return target.value
    return None


def tainted_names(var: str, statements: list[cst.BaseStatement]) -> set[str]:
    """Names whose non-driver value derives from the received dict."""
    tainted = {var}
    assigns: list[tuple[set[str], set[str]]] = []
    for statement in statements:
        for node in cstutil.find_all(statement, (cst.Assign, cst.AnnAssign, cst.AugAssign)):
            value = node.value  # type: ignore[attr-defined]
            if value is None:
                continue
            targets: set[str] = set()
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    targets |= {n.value for n in cstutil.target_names(t.target)}
            else:
                targets |= {n.value for n in cstutil.target_names(node.target)}  # type: ignore[attr-defined]
            assigns.append((targets, cstutil.loaded(value)))
    changed = True
    while changed:
        changed = False
        for targets, reads in assigns:
            if reads & tainted and not targets <= tainted:
                tainted |= targets
                changed = True
    return tainted
