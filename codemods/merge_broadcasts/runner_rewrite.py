"""Writing a runner's new input class and methods from its plan."""

from __future__ import annotations

from collections.abc import Callable
from typing import cast

import libcst as cst

from codemods.merge_broadcasts.helper_records import read_fields
from codemods.merge_broadcasts.narrowing import narrow_reads
from codemods.merge_broadcasts.runner_flags import keep_non_driver_flags
from codemods.merge_broadcasts.runner_model import (
    ATTN_BACKEND,
    MODEL_INPUT,
    ExtraPlan,
    FieldPlan,
    RunnerPlan,
)
from codemods.toolkit import cstutil
from codemods.toolkit.cstutil import is_optional, without_optional
from runnercheck.contract import VLLM, Contract

DEFAULT_PREPARE = VLLM.prepare_input_method


def _field_line(f: FieldPlan) -> str:
    """One field of the input class (on one line; the layout pass wraps it). As in
    vLLM, a driver-only field is simply left out of the broadcast dict; the comment
    above it says so (``runnercheck check`` reads it as the declaration)."""
    if f.from_request:
        return (
            f"    # Driver-only: set by {DEFAULT_PREPARE}; the other ranks get None.\n"
            f"    {f.name}: {f.annotation} = None\n"
        )
    if f.none_default:
        return (
            "    # Driver-only: not broadcast; the other ranks get None.\n"
            f"    {f.name}: {f.annotation} = None\n"
        )
    if f.driver_only:
        return (
            "    # Driver-only: not broadcast; the other ranks build their own value.\n"
            f"    {f.name}: {f.annotation}\n"
        )
    return f"    {f.name}: {f.annotation}\n"


def input_class(plan: RunnerPlan, base: str, contract: Contract) -> list[cst.BaseStatement]:
    """The input dataclass (and its TypeVar) that replaces the metadata dict."""
    assert plan.literal is not None
    fields = "".join(_field_line(f) for f in plan.fields)
    names = [f.name for f in plan.fields if not f.from_request and not f.none_default]
    backend = f"{ATTN_BACKEND}: Any = None"
    cls_call = cstutil.call_text("cls", [f"{n}={n}" for n in names], 15).replace("\n", "\n        ")
    doc = cstutil.docstring(
        f"The input of ``{plan.name}``, rebuilt from the one broadcast per step.",
        4,
        short=f"The input of ``{plan.name}``.",
    )
    text = (
        f"{cstutil.typevar_line(plan.typevar, plan.input_name)}"
        "\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {plan.input_name}({base}):\n"
        f"{doc}\n"
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
    mutations.extend(_to_self(_extra_update(plan, extra), fields) for extra in plan.extras)
    ret = body[-1]
    if plan.send_stmt is not None:
        ret = cstutil.with_leading(ret, cstutil.comments(cstutil.leading(plan.send_stmt)))
    return method.with_changes(body=method.body.with_changes(body=[new_first, *mutations, ret]))


def _extra_update(plan: RunnerPlan, extra: ExtraPlan) -> cst.If:
    """The driver's ``if <cond>: ...; broadcast(X)`` as ``if <cond>: ...;
    tensor_dict.update(<X's items under the prefix>)``."""
    inner = list(cstutil.body_of(extra.send_if.body))
    send = inner[-1]
    small = cstutil.single_small(send)
    assert isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
    payload = cstutil.broadcast_payload(small.value)
    assert payload is not None
    received = extra.shape.received
    head = inner[:-1]
    if plan.dict_var in cstutil.bound_in(head):  # the legacy code reused the dict's name
        head = [cstutil.rename(s, plan.dict_var, received) for s in head]
        payload = cstutil.rename(payload, plan.dict_var, received)
    else:
        head = [_renamed(s, plan.dict_var) for s in head]
        payload = _renamed(payload, plan.dict_var)
    prefix = extra.shape.prefix
    update = cstutil.parse_statements(
        "tensor_dict.update({\n"
        f'    "{prefix}" + key: value\n'
        f"    for key, value in {cstutil.code(payload)}.items()\n"
        "})\n"
    )[0]
    update = cstutil.with_leading(update, cstutil.comments(cstutil.leading(send)))
    return extra.send_if.with_changes(body=extra.send_if.body.with_changes(body=[*head, update]))


def _extractions(plan: RunnerPlan) -> list[cst.BaseStatement]:
    """The extra broadcasts' values, taken out of the merged dict under their prefix
    before anything reads the rest of it."""
    out: list[cst.BaseStatement] = []
    for extra in plan.extras:
        prefix = extra.shape.prefix
        out.extend(
            cstutil.parse_statements(
                f"{extra.shape.received} = {{\n"
                f'    key[len("{prefix}"):]: tensor_dict.pop(key)\n'
                "    for key in list(tensor_dict)\n"
                f'    if key.startswith("{prefix}")\n'
                "}\n"
            )
        )
    return out


def _fill_from_dict(plan: RunnerPlan, method: cst.FunctionDef) -> cst.FunctionDef:
    statements: list[cst.BaseStatement] = []
    for statement in [*plan.prologue, *plan.non_driver]:
        if any(statement is skip for skip in plan.from_dict_skip):
            continue
        moved = _renamed(statement, plan.receive_var)
        if any(statement is p for p in plan.prologue):
            # (``prepare_model_input`` keeps the prologue too: this one is a copy of its own)
            statements.append(cast(cst.BaseStatement, moved.visit(_SelfAttnBackend())))
        else:  # the non-driver branch is written here only: nothing else is copied
            statements.append(_backend_read_locally(moved))
    statements = [*_extractions(plan), *statements]
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
            f'    raise ValueError("{plan.input_name} needs the runner\'s {ATTN_BACKEND}")\n'
        )
        statements = [*guard, *statements]
    return method.with_changes(body=method.body.with_changes(body=[*statements, body[-1]]))


