"""Writing a worker's input class and its merged step from its plan."""

from __future__ import annotations

from collections.abc import Sequence

import libcst as cst

from codemods.merge_broadcasts.narrowing import optional_attributes
from codemods.merge_broadcasts.runner_model import MODEL_INPUT
from codemods.merge_broadcasts.worker_model import WORKER_INPUT, KeyPlan, WorkerPlan
from codemods.toolkit import cstutil
from runnercheck.contract import Contract


def field_annotation(key: KeyPlan) -> str:
    """The field's annotation: ``Optional[...]`` when the receiver defaults it to None,
    unless the driver always sends a value that is never None (the default never
    applies: the ranks relied on it being set)."""
    if key.default == "None" and key.annotation != "Any" and not key.valued:
        return f"Optional[{key.annotation}]"
    return key.annotation


def worker_input_class(plan: WorkerPlan, contract: Contract) -> list[cst.BaseStatement]:
    fields = [(k.key, field_annotation(k), k.default) for k in plan.keys]
    doc = (
        f"What ``{plan.name}`` broadcasts for itself each step, next to the model input.",
        f"What ``{plan.name}`` broadcasts for itself each step.",
    )
    text = worker_input_text(plan.input_name, plan.typevar, doc, fields, contract)
    return cstutil.parse_statements(text)


def worker_input_text(
    name: str,
    typevar: str,
    doc: tuple[str, str],
    fields: Sequence[tuple[str, str, str | None]],
    contract: Contract,
    width: int = 79,
    unset: frozenset[str] = frozenset(),
) -> str:
    """The TypeVar line and the frozen dataclass of a worker input: ``fields`` are
    (key, annotation as written, default the receiver used or None); ``doc`` the
    docstring and a shorter one for when it does not fit; ``unset`` the fields that
    default to None (they follow the others)."""
    lines = "".join(
        f"    {key}: {annotation}{' = None' if key in unset else ''}\n"
        for key, annotation, _ in fields
    )
    entries = "".join(f'            "{key}": self.{key},\n' for key, _, _ in fields)
    pops = "".join(
        f'            {key}=tensor_dict.pop("{key}"'
        + (f", {default}" if default is not None else "")
        + "),\n"
        for key, _, default in fields
    )
    docstring = cstutil.docstring(doc[0], 4, short=doc[1], width=width)
    return (
        f"{cstutil.typevar_line(typevar, name)}"
        "\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {name}:\n"
        f"{docstring}\n"
        f"{lines}\n"
        f"    def {contract.as_dict_method}(self) -> Dict[str, Any]:\n"
        "        return {\n"
        f"{entries}"
        "        }\n\n"
        "    @classmethod\n"
        f"    def {contract.from_dict_method}(\n"
        f"        cls: Type[{typevar}], tensor_dict: Dict[str, Any]\n"
        f"    ) -> {typevar}:\n"
        f'        """Pop this input\'s keys; what remains is the model input\'s."""\n'
        "        return cls(\n"
        f"{pops}"
        "        )\n"
    )


def needs_optional(plan: WorkerPlan) -> bool:
    return any(k.default == "None" and k.annotation != "Any" for k in plan.keys)


