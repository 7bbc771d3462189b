"""Planning the non-driver side of a worker's step."""

from __future__ import annotations

import libcst as cst

from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts.driver_paths import Located
from codemods.merge_broadcasts.worker_model import WorkerPlan, function_paths, site_at
from codemods.toolkit import cstutil
from runnercheck.contract import Contract


def plan_receive(plan: WorkerPlan, func: cst.FunctionDef, at: Located, contract: Contract) -> None:
    path = plan.path
    small = cstutil.single_small(at.statement)
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and cstutil.is_broadcast(small.value, contract.broadcast_function)
    ):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the receive is not `<dict> = {contract.broadcast_function}(src=...)`",
            at.statement,
        )
    target = small.targets[0].target
    assert isinstance(target, cst.Name)
    var = target.value
    plan.recv_func = func
    plan.recv_var = var
    block, index = at.chain[-1]
    anchor = block[index]
    if index + 1 < len(block):
        nxt = block[index + 1]
        if (
            isinstance(nxt, cst.If)
            and nxt.orelse is None
            and cstutil.ends_with_exit(nxt.body)
            and isinstance(nxt.test, cst.UnaryOperation)
            and isinstance(nxt.test.operator, cst.Not)
            and isinstance(nxt.test.expression, cst.Name)
            and nxt.test.expression.value == var
        ):
            anchor = nxt
            plan.recv_guarded = True
    plan.recv_anchor = anchor
    site = plan.non_driver_site
    assert site is not None
    if site.func is not func:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the non-driver calls the runner in `{site.func.name.value}`, "
            f"not in `{func.name.value}` where it receives",
            site.call,
        )
    keys = {k.key: k for k in plan.keys}
    defaults: dict[str, str | None] = {}
    accounted: set[int] = set()
    for node in cstutil.find_all(func, (cst.Call, cst.Subscript)):
        key = None
        default: str | None = None
        if isinstance(node, cst.Call):
            key = cstutil.dict_method_key(node, var)
            if key is not None:
                f = cst.ensure_type(node.func, cst.Attribute)
                default = (
                    cstutil.code(node.args[1].value)
                    if len(node.args) > 1
                    else ("None" if f.attr.value == "get" else None)
                )
                accounted.add(id(f.value))
        elif (
            isinstance(node, cst.Subscript)
            and isinstance(node.value, cst.Name)
            and node.value.value == var
            and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)
        ):
            key = cstutil.string_value(node.slice[0].slice.value)
            accounted.add(id(node.value))
        if key is None:
            continue
        if key not in keys:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}: the non-driver reads key {key!r}, which the driver's "
                "dict does not carry",
                node,
            )
        if key in defaults and defaults[key] != default:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}: key {key!r} is read with two different defaults",
                node,
            )
        defaults[key] = default
        plan.key_reads[id(node)] = key
    for node in cstutil.find_all(func, cst.If):
        assert isinstance(node, cst.If)
        test = node.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        if isinstance(test, cst.Name) and test.value == var:
            accounted.add(id(test))
    where = function_paths(func, contract.driver_flag)
    for name in cstutil.name_uses(func)[0]:
        if name.value != var or id(name) in accounted:
            continue
        if site_at(where, name).path == "driver":
            continue  # the driver's own variable of the same name
        raise Refusal(
            "MIG102", path, f"{plan.name}: `{var}` is used in a way the planner cannot trace", name
        )
    for key, default in defaults.items():
        keys[key].default = default
