"""Writing a runner's new input class and methods from its plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import libcst as cst

from codemods import cstutil
from codemods.merge_broadcasts.runner_model import ATTN_BACKEND, MODEL_INPUT, FieldPlan, RunnerPlan
from runnercheck.contract import Contract


def _field_line(f: FieldPlan) -> str:
    if f.driver_only:
        return (
            "    # Driver-only: the legacy code never broadcast it.\n"
            f"    {f.name}: {f.annotation} = dataclasses.field(\n"
            f'        metadata={{"runnercheck": "driver-only"}})\n'
        )
    return f"    {f.name}: {f.annotation}\n"


def input_class(plan: RunnerPlan, base: str, contract: Contract) -> list[cst.BaseStatement]:
    """The input dataclass (and its TypeVar) that replaces the metadata dict."""
    assert plan.literal is not None
    fields = "".join(_field_line(f) for f in plan.fields)
    names = [f.name for f in plan.fields]
    backend = f"{ATTN_BACKEND}: Any = None"
    cls_call = cstutil.call_text("cls", [f"{n}={n}" for n in names], 15).replace("\n", "\n        ")
    text = (
        f"{cstutil.typevar_line(plan.typevar, plan.input_name)}"
        "\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {plan.input_name}({base}):\n"
        f'    """The input of ``{plan.name}``, rebuilt from the one broadcast per step."""\n\n'
        f"{fields}\n"
        f"    def {contract.as_dict_method}(self) -> Dict[str, Any]:\n"
        "        tensor_dict: Dict[str, Any] = {}\n"
        "        return tensor_dict\n\n"
        "    @classmethod\n"
        f"    def {contract.from_dict_method}(\n"
        f"        cls: Type[{plan.typevar}],\n"
        "        tensor_dict: Dict[str, Any],\n"
        f"        {backend},\n"
        f"    ) -> {plan.typevar}:\n"
        f"        return {cls_call}\n"
    )
    statements = cstutil.parse_statements(text)
    typevar, cdef = statements[0], statements[1]
    assert isinstance(cdef, cst.ClassDef)
    new_items = []
    for item in cstutil.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == contract.as_dict_method:
            item = _fill_as_dict(plan, item)
        elif isinstance(item, cst.FunctionDef) and item.name.value == contract.from_dict_method:
            item = _fill_from_dict(plan, item)
        new_items.append(item)
    cdef = cdef.with_changes(body=cdef.body.with_changes(body=new_items))
    return [typevar, cdef]


def _to_self(node: cstutil.N, fields: set[str]) -> cstutil.N:
    def attr(name: str) -> Callable[[], cst.BaseExpression]:
        return lambda: cstutil.self_attr(name)

    return cstutil.substitute_loads(node, {f: attr(f) for f in fields})


def _renamed(node: cstutil.N, old: str) -> cstutil.N:
    return cstutil.substitute_loads(node, {old: lambda: cst.Name("tensor_dict")})


def _fill_as_dict(plan: RunnerPlan, method: cst.FunctionDef) -> cst.FunctionDef:
    assert plan.literal is not None
    fields = {f.name for f in plan.fields}
    dropped = {d.key for d in plan.dropped}
    keep = [
        i
        for i, e in enumerate(plan.literal.elements)
        if isinstance(e, cst.DictElement) and cstutil.string_value(e.key) not in dropped
    ]
    literal = _to_self(cstutil.keep_elements(plan.literal, keep), fields)
    body = list(cstutil.body_of(method.body))
    first = body[0]
    assert isinstance(first, cst.SimpleStatementLine)
    assign = first.body[0]
    assert isinstance(assign, cst.AnnAssign)
    lead = cstutil.comments(cstutil.leading(plan.literal_stmt)) if plan.literal_stmt else []
    new_first = first.with_changes(body=[assign.with_changes(value=literal)], leading_lines=lead)
    mutations = [_to_self(_renamed(s, plan.dict_var), fields) for s in plan.mutations]
    ret = body[-1]
    if plan.send_stmt is not None:
        ret = cstutil.with_leading(ret, cstutil.comments(cstutil.leading(plan.send_stmt)))
    return method.with_changes(body=method.body.with_changes(body=[new_first, *mutations, ret]))


def _fill_from_dict(plan: RunnerPlan, method: cst.FunctionDef) -> cst.FunctionDef:
    statements: list[cst.BaseStatement] = []
    for statement in [*plan.prologue, *plan.non_driver]:
        moved = _renamed(statement, plan.receive_var)
        statements.append(cast(cst.BaseStatement, moved.visit(_SelfAttnBackend())))
    body = list(cstutil.body_of(method.body))
    if statements:
        lead = cstutil.leading(plan.receive_stmt) if plan.receive_stmt is not None else []
        for check in plan.receive_checks:
            lead = [*lead, *cstutil.comments(cstutil.leading(check))]
        first = statements[0]
        statements[0] = cstutil.with_leading(
            first, cstutil.comments([*lead, *cstutil.leading(first)])
        )
    if plan.uses_attn_backend:
        guard = cstutil.parse_statements(
            f"if {ATTN_BACKEND} is None:\n"
            f'    raise ValueError("{plan.input_name} is rebuilt with the runner\'s {ATTN_BACKEND}")\n'
        )
        statements = [*guard, *statements]
    return method.with_changes(body=method.body.with_changes(body=[*statements, body[-1]]))


class _SelfAttnBackend(cst.CSTTransformer):
    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if cstutil.is_self_attr(original_node, ATTN_BACKEND):
            return cst.Name(ATTN_BACKEND)
        return updated_node


def runner_methods(plan: RunnerPlan, contract: Contract) -> list[cst.FunctionDef]:
    """``prepare_model_input`` and ``make_model_input_from_broadcasted_tensor_dict``
    in place of the legacy method."""
    method = plan.method
    assert method is not None
    fields = [f.name for f in plan.fields]
    body: list[cst.BaseStatement] = []
    if plan.docstring is not None:
        body.append(plan.docstring)
    driver = [*plan.driver_before, *plan.driver_after]
    above = (
        cstutil.comments(cstutil.leading(plan.branch_stmt)) if plan.branch_stmt is not None else []
    )
    if above and driver:
        driver[0] = cstutil.with_leading(driver[0], [*above, *cstutil.leading(driver[0])])
    body.extend([*plan.prologue, *driver])
    call = cstutil.call_text(plan.input_name, [f"{n}={n}" for n in fields], 15)
    ret = cstutil.parse_statements(f"return {call}\n")[0]
    if plan.return_stmt is not None:
        ret = cstutil.with_leading(ret, cstutil.comments(cstutil.leading(plan.return_stmt)))
    body.append(ret)
    returns = cst.Annotation(annotation=cst.Name(plan.input_name))
    prepare = method.with_changes(
        name=cst.Name(contract.prepare_input_method),
        returns=returns,
        body=method.body.with_changes(body=body),
    )
    args = ["tensor_dict"]
    if plan.uses_attn_backend:
        args.append(f"{ATTN_BACKEND}=self.{ATTN_BACKEND}")
    make_call = cstutil.call_text(
        f"{plan.input_name}.{contract.from_dict_method}", args, 15
    ).replace("\n", "\n        ")
    text = (
        "class _:\n"
        f"    def {contract.make_input_method}(\n"
        "        self, tensor_dict: Dict[str, Any]\n"
        f"    ) -> {plan.input_name}:\n"
        f"        return {make_call}\n"
    )
    holder = cstutil.parse_statements(text)[0]
    assert isinstance(holder, cst.ClassDef)
    make = cstutil.body_of(holder.body)[0]
    assert isinstance(make, cst.FunctionDef)
    make = make.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return [prepare, make]


def rewrite_execute(plan: RunnerPlan) -> cst.FunctionDef:
    """``execute_model(self, model_input, kv_caches)`` reading the input's fields."""
    execute = plan.execute
    assert execute is not None and plan.unpack is not None
    input_plan = plan.input_plan
    fields = [f.name for f in input_plan.fields]
    stored = cstutil.bound(execute.body)
    # every unpacked name stored only by the unpack itself becomes model_input.<field>
    unpack_bound = cstutil.bound(plan.unpack)
    others = cstutil.bound_in(s for s in cstutil.body_of(execute.body) if s is not plan.unpack)
    direct: dict[str, str] = {}
    bindings: list[tuple[str, str]] = []
    for name, field_name in zip(plan.unpack_targets, fields, strict=True):
        if name == "_":
            continue
        if name in others or name not in unpack_bound or name in stored - unpack_bound:
            bindings.append((name, field_name))
        else:
            direct[name] = field_name
    fixed: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] | None = None
    for index, original in enumerate(cstutil.body_of(execute.body)):
        statement: cst.BaseStatement = original
        if statement is plan.unpack:
            lines = [
                cstutil.parse_statements(f"{name} = {MODEL_INPUT}.{field_name}\n")[0]
                for name, field_name in bindings
            ]
            if lines:
                lines[0] = cstutil.with_leading(lines[0], cstutil.leading(statement))
                fixed.extend(lines)
            else:
                carry = cstutil.leading(statement)
                if index == 0:
                    carry = cstutil.comments(carry)
            continue
        if carry is not None:
            own = cstutil.leading(statement)
            if not fixed:  # nothing above it any more: no blank line at the top
                own = cstutil.comments(own)
            statement = cstutil.with_leading(statement, [*carry, *own])
            carry = None
        fixed.append(statement)

    def field_of(name: str) -> Callable[[], cst.BaseExpression]:
        return lambda: cstutil.attr_of(MODEL_INPUT, name)

    block = cstutil.substitute_loads(
        execute.body.with_changes(body=fixed), {n: field_of(f) for n, f in direct.items()}
    )
    params = list(execute.params.params)
    first = params[1]
    params[1] = first.with_changes(
        name=cst.Name(MODEL_INPUT),
        annotation=cst.Annotation(annotation=cst.Name(input_plan.input_name)),
        default=None,
        equal=cst.MaybeSentinel.DEFAULT,
    )
    return execute.with_changes(params=execute.params.with_changes(params=params), body=block)


def wrap_self_execute(call: cst.Call, contract: Contract) -> cst.Call:
    """``self.execute_model(a, b)`` -> ``self.execute_model(self.prepare_model_input(a), b)``."""
    first = call.args[0]
    prepared = cst.Call(
        func=cstutil.self_attr(contract.prepare_input_method), args=[cst.Arg(value=first.value)]
    )
    return call.with_changes(args=[first.with_changes(value=prepared), *call.args[1:]])
