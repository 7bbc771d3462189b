"""Planning ``execute_model``: what it calls to prepare its input, and other callers."""

from __future__ import annotations

import libcst as cst

from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts.runner_model import (
    MODEL_INPUT,
    FieldPlan,
    RunnerPlan,
    method_named,
    methods,
    params_of,
)
from codemods.toolkit import cstutil
from codemods.toolkit.positions import Lines
from runnercheck.analysis.requests import REQUEST_AFTER_PREPARE, RequestUses
from runnercheck.contract import Contract


def plan_execute(
    plan: RunnerPlan,
    method_name: str,
    contract: Contract,
    uses: RequestUses | None = None,
    lines: Lines | None = None,
) -> None:
    """Find the unpacking of ``self.<method_name>(...)`` in this runner's own
    ``execute_model``, or raise Refusal. ``uses`` are the reads of the request
    besides preparing (from the analysis layer): each becomes a read of a
    driver-only field of the input, set by ``prepare_model_input``."""
    execute = method_named(plan.cdef, contract.execute_method)
    if execute is None:
        return
    calls = cstutil.find_all(execute, cst.Call, lambda n: _is_self_call(n, method_name))
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
    if len(names) != len(input_plan.returned):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} unpacks {len(names)} values, "
            f"`{method_name}` returns {len(input_plan.returned)}",
            statement,
        )
    others_bound = cstutil.bound_in(s for s in cstutil.body_of(execute.body) if s is not statement)
    used = cstutil.loaded(execute.body) | others_bound
    for name in input_plan.tail_bound:
        same = any(t == name and r == name for t, r in zip(names, input_plan.returned, strict=True))
        clash = name in others_bound or (name in used | set(names) and not same)
        if clash:
            where = [
                n
                for group in cstutil.name_uses(execute.body)
                for n in group
                if n.value == name and n not in cstutil.name_uses(statement)[1]
            ]
            raise Refusal(
                "MIG108",
                plan.path,
                f"{plan.name}.{execute.name.value} already uses the name `{name}`, which the "
                f"statements after the driver split of `{method_name}` bind",
                where[0] if where else execute,
                shape="statements after the driver split",
                advice=f"rename `{name}` in `{execute.name.value}`",
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
    if uses is not None and uses.problem is not None:
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value}: {uses.problem.message}",
            line=uses.problem.line,
            shape=uses.problem.shape,
            advice=uses.problem.advice,
        )
    reads = [n for n in cstutil.name_uses(execute.body)[0] if n.value == request]
    found_uses: list[cst.Name] = []
    if uses is not None and lines is not None:
        for use in uses.uses:
            node = lines.name_at(execute, use.line, use.col)
            if node is not None:
                found_uses.append(node)
    if len(reads) != 1 + len(found_uses):
        stray = next(
            (n for n in reads if n not in found_uses and n is not call.args[0].value), execute
        )
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} uses `{request}` besides preparing the input "
            "in a way the planner cannot trace",
            stray,
            shape=REQUEST_AFTER_PREPARE,
            advice=f"read `{request}` only by name after preparing",
        )
    if found_uses:
        legacy = input_plan.method
        assert legacy is not None
        legacy_request = params_of(legacy)[1].name.value if len(params_of(legacy)) > 1 else ""
        if not legacy_request:
            raise Refusal(
                "MIG105",
                plan.path,
                f"{plan.name}.{execute.name.value} reads `{request}` after preparing, "
                f"but `{method_name}` takes no request to keep it from",
                found_uses[0],
                shape=REQUEST_AFTER_PREPARE,
            )
        annotation = uses.annotation if uses is not None else ""
        if not annotation:
            annotation = "Any"
        elif not annotation.startswith("Optional["):
            annotation = f"Optional[{annotation}]"
        if request not in {f.name for f in input_plan.fields}:
            input_plan.fields.append(
                FieldPlan(request, annotation, driver_only=True, from_request=legacy_request)
            )
        elif not any(f.name == request and f.from_request for f in input_plan.fields):
            raise Refusal(
                "MIG108",
                plan.path,
                f"{plan.name}.{execute.name.value} reads `{request}` after preparing, and "
                f"the input already has a field `{request}`",
                found_uses[0],
                shape=REQUEST_AFTER_PREPARE,
            )
        plan.request_uses = {id(n): request for n in found_uses}
    taken = [n for group in cstutil.name_uses(execute) for n in group if n.value == MODEL_INPUT]
    if taken:
        raise Refusal(
            "MIG108",
            plan.path,
            f"{plan.name}.{execute.name.value} already uses the name `{MODEL_INPUT}`",
            taken[0],
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
        out.extend(c for c in cstutil.find_all(method, cst.Call, lambda n: _is_self_call(n, name)))  # type: ignore[misc]
    return out