def _backend_read_locally(statement: cst.BaseStatement) -> cst.BaseStatement:
    """``self.<backend>`` read as the parameter ``<backend>`` (the nodes on the way to
    each read are made anew, the rest kept)."""
    reads = cstutil.find_all(
        statement, cst.Attribute, lambda n: cstutil.is_self_attr(n, ATTN_BACKEND)
    )
    return cstutil.replace_nodes(statement, {id(read): cst.Name(ATTN_BACKEND) for read in reads})


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
    body: list[cst.BaseStatement] = []
    if plan.docstring is not None:
        body.append(plan.docstring)
    driver = keep_non_driver_flags(
        [*plan.driver_before, *plan.driver_after],
        plan.non_driver,
        contract.driver_flag,
        plan.flag_defaults,
    )
    above = (
        cstutil.comments(cstutil.leading(plan.branch_stmt)) if plan.branch_stmt is not None else []
    )
    if above and driver:
        driver[0] = cstutil.with_leading(driver[0], [*above, *cstutil.leading(driver[0])])
    body.extend([*plan.prologue, *driver])
    values = [f"{f.name}={f.from_request or f.name}" for f in plan.fields]
    call = cstutil.call_text(plan.input_name, values, 15)
    ret = cstutil.parse_statements(f"return {call}\n")[0]
    if plan.return_stmt is not None:
        ret = cstutil.with_leading(ret, cstutil.comments(cstutil.leading(plan.return_stmt)))
    body.append(ret)
    body = read_fields(body, plan.record_reads)
    body = _without_dead_targets(body, cstutil.loaded(method))
    returns = cst.Annotation(annotation=cst.Name(plan.input_name))
    prepare = method.with_changes(
        name=cst.Name(contract.prepare_input_method),
        returns=returns,
        body=method.body.with_changes(body=body),
    )
    prepare = _required_request(prepare)
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


