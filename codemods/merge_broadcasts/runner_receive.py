"""Planning the non-driver side of a legacy method and the keys it receives."""

from __future__ import annotations

import libcst as cst

from codemods.framework.refusal import Refusal
from codemods.framework.results import DroppedKey
from codemods.merge_broadcasts.runner_model import ATTN_BACKEND, RunnerPlan, params_of
from codemods.merge_broadcasts.runner_statements import (
    is_not_none_assert,
    mutation_update,
    spread_target,
)
from codemods.toolkit import cstutil
from runnercheck.contract import Contract


def plan_non_driver(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    block: list[cst.BaseStatement],
    fields: list[str],
    contract: Contract,
) -> None:
    path = plan.path
    fn = contract.broadcast_function
    first = cstutil.single_small(block[0]) if block else None
    call = first.value if isinstance(first, cst.Assign) else None
    if not (
        isinstance(first, cst.Assign)
        and len(first.targets) == 1
        and isinstance(first.targets[0].target, cst.Name)
        and isinstance(call, cst.Call)
        and cstutil.is_broadcast(call, fn)
        and cstutil.broadcast_payload(call) is None
    ):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value}: the non-driver branch does not start "
            f"with `<dict> = {fn}(src=...)`",
            block[0] if block else method,
        )
    target = first.targets[0].target
    assert isinstance(target, cst.Name)
    plan.receive_var = var = target.value
    plan.receive_stmt = block[0]
    rest = block[1:]
    # `assert <dict> is not None` right after the receive only narrows the broadcast's
    # Optional result; the input's classmethod gets a dict, so the check stays behind.
    while rest and is_not_none_assert(rest[0], var):
        plan.receive_checks.append(rest.pop(0))
    plan.non_driver = rest
    for statement in plan.non_driver:
        if cstutil.contains(statement, cst.Call, lambda n: cstutil.is_broadcast(n, fn)):
            raise Refusal(
                "MIG101",
                path,
                f"{plan.name}.{method.name.value}: a second broadcast on the non-driver path",
                statement,
            )
    # runner state read on the non-driver path
    for statement in [*plan.prologue, *plan.non_driver]:
        attrs = {
            n.attr.value  # type: ignore[attr-defined]
            for n in cstutil.find_all(statement, cst.Attribute, cstutil.is_self_attr)
        }
        bare_self = sum(1 for n in cstutil.name_uses(statement)[0] if n.value == "self") - len(
            cstutil.find_all(statement, cst.Attribute, cstutil.is_self_attr)
        )
        extra = attrs - {ATTN_BACKEND}
        if extra or bare_self > 0:
            what = f"self.{sorted(extra)[0]}" if extra else "self"
            raise Refusal(
                "MIG106",
                path,
                f"{plan.name}.{method.name.value}: the non-driver path reads `{what}`",
                statement,
            )
        if ATTN_BACKEND in attrs:
            plan.uses_attn_backend = True
    # keys read by name, and the spread
    consumed, spreads, other = _receive_uses(plan.non_driver, var)
    if other:
        raise Refusal(
            "MIG102",
            path,
            f"{plan.name}.{method.name.value}: `{var}` is used in a way the planner "
            f"cannot trace: `{cstutil.code(other[0]).strip()}`",
            other[0],
        )
    produced = set(plan.keys)
    for key in consumed:
        if key not in produced:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}.{method.name.value}: the non-driver reads key {key!r} "
                "that the driver's dict literal does not carry",
                _key_read_at(plan.non_driver, key) or method,
            )
    _plan_keys(plan, method, fields, consumed, spreads)


def _key_read_at(statements: list[cst.BaseStatement], key: str) -> cst.CSTNode | None:
    """The first statement that reads ``key`` by name."""
    for statement in statements:
        strings = cstutil.find_all(statement, cst.SimpleString)
        if key in {cstutil.string_value(cst.ensure_type(n, cst.SimpleString)) for n in strings}:
            return statement
    return None


