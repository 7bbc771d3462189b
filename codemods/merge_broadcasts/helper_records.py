"""A runner helper that returns a NamedTuple of the values the driver prepares.

vLLM 0.5.0's ``_prepare_model_input`` returns a ``ModelInput`` NamedTuple, and the
legacy ``prepare_input_tensors`` unpacked all twelve of its values by position. The
input class now carries some of them; the others (values that travel inside the
attention metadata, lengths the driver builds its sampling metadata from) are read
by nobody, and a positional unpacking would bind them to ``_``. So, as vLLM 0.5.1's
``prepare_model_input`` does, the new method keeps the helper's result whole and
reads the values it uses as its fields::

    model_input = self._prepare_model_input(seq_group_metadata_list)
    sampling_metadata = SamplingMetadata.prepare(
        seq_group_metadata_list, model_input.seq_lens, model_input.query_lens, ...)
    return ModelRunnerInput(input_tokens=model_input.input_tokens, ...)

This happens when the helper's return annotation names a NamedTuple of the project
whose fields match the unpacking one for one, and no unpacked name is bound again
in the method (the legacy code would then mean the rebound value).

The NamedTuple itself is kept: the helper still returns it, and it holds values that
no input does (vLLM 0.5.1 replaced it by a base input class with every field
Optional, which its inputs then narrow). One note per NamedTuple says so, at its
class statement when the group rewrites that file.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from codemods.merge_broadcasts.runner_model import MODEL_INPUT, RunnerPlan
from codemods.toolkit import cstutil
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project


@dataclass(frozen=True)
class Record:
    """A helper returning a NamedTuple of the project."""

    helper: str
    name: str
    path: Path
    line: int
    fields: tuple[str, ...]


def helper_records(
    project: Project, cls: ClassFacts, unpacked: Iterable[tuple[str, str, int, int]]
) -> dict[str, Record]:
    """``self.<helper>(...)`` calls the legacy method unpacks whose helper (found
    along the MRO) is annotated to return a NamedTuple with as many fields."""
    out: dict[str, Record] = {}
    for _, helper, _, count in unpacked:
        if helper in out:
            continue
        ref = project.resolve_method(cls, helper)
        if ref is None or not ref.func.return_annotation:
            continue
        try:
            node = ast.parse(ref.func.return_annotation, mode="eval").body
        except SyntaxError:
            continue
        if not isinstance(node, (ast.Name, ast.Attribute)):
            continue
        target = project.resolve_class(ast.unparse(node), ref.owner.path)
        if target is None or not any(b.endswith("NamedTuple") for b in target.bases):
            continue
        fields = tuple(target.annotation_texts)
        if len(fields) == count:
            out[helper] = Record(helper, target.name, Path(target.path), target.line, fields)
    return out


def _unpacking(statement: cst.BaseStatement, records: dict[str, Record]) -> Record | None:
    """The record ``statement`` unpacks by position into plain names, if any."""
    small = cstutil.single_small(statement)
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, (cst.Tuple, cst.List))
        and isinstance(small.value, cst.Call)
        and isinstance(small.value.func, cst.Attribute)
        and cstutil.code(small.value.func.value).strip() == "self"
    ):
        return None
    record = records.get(small.value.func.attr.value)
    elements = small.targets[0].target.elements
    if record is None or len(elements) != len(record.fields):
        return None
    if not all(isinstance(e, cst.Element) and isinstance(e.value, cst.Name) for e in elements):
        return None
    return record


def _targets(statement: cst.BaseStatement) -> list[str]:
    small = cstutil.single_small(statement)
    assert isinstance(small, cst.Assign)
    target = small.targets[0].target
    assert isinstance(target, (cst.Tuple, cst.List))
    return [cstutil.code(e.value).strip() for e in target.elements]


def plan_record_reads(plan: RunnerPlan) -> list[tuple[cst.BaseStatement, Record]]:
    """The unpackings of the driver's statements that become field reads."""
    assert plan.method is not None
    driver = [*plan.prologue, *plan.driver_before, *plan.driver_after]
    if not plan.records or MODEL_INPUT in cstutil.loaded(plan.method) | cstutil.bound(plan.method):
        return []
    found = [(s, r) for s in driver if (r := _unpacking(s, plan.records)) is not None]
    if len(found) != 1:  # two results would need two names
        return []
    statement = found[0][0]
    names = set(_targets(statement)) - {"_"}
    others = cstutil.bound_in(s for s in driver if s is not statement)
    if names & others:
        return []
    return found


def read_fields(
    body: list[cst.BaseStatement], reads: list[tuple[cst.BaseStatement, Record]]
) -> list[cst.BaseStatement]:
    """``(a, b, ...) = self.helper(x)`` -> ``model_input = self.helper(x)``; the
    statements after it read ``model_input.<field>`` for each name."""
    out = list(body)
    for statement, record in reads:
        at = next((i for i, s in enumerate(out) if s is statement), None)
        if at is None:
            continue
        small = cstutil.single_small(statement)
        assert isinstance(small, cst.Assign) and isinstance(statement, cst.SimpleStatementLine)
        whole = statement.with_changes(
            body=[small.with_changes(targets=[cst.AssignTarget(target=cst.Name(MODEL_INPUT))])]
        )

        def field_of(name: str) -> cst.Attribute:
            return cstutil.attr_of(MODEL_INPUT, name)

        renames = {
            name: (lambda f=f: field_of(f))
            for name, f in zip(_targets(statement), record.fields, strict=True)
            if name != "_"
        }
        out = [
            *out[:at],
            whole,
            *(cstutil.substitute_loads(s, renames) for s in out[at + 1 :]),
        ]
    return out


def kept_note(
    plans: list[RunnerPlan], record: Record, prepare: str
) -> tuple[RunnerPlan, int, str] | None:
    """The note saying why the record stays, carried by the plan of the file that
    defines it (None when no planned runner lives there): (that plan, line, text)."""
    held: set[str] = set()
    for plan in plans:
        fields = {f.name for f in plan.fields}
        for statement, read in plan.record_reads:
            if read.name == record.name and read.path == record.path:
                held |= {
                    f for t, f in zip(_targets(statement), read.fields, strict=True) if t in fields
                }
    if not held:
        return None
    extra = [f for f in record.fields if f not in held]
    text = (
        f"`{record.name}`, the NamedTuple `{record.helper}` returns, is kept: "
        f"`{prepare}` reads the values it needs as its fields"
    )
    if extra:
        text += f", and it holds values no input does ({', '.join(f'`{f}`' for f in extra)})"
    carrier = next((p for p in plans if p.path == record.path), None)
    return None if carrier is None else (carrier, record.line, text)
