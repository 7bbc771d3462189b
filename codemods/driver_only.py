"""``driver-only``: declare the fields an input dataclass never broadcasts.

A field of a model-runner input that ``as_broadcastable_tensor_dict`` does not
send is silently the default on the other ranks. When that is deliberate
(vLLM's ``seq_lens``, pooling metadata), the field should say so; this codemod
rewrites each such field to carry the documented marker (its key is the
configuration's ``driver_only_key``)::

    seq_lens: Optional[List[int]] = dataclasses.field(
        default=None, metadata={"driver_only": True})

Fields read by the class's (or, through ``super()``, its parents')
``as_broadcastable_tensor_dict`` are left alone, as are fields already marked
or listed in the ``driver_only`` configuration. A class whose parent cannot be
seen is skipped (reported, not guessed).
"""

from __future__ import annotations

from pathlib import Path

import libcst as cst

from codemods import cstutil, imports, registry
from codemods.command import ContractCommand
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.contract import VLLM, Contract
from runnercheck.records import Refused

NAME = registry.DRIVER_ONLY.name


def _refused(cls: ClassFacts, code: str, message: str) -> Refused:
    """``cls`` left alone, at its ``class`` line."""
    path = Path(cls.path)
    return Refused(NAME, code, path, cls.line, message, held_back=(f"{cls.name} ({path.name})",))


def _field_call(module: cst.Module) -> tuple[str, bool]:
    """How this module spells ``dataclasses.field`` and whether an import is needed."""
    for statement in module.body:
        small = cstutil.single_small(statement)
        if (
            isinstance(small, cst.ImportFrom)
            and cstutil.dotted(small.module or cst.Name("")) == "dataclasses"
        ):
            if not isinstance(small.names, cst.ImportStar) and any(
                cstutil.code(a.name) == "field" and a.asname is None for a in small.names
            ):
                return "field", False
    return "dataclasses.field", "dataclasses" not in imports.imported_names(module)


def _marked(
    value: cst.BaseExpression | None, spelling: str, marker_text: str
) -> cst.BaseExpression | None:
    """The new value of a field, or None when it cannot be rewritten safely."""
    marker = cst.parse_expression(marker_text)
    if value is None:
        return cst.parse_expression(f"{spelling}(metadata={marker_text})")
    if isinstance(value, cst.Call) and cstutil.call_name(value) == "field":
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
    call = cst.parse_expression(f"{spelling}(default=None, metadata={marker_text})")
    assert isinstance(call, cst.Call)
    return call.with_changes(args=[call.args[0].with_changes(value=value), call.args[1]])


def rewrite_module(
    module: cst.Module, project: Project, path: str, contract: Contract = VLLM
) -> tuple[cst.Module, dict[str, list[str]], list[Refused]]:
    """Mark the fields RC103 reports (as the analysis of ``path`` in ``project`` finds
    them); returns the module, ``{class: [fields]}`` changed, and the classes skipped
    with why."""
    facts = project.modules.get(path)
    spelling, needs_import = _field_call(module)
    changed: dict[str, list[str]] = {}
    skipped: list[Refused] = []
    body: list[cst.BaseStatement] = []
    for statement in module.body:
        cls = (
            facts.classes.get(statement.name.value)
            if facts is not None and isinstance(statement, cst.ClassDef)
            else None
        )
        if cls is None:
            body.append(statement)
            continue
        assert isinstance(statement, cst.ClassDef)
        if project.reads_unknown_parent(cls):
            skipped.append(
                _refused(cls, "MIG201", f"{cls.name}: a base class of it is not in the given paths")
            )
        wanted = {fld.name for fld in project.unbroadcast_fields(cls)}
        if not wanted:
            body.append(statement)
            continue
        items = []
        marked: list[str] = []
        for item in cstutil.body_of(statement.body):
            small = cstutil.single_small(item)
            if not (
                isinstance(item, cst.SimpleStatementLine)
                and isinstance(small, cst.AnnAssign)
                and isinstance(small.target, cst.Name)
                and small.target.value in wanted
            ):
                items.append(item)
                continue
            field_name = small.target.value
            value = _marked(small.value, spelling, contract.driver_only_marker)
            if value is None:
                skipped.append(
                    _refused(
                        cls,
                        "MIG105",
                        f"{cls.name}.{field_name}: `field(...)` already has metadata",
                    )
                )
                items.append(item)
                continue
            new_small = small.with_changes(
                value=value,
                equal=small.equal if small.value is not None else cst.AssignEqual(),
            )
            if len(cstutil.code(new_small)) + 4 > 79 and isinstance(value, cst.Call):
                wrapped = cst.parse_expression(
                    f"{cstutil.code(value.func)}(\n    "
                    + ", ".join(cstutil.code(a).rstrip(", ") for a in value.args)
                    + ")"
                )
                new_small = new_small.with_changes(value=wrapped)
            items.append(item.with_changes(body=[new_small]))
            marked.append(field_name)
        if marked:
            changed[cls.name] = marked
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

    DESCRIPTION = registry.DRIVER_ONLY.summary

    def rewrite(self, tree: cst.Module) -> cst.Module:
        path, project = self.project(tree)
        new, _changed, skipped = rewrite_module(tree, project, path, self.contract)
        self.warn_skipped(skipped)
        return new