def _required_request(prepare: cst.FunctionDef) -> cst.FunctionDef:
    """The driver prepares from a request list it always has: a legacy
    ``requests: Optional[X]`` with ``assert requests is not None`` first becomes
    ``requests: X`` without the assert."""
    params = list(prepare.params.params)
    if len(params) < 2 or params[1].annotation is None:
        return prepare
    name = params[1].name.value
    annotation = cstutil.code(params[1].annotation.annotation)
    if not is_optional(annotation) or without_optional(annotation) == annotation:
        return prepare
    body = list(cstutil.body_of(prepare.body))
    first = 1 if body and _is_docstring(body[0]) else 0
    if len(body) <= first:
        return prepare
    small = cstutil.single_small(body[first])
    if not (
        isinstance(small, cst.Assert)
        and cstutil.code(small.test).strip() == f"{name} is not None"
        and small.msg is None
    ):
        return prepare
    rest = body[first + 1 :]
    if rest:
        lead = [*cstutil.comments(cstutil.leading(body[first])), *cstutil.leading(rest[0])]
        rest[0] = cstutil.with_leading(rest[0], lead)
    params[1] = params[1].with_changes(
        annotation=cst.Annotation(annotation=cst.parse_expression(without_optional(annotation)))
    )
    return prepare.with_changes(
        params=prepare.params.with_changes(params=params),
        body=prepare.body.with_changes(body=[*body[:first], *rest]),
    )


def _is_docstring(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)


def _without_dead_targets(
    body: list[cst.BaseStatement], read_before: set[str]
) -> list[cst.BaseStatement]:
    """Names a tuple unpacking binds that the legacy method read (in the dict it
    broadcast) and nothing reads any more become ``_``."""
    read_now: set[str] = set()
    for statement in body:
        read_now |= cstutil.loaded(statement)
    if "_" in read_now:
        return body
    dead = (read_before - read_now) - {"_"}
    out: list[cst.BaseStatement] = []
    for statement in body:
        small = cstutil.single_small(statement)
        if (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, (cst.Tuple, cst.List))
        ):
            target = small.targets[0].target
            elements = [
                e.with_changes(value=cst.Name("_"))
                if isinstance(e.value, cst.Name) and e.value.value in dead
                else e
                for e in target.elements
            ]
            if elements != list(target.elements):
                elements = _star_trailing(elements)
                new_target = target.with_changes(elements=elements)
                new_small = small.with_changes(
                    targets=[small.targets[0].with_changes(target=new_target)]
                )
                assert isinstance(statement, cst.SimpleStatementLine)
                statement = statement.with_changes(body=[new_small])
        out.append(statement)
    return out


def _star_trailing(elements: list[cst.BaseElement]) -> list[cst.BaseElement]:
    """Two or more ``_`` at the end of an unpacking become one ``*_``."""

    def unused(e: cst.BaseElement) -> bool:
        return isinstance(e, cst.Element) and isinstance(e.value, cst.Name) and e.value.value == "_"

    if any(isinstance(e, cst.StarredElement) for e in elements):
        return elements
    count = 0
    while count < len(elements) and unused(elements[len(elements) - 1 - count]):
        count += 1
    if count < 2 or count == len(elements):
        return elements
    last = elements[-1]
    star = cst.StarredElement(value=cst.Name("_"), comma=last.comma)
    return [*elements[:-count], star]


