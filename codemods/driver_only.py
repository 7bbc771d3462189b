"""``driver-only``: declare the fields an input dataclass never broadcasts.

A field of a model-runner input that ``as_broadcastable_tensor_dict`` does not
send is silently the default on the other ranks. When that is deliberate
(vLLM's ``seq_lens``, pooling metadata), the field should say so; this codemod
rewrites each such field to carry the documented marker::

    seq_lens: Optional[List[int]] = dataclasses.field(
        default=None, metadata={"runnercheck": "driver-only"})

Fields read by the class's (or, through ``super()``, its parents')
``as_broadcastable_tensor_dict`` are left alone, as are fields already marked
or listed in the ``driver_only`` configuration. A class whose parent cannot be
seen is skipped (reported, not guessed).
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

import libcst as cst

from codemods import cstutil as cu
from codemods import imports, inputs
from codemods.command import ContractCommand
from runnercheck.contract import VLLM, Contract

NAME = "driver-only"
MARKER = '{"runnercheck": "driver-only"}'


@dataclass
class Skipped:
    cls: str
    code: str
    message: str


def _field_call(module: cst.Module) -> tuple[str, bool]:
    """How this module spells ``dataclasses.field`` and whether an import is needed."""
    for statement in module.body:
        small = cu.single_small(statement)
        if (
            isinstance(small, cst.ImportFrom)
            and cu.dotted(small.module or cst.Name("")) == "dataclasses"
        ):
            if not isinstance(small.names, cst.ImportStar) and any(
                cu.code(a.name) == "field" and a.asname is None for a in small.names
            ):
                return "field", False
    return "dataclasses.field", "dataclasses" not in imports.imported_names(module)


def _marked(value: cst.BaseExpression | None, spelling: str) -> cst.BaseExpression | None:
    """The new value of a field, or None when it cannot be rewritten safely."""
    marker = cst.parse_expression(MARKER)
    if value is None:
        return cst.parse_expression(f"{spelling}(metadata={MARKER})")
    if isinstance(value, cst.Call) and cu.call_name(value) == "field":
        for arg in value.args:
            if arg.keyword is not None and arg.keyword.value == "metadata":
                return None
        last = value.args[-1] if value.args else None
        args = list(value.args)
        if last is not None:
            args[-1] = last.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
        args.append(
            cst.Arg(
                keyword=cst.Name("metadata"),
                value=marker,
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
            )
        )
        return value.with_changes(args=args)
    call = cst.parse_expression(f"{spelling}(default=None, metadata={MARKER})")
    assert isinstance(call, cst.Call)
    return call.with_changes(args=[call.args[0].with_changes(value=value), call.args[1]])


def rewrite_module(
    module: cst.Module,
    lookup: inputs.ClassLookup,
    contract: Contract = VLLM,
) -> tuple[cst.Module, dict[str, list[str]], list[Skipped]]:
    """Mark unbroadcast fields; returns the module, ``{class: [fields]}`` changed,
    and the classes skipped with why."""
    spelling, needs_import = _field_call(module)
    neutral = frozenset(inputs.contract_base_names(contract))
    changed: dict[str, list[str]] = {}
    skipped: list[Skipped] = []
    body: list[cst.BaseStatement] = []
    for statement in module.body:
        if not (isinstance(statement, cst.ClassDef) and inputs.is_dataclass(statement)):
            body.append(statement)
            continue
        name = statement.name.value
        own = inputs.method(statement, contract.as_dict_method)
        reads: set[str] = set()
        everything = False
        need_parent = own is None or inputs.calls_super(own, contract.as_dict_method)
        if own is not None and not cu.contains(own, lambda n: isinstance(n, cst.Return)):
            body.append(statement)  # it cannot be broadcast at all (raises): not an input
            continue
        if own is not None:
            reads |= inputs.self_reads(own)
            everything = inputs.reads_all_fields(own)
        if need_parent:
            bases = [cu.code(b.value) for b in statement.bases]
            inherited = inputs.inherited_reads(bases, lookup, contract.as_dict_method, neutral)
            if inherited is None:
                skipped.append(
                    Skipped(name, "MIG201", f"{name}: a base class of it is not in the given paths")
                )
                body.append(statement)
                continue
            if own is None and not inherited[0] and not inherited[1]:
                body.append(statement)  # not a broadcast input
                continue
            reads |= inherited[0]
            everything = everything or inherited[1]
        if everything:
            body.append(statement)
            continue
        items = []
        marked: list[str] = []
        targets = {id(line): small for line, small in inputs.fields(statement)}
        for item in cu.body_of(statement.body):
            small = targets.get(id(item))
            if small is None:
                items.append(item)
                continue
            assert isinstance(small.target, cst.Name)
            field_name = small.target.value
            if (
                field_name in reads
                or inputs.driver_only_marked(small.value)
                or contract.is_driver_only(name, field_name)
            ):
                items.append(item)
                continue
            value = _marked(small.value, spelling)
            if value is None:
                skipped.append(
                    Skipped(
                        name, "MIG105", f"{name}.{field_name}: `field(...)` already has metadata"
                    )
                )
                items.append(item)
                continue
            new_small = small.with_changes(
                value=value,
                equal=small.equal if small.value is not None else cst.AssignEqual(),
            )
            if len(cu.code(new_small)) + 4 > 79 and isinstance(value, cst.Call):
                wrapped = cst.parse_expression(
                    f"{cu.code(value.func)}(\n    "
                    + ", ".join(cu.code(a).rstrip(", ") for a in value.args)
                    + ")"
                )
                new_small = new_small.with_changes(value=wrapped)
            assert isinstance(item, cst.SimpleStatementLine)
            items.append(item.with_changes(body=[new_small]))
            marked.append(field_name)
        if marked:
            changed[name] = marked
            statement = statement.with_changes(body=statement.body.with_changes(body=items))
        body.append(statement)
    if not changed:
        return module, {}, skipped
    new = module.with_changes(body=body)
    if needs_import:
        new = imports.add_imports(new, ["dataclasses"])
    return new, changed, skipped


class DriverOnlyCommand(ContractCommand):
    """Declare unbroadcast input dataclass fields driver-only (field metadata)."""

    DESCRIPTION = (
        "Mark each dataclass field that as_broadcastable_tensor_dict never sends as "
        'driver-only (metadata={"runnercheck": "driver-only"}); parents must be in the file.'
    )

    def rewrite(self, tree: cst.Module) -> cst.Module:
        lookup = inputs.module_lookup(ast.parse(tree.code))
        new, _changed, skipped = rewrite_module(tree, lookup, self.contract)
        self.warn_skipped(skipped)
        return new