def _receive_uses(
    statements: list[cst.BaseStatement], var: str
) -> tuple[set[str], list[cst.Call], list[cst.CSTNode]]:
    """Keys read by name from ``var``, calls spreading ``**var``, other uses."""
    consumed: set[str] = set()
    spreads: list[cst.Call] = []
    accounted: set[int] = set()
    for statement in statements:
        for node in cstutil.find_all(statement, (cst.Call, cst.Subscript, cst.If)):
            if isinstance(node, cst.Call):
                read = cstutil.dict_method_key(node, var)
                if read is not None:
                    consumed.add(read)
                    accounted.add(id(cst.ensure_type(node.func, cst.Attribute).value))
                for arg in node.args:
                    if (
                        arg.star == "**"
                        and isinstance(arg.value, cst.Name)
                        and arg.value.value == var
                    ):
                        spreads.append(node)
                        accounted.add(id(arg.value))
            elif isinstance(node, cst.Subscript):
                if (
                    isinstance(node.value, cst.Name)
                    and node.value.value == var
                    and len(node.slice) == 1
                    and isinstance(node.slice[0].slice, cst.Index)
                    and cstutil.string_value(node.slice[0].slice.value) is not None
                ):
                    consumed.add(cstutil.string_value(node.slice[0].slice.value) or "")
                    accounted.add(id(node.value))
            elif isinstance(node, cst.If):
                test = node.test
                if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                    test = test.expression
                if isinstance(test, cst.Name) and test.value == var:
                    accounted.add(id(test))
    other: list[cst.CSTNode] = []
    for statement in statements:
        for name in cstutil.name_uses(statement)[0]:
            if name.value == var and id(name) not in accounted:
                other.append(name)
    return consumed, spreads, other


def _plan_keys(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    fields: list[str],
    consumed: set[str],
    spreads: list[cst.Call],
) -> None:
    """Check every literal value is an expression of the fields, or drop a
    provably redundant duplicate."""
    assert plan.literal is not None
    params = {p.name.value for p in params_of(method)}
    locals_ = cstutil.bound_in([*plan.prologue, *plan.driver_before]) | params
    fieldset = set(fields)
    kept: list[str] = []
    for element in plan.literal.elements:
        assert isinstance(element, cst.DictElement)
        key = cstutil.string_value(element.key) or ""
        foreign = (cstutil.loaded(element.value) & locals_) - fieldset
        if not foreign:
            kept.append(key)
            continue
        found = _redundant(plan, key, consumed, spreads, fieldset)
        if found is None:
            raise Refusal(
                "MIG102",
                plan.path,
                f"{plan.name}.{method.name.value}: key {key!r} carries "
                f"`{cstutil.code(element.value).strip()}`, which is not one of the returned values "
                "and is not provably carried by another broadcast value",
                element,
            )
        plan.dropped.append(DroppedKey(key, *found, node=element))
    for statement in plan.mutations:
        foreign = (cstutil.loaded(statement) & locals_) - fieldset - {plan.dict_var}
        if foreign:
            raise Refusal(
                "MIG102",
                plan.path,
                f"{plan.name}.{method.name.value}: `{cstutil.code(statement).strip()}` "
                f"reads `{sorted(foreign)[0]}`, which is not one of the returned values",
                statement,
            )
    plan.keys = [k for k in plan.keys if k not in {d.key for d in plan.dropped}]


def _redundant(
    plan: RunnerPlan, key: str, consumed: set[str], spreads: list[cst.Call], fields: set[str]
) -> tuple[str, str, str] | None:
    """(carrier, merged call, constructor) proving ``key`` may be dropped, or None
    when that cannot be proved.

    Proof: (1) the driver merges ``<value>.<m>()`` of a returned value into the
    same dict after the literal, so that dict's entry for ``key`` wins; (2) the
    non-driver never reads ``key`` by name, only through ``**dict`` into the
    call that rebuilds that value; (3) every call of that constructor in the
    runner modules passes ``key=`` explicitly, so the value always carries it.
    Whether (3) holds is checked by the group planner (it sees all modules);
    here the local part is checked and the constructor is recorded."""
    if key in consumed or len(spreads) != 1:
        return None
    spread = spreads[0]
    rebuilt = spread_target(plan.non_driver, spread)
    if rebuilt is None or rebuilt not in fields:
        return None
    merged = None
    for statement in plan.mutations:
        call = mutation_update(statement, plan.dict_var)
        if call is None:
            continue
        arg = call.args[0].value
        if (
            isinstance(arg, cst.Call)
            and isinstance(arg.func, cst.Attribute)
            and isinstance(arg.func.value, cst.Name)
            and arg.func.value.value == rebuilt
            and not arg.args
        ):
            merged = f"{rebuilt}.{arg.func.attr.value}()"
    if merged is None:
        return None
    return rebuilt, merged, cstutil.call_name(spread) or "?"