def rewrite_worker(
    plan: WorkerPlan, contract: Contract, asserted: Sequence[str] = ()
) -> cst.ClassDef:
    """The worker class with one broadcast per step. ``asserted``: fields the worker's
    receiver read as set that its (shared) input class makes Optional; the non-driver
    asserts each one it reads right after the receive."""
    assert plan.send is not None and plan.literal_stmt is not None
    assert plan.driver_site is not None and plan.non_driver_site is not None
    attr = plan.runner_attr
    ri = f"self.{attr}"
    replace: dict[int, cst.CSTNode] = {}
    inserts_before: dict[int, list[cst.BaseStatement]] = {}
    inserts_after: dict[int, list[cst.BaseStatement]] = {}
    # driver: the dict literal becomes the worker input
    literal_small = cstutil.single_small(plan.literal_stmt)
    make = cst.SimpleStatementLine(
        body=[
            cst.Assign(
                targets=[cst.AssignTarget(target=cst.Name(WORKER_INPUT))],
                value=_literal_as_call(plan),
            )
        ]
    )
    if isinstance(literal_small, cst.AnnAssign):
        as_dict = literal_small.with_changes(
            value=cst.parse_expression(f"{WORKER_INPUT}.{contract.as_dict_method}()")
        )
        as_dict_stmt = cst.SimpleStatementLine(body=[as_dict])
    else:
        as_dict_stmt = cstutil.parse_statements(
            f"{plan.dict_var} = {WORKER_INPUT}.{contract.as_dict_method}()\n"
        )[0]  # type: ignore[assignment]
    make = make.with_changes(leading_lines=plan.literal_stmt.leading_lines)  # type: ignore[attr-defined]
    replace[id(plan.literal_stmt)] = cst.FlattenSentinel([make, as_dict_stmt])  # type: ignore[assignment]
    request = cstutil.code(plan.request) if plan.request is not None else ""
    prepare = (
        f"{MODEL_INPUT} = {ri}.{contract.prepare_input_method}({request})\n"
        f"{plan.dict_var}.update({MODEL_INPUT}.{contract.as_dict_method}())\n"
    )
    if plan.condition is not None:
        cond = cstutil.code(plan.condition)
        prepare = f"if {cond}:\n" + "".join(f"    {line}\n" for line in prepare.splitlines())
    inserts_before[id(plan.send)] = cstutil.parse_statements(prepare)
    # non-driver: pop the worker's keys, then rebuild the model input
    read = set(plan.key_reads.values())
    pop = cstutil.parse_statements(
        f"{WORKER_INPUT} = {plan.input_name}.{contract.from_dict_method}({plan.recv_var})\n"
        + "".join(f"assert {WORKER_INPUT}.{key} is not None\n" for key in asserted if key in read)
    )
    assert plan.recv_anchor is not None
    inserts_after[id(plan.recv_anchor)] = pop
    make_input = f"{MODEL_INPUT} = {ri}.{contract.make_input_method}({plan.recv_var})\n"
    nd = plan.non_driver_site
    if nd.where.path == "both":
        # Past the driver split the received dict is Optional again for a type checker;
        # on the non-driver path the guard after the receive has already left when it
        # was empty, so say so before using it.
        check = f"    assert {plan.recv_var} is not None\n" if plan.recv_guarded else ""
        make_input = f"if not self.{contract.driver_flag}:\n{check}    {make_input}"
    inserts_before[id(nd.where.statement)] = [
        *inserts_before.get(id(nd.where.statement), []),
        *cstutil.parse_statements(make_input),
    ]
    optional = optional_attributes(plan.cdef)
    for site in {id(plan.driver_site.call): plan.driver_site, id(nd.call): nd}.values():
        # the runner's execute_model is typed now: a kv cache the worker declares
        # Optional (set before the first step) is asserted set where it is passed
        caches = [cstutil.dotted(a.value) for a in site.call.args[1:]]
        checks = [
            f"assert {c} is not None\n"
            for c in caches
            if c is not None and c.startswith("self.") and c[5:] in optional
        ]
        if checks and isinstance(site.where.statement, cst.SimpleStatementLine):
            at = id(site.where.statement)
            inserts_before[at] = [
                *inserts_before.get(at, []),
                *cstutil.parse_statements("".join(checks)),
            ]
        first = site.call.args[0]
        replace[id(site.call)] = site.call.with_changes(
            args=[first.with_changes(value=cst.Name(MODEL_INPUT)), *site.call.args[1:]]
        )
    for node_id, key in plan.key_reads.items():
        replace[node_id] = cstutil.attr_of(WORKER_INPUT, key)
    edited = {*replace, *inserts_before, *inserts_after}
    new = plan.cdef.visit(
        _WorkerEdit(replace, inserts_before, inserts_after, cstutil.holding(plan.cdef, edited))
    )
    assert isinstance(new, cst.ClassDef)
    return new


def _literal_as_call(plan: WorkerPlan) -> cst.Call:
    """``{"k": v, ...}`` -> ``WorkerInput(k=v, ...)`` keeping the literal's layout
    and comments (each entry's comma carries the whitespace that follows it)."""
    small = cstutil.single_small(plan.literal_stmt) if plan.literal_stmt is not None else None
    literal = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
    assert isinstance(literal, cst.Dict)
    args = []
    for element in literal.elements:
        assert isinstance(element, cst.DictElement)
        args.append(
            cst.Arg(
                keyword=cst.Name(cstutil.string_value(element.key) or ""),
                value=element.value,
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
                comma=element.comma,
            )
        )
    return cst.Call(
        func=cst.Name(plan.input_name),
        args=args,
        whitespace_before_args=literal.lbrace.whitespace_after,
    ).with_changes(
        args=[
            *args[:-1],
            *(
                [args[-1].with_changes(whitespace_after_arg=literal.rbrace.whitespace_before)]
                if args
                else []
            ),
        ]
    )


class _WorkerEdit(cst.CSTTransformer):
    def __init__(
        self,
        replace: dict[int, cst.CSTNode],
        before: dict[int, list[cst.BaseStatement]],
        after: dict[int, list[cst.BaseStatement]],
        to_visit: set[int],
    ) -> None:
        self.replace = replace
        self.before = before
        self.after = after
        self.to_visit = to_visit

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) in self.to_visit  # only the way to the edited statements

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        new = self.replace.get(id(original_node), updated_node)
        before = self.before.get(id(original_node))
        after = self.after.get(id(original_node))
        if before or after:
            items = list(new.nodes) if isinstance(new, cst.FlattenSentinel) else [new]
            if before and items:
                first = items[0]
                lead = first.leading_lines
                before = [before[0].with_changes(leading_lines=lead), *before[1:]]
                items[0] = first.with_changes(leading_lines=[])
            return cst.FlattenSentinel([*(before or []), *items, *(after or [])])
        return new
