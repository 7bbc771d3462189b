"""Planning ``execute_model``: what it calls to prepare its input, and other callers."""

from __future__ import annotations

import libcst as cst

from codemods import cstutil
from codemods.merge_broadcasts.runner_model import (
    MODEL_INPUT,
    RunnerPlan,
    method_named,
    methods,
    params_of,
)
from codemods.refusal import Refusal
from runnercheck.contract import Contract


def plan_execute(plan: RunnerPlan, method_name: str, contract: Contract) -> None:
    """Find the unpacking of ``self.<method_name>(...)`` in this runner's own
    ``execute_model``, or raise Refusal."""
    execute = method_named(plan.cdef, contract.execute_method)
    if execute is None:
        return
    calls = cstutil.find_all(execute, lambda n: _is_self_call(n, method_name))
    if not calls:
        return
    input_plan = plan.input_plan
    body = list(cstutil.body_of(execute.body))
    found = None
    for statement in body:
        small = cstutil.single_small(statement)
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and small.value in calls:
            found = (statement, small)
            break
    if found is None or len(calls) != 1:
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} calls `self.{method_name}` other than in "
            "one top-level `a, b, ... = self.<method>(...)`",
            calls[0],
        )
    statement, assign = found
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or not all(
        isinstance(e.value, cst.Name) for e in target.elements
    ):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value}: the result of `self.{method_name}` is "
            "not unpacked into plain names",
            statement,
        )
    names = [e.value.value for e in target.elements]  # type: ignore[attr-defined]
    if len(names) != len(input_plan.fields):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} unpacks {len(names)} values, "
            f"`{method_name}` returns {len(input_plan.fields)}",
            statement,
        )
    params = params_of(execute)
    call = assign.value
    assert isinstance(call, cst.Call)
    if (
        len(params) < 2
        or len(call.args) != 1
        or not isinstance(call.args[0].value, cst.Name)
        or call.args[0].value.value != params[1].name.value
        or call.args[0].keyword is not None
    ):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value}: `self.{method_name}` is not called with "
            "the method's first argument alone",
            statement,
        )
    request = params[1].name.value
    reads = [n for n in cstutil.name_uses(execute.body)[0] if n.value == request]
    if len(reads) != 1:
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} uses `{request}` besides preparing the input",
            execute,
        )
    if MODEL_INPUT in {n.value for group in cstutil.name_uses(execute) for n in group}:
        raise Refusal(
            "MIG108",
            plan.path,
            f"{plan.name}.{execute.name.value} already uses the name `{MODEL_INPUT}`",
            execute,
        )
    plan.execute = execute
    plan.unpack = statement
    plan.unpack_targets = names


def _is_self_call(node: cst.CSTNode, name: str) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == name
        and isinstance(node.func.value, cst.Name)
        and node.func.value.value == "self"
    )


def self_calls(
    cdef: cst.ClassDef, name: str, skip: cst.FunctionDef | None, only: set[str] | None = None
) -> list[cst.Call]:
    """Calls ``self.<name>(...)`` in the methods (``only``: the methods known, from
    ``ast``, to make such calls)."""
    out: list[cst.Call] = []
    for method in methods(cdef):
        if method is skip or (only is not None and method.name.value not in only):
            continue
        out.extend(c for c in cstutil.find_all(method, lambda n: _is_self_call(n, name)))  # type: ignore[misc]
    return out