def rewrite_execute(plan: RunnerPlan) -> cst.FunctionDef:
    """``execute_model(self, model_input, kv_caches)`` reading the input's fields.

    The statements that ran after the legacy driver split (every rank ran them) run
    first, where the unpacking stood, reading the input's fields."""
    execute = plan.execute
    assert execute is not None and plan.unpack is not None
    input_plan = plan.input_plan
    fields = {f.name for f in input_plan.fields}
    tail_bound = set(input_plan.tail_bound)
    stored = cstutil.bound(execute.body)
    # every unpacked name stored only by the unpack itself becomes model_input.<field>
    unpack_bound = cstutil.bound(plan.unpack)
    others = cstutil.bound_in(s for s in cstutil.body_of(execute.body) if s is not plan.unpack)
    direct: dict[str, str] = {}
    bindings: list[tuple[str, str]] = []
    for name, returned in zip(plan.unpack_targets, input_plan.returned, strict=True):
        if name == "_":
            continue
        if returned in tail_bound:
            if name != returned:
                bindings.append((name, returned))
            continue
        if name in others or name not in unpack_bound or name in stored - unpack_bound:
            bindings.append((name, f"{MODEL_INPUT}.{returned}"))
        else:
            direct[name] = returned
    requests: dict[int, cst.CSTNode] = {
        key: cstutil.attr_of(MODEL_INPUT, name) for key, name in plan.request_uses.items()
    }
    fixed: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] | None = None
    tail_at: int | None = None
    for index, original in enumerate(cstutil.body_of(execute.body)):
        statement: cst.BaseStatement = original
        if statement is plan.unpack:
            lines = [cstutil.parse_statements(f"{name} = {value}\n")[0] for name, value in bindings]
            tail_at = len(fixed)
            if lines and not input_plan.tail:
                lines[0] = cstutil.with_leading(lines[0], cstutil.leading(statement))
                fixed.extend(lines)
            elif not input_plan.tail:
                carry = cstutil.leading(statement)
                if index == 0:
                    carry = cstutil.comments(carry)
            else:
                fixed.extend(lines)
            continue
        if plan.request_uses:
            statement = cstutil.replace_nodes(statement, requests)
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
    if input_plan.tail and tail_at is not None:
        tail = _tail_statements(input_plan, fields, tail_bound)
        lead = cstutil.leading(plan.unpack)
        if tail_at == 0:
            lead = cstutil.comments(lead)
        own = cstutil.comments(cstutil.leading(tail[0]))
        tail[0] = cstutil.with_leading(tail[0], [*lead, *own])
        body = list(block.body)
        block = block.with_changes(body=[*body[:tail_at], *tail, *body[tail_at:]])
    params = list(execute.params.params)
    first = params[1]
    params[1] = first.with_changes(
        name=cst.Name(MODEL_INPUT),
        annotation=cst.Annotation(annotation=cst.Name(input_plan.input_name)),
        default=None,
        equal=cst.MaybeSentinel.DEFAULT,
    )
    optional = {f.name for f in input_plan.fields if is_optional(f.annotation)}
    values = [f"{MODEL_INPUT}.{name}" for name in sorted(optional)]
    values += [
        name for name, value in bindings if value.removeprefix(f"{MODEL_INPUT}.") in optional
    ]
    new = execute.with_changes(params=execute.params.with_changes(params=params), body=block)
    return narrow_reads(new, values, plan.value_params)


def _tail_statements(
    plan: RunnerPlan, fields: set[str], tail_bound: set[str]
) -> list[cst.BaseStatement]:
    """The legacy tail, reading the input's fields: ``model_input.<f>`` where the tail
    never rebinds ``f``, else a local bound from the field first."""

    def field_of(name: str) -> Callable[[], cst.BaseExpression]:
        return lambda: cstutil.attr_of(MODEL_INPUT, name)

    read = set()
    for statement in plan.tail:
        read |= cstutil.loaded(statement)
    rebound = sorted((read & fields) & tail_bound)
    head = [cstutil.parse_statements(f"{name} = {MODEL_INPUT}.{name}\n")[0] for name in rebound]
    direct = {name: field_of(name) for name in (read & fields) - tail_bound}
    moved = [cstutil.substitute_loads(s, direct) for s in plan.tail]
    return [*head, *moved]


def wrap_self_execute(call: cst.Call, contract: Contract) -> cst.Call:
    """``self.execute_model(a, b)`` -> ``self.execute_model(self.prepare_model_input(a), b)``."""
    first = call.args[0]
    prepared = cst.Call(
        func=cstutil.self_attr(contract.prepare_input_method), args=[cst.Arg(value=first.value)]
    )
    return call.with_changes(args=[first.with_changes(value=prepared), *call.args[1:]])
