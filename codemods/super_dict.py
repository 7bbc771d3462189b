"""``super-dict``: a subclass dict that re-lists its parent's keys calls ``super()``.

vLLM 0.5.1's ``ModelInputForGPUWithSamplingMetadata.as_broadcastable_tensor_dict``
copies its parent's dict literal and helper calls, then adds its own; the copy
drifts as soon as the parent changes. When the child's dict literal holds every
key of the parent's with the same value, and the child repeats the parent's
later statements first, the child becomes::

    tensor_dict = super().as_broadcastable_tensor_dict()
    tensor_dict.update({<the child's own keys>})     # only if it has any
    <the child's own statements>
    return tensor_dict

A child that re-lists only part of the parent's keys is a drifted copy: calling
``super()`` would change what it broadcasts, so it is reported, not rewritten.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import libcst as cst

from codemods.framework import registry
from codemods.toolkit import cstutil
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.contract import VLLM, Contract
from runnercheck.records import Refused

NAME = registry.SUPER_DICT.name


def _refused(cls: ClassFacts, code: str, message: str) -> Refused:
    """``cls`` left alone, at its ``class`` line."""
    path = Path(cls.path)
    return Refused(NAME, code, path, cls.line, message, held_back=(f"{cls.name} ({path.name})",))


def _split(
    func: cst.FunctionDef,
) -> (
    tuple[
        cst.BaseStatement | None,
        cst.BaseStatement,
        cst.Dict,
        str,
        list[cst.BaseStatement],
        cst.BaseStatement,
    ]
    | None
):
    """(docstring, literal statement, literal, variable, middle statements, return)."""
    body = list(cstutil.body_of(func.body))
    doc = None
    if body:
        small = cstutil.single_small(body[0])
        if isinstance(small, cst.Expr) and isinstance(
            small.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            doc, body = body[0], body[1:]
    if len(body) < 2:
        return None
    first = cstutil.single_small(body[0])
    last = cstutil.single_small(body[-1])
    if not (isinstance(last, cst.Return) and isinstance(last.value, cst.Name)):
        return None
    target = value = None
    if isinstance(first, cst.Assign) and len(first.targets) == 1:
        target, value = first.targets[0].target, first.value
    elif isinstance(first, cst.AnnAssign):
        target, value = first.target, first.value
    if not (isinstance(target, cst.Name) and isinstance(value, cst.Dict)):
        return None
    if target.value != last.value.value:
        return None
    return doc, body[0], value, target.value, body[1:-1], body[-1]


def rewrite_module(
    module: cst.Module, project: Project, path: str, contract: Contract = VLLM
) -> tuple[cst.Module, list[str], list[Refused]]:
    """Rewrite each class whose dict copies its parent's (RC104, as the analysis of
    ``path`` in ``project`` finds it); returns the module, the classes changed and the
    copies left alone with why."""
    name = contract.as_dict_method
    facts = project.modules.get(path)
    changed: list[str] = []
    skipped: list[Refused] = []
    body: list[cst.BaseStatement] = []
    for statement in module.body:
        cls = (
            facts.classes.get(statement.name.value)
            if facts and isinstance(statement, cst.ClassDef)
            else None
        )
        copy = project.dict_copy(cls) if cls is not None else None
        func = _method(statement, name) if copy is not None else None
        parts = _split(func) if func is not None else None
        if copy is None or func is None or parts is None:
            body.append(statement)
            continue
        assert isinstance(statement, cst.ClassDef) and cls is not None
        cls_name = statement.name.value
        if copy.missing:
            shared = len(copy.parent_keys) - len(copy.missing)
            skipped.append(
                _refused(
                    cls,
                    "MIG203",
                    f"{cls_name} re-lists {shared} of {copy.parent}'s "
                    f"{len(copy.parent_keys)} keys (not {', '.join(copy.missing)})",
                )
            )
            body.append(statement)
            continue
        if not copy.repeats_mutations:
            skipped.append(
                _refused(
                    cls,
                    "MIG202",
                    f"{cls_name} does not repeat {copy.parent}'s statements after "
                    "the dict; calling super() would reorder them",
                )
            )
            body.append(statement)
            continue
        if copy.own_keys and copy.parent_mutations:
            skipped.append(
                _refused(
                    cls,
                    "MIG202",
                    f"{cls_name} adds keys before {copy.parent}'s own updates run; "
                    "calling super() would change which value wins",
                )
            )
            body.append(statement)
            continue
        doc, literal_stmt, literal, var, middle, ret = parts
        rest = middle[copy.parent_mutations :]
        first = cst.parse_statement(f"{var} = super().{name}()\n")
        first = first.with_changes(leading_lines=literal_stmt.leading_lines)  # type: ignore[attr-defined]
        new_body: list[cst.BaseStatement] = [doc] if doc is not None else []
        new_body.append(first)
        if copy.own_keys:
            order = [
                cstutil.string_value(e.key)
                for e in literal.elements
                if isinstance(e, cst.DictElement)
            ]
            kept_literal = cstutil.keep_elements(literal, [order.index(k) for k in copy.own_keys])
            update = cst.parse_statement(f"{var}.update({{}})\n")
            small = cstutil.single_small(update)
            assert isinstance(small, cst.Expr) and isinstance(small.value, cst.Call)
            call = small.value.with_changes(
                args=[small.value.args[0].with_changes(value=kept_literal)]
            )
            assert isinstance(update, cst.SimpleStatementLine)
            new_body.append(update.with_changes(body=[small.with_changes(value=call)]))
        new_body.extend(rest)
        new_body.append(ret)
        new_func = func.with_changes(body=func.body.with_changes(body=new_body))
        items = [new_func if item is func else item for item in cstutil.body_of(statement.body)]
        body.append(statement.with_changes(body=statement.body.with_changes(body=items)))
        changed.append(cls_name)
    if not changed:
        return module, [], skipped
    return module.with_changes(body=body), changed, skipped


def _method(statement: cst.BaseStatement, name: str) -> cst.FunctionDef | None:
    if not isinstance(statement, cst.ClassDef):
        return None
    for item in cstutil.body_of(statement.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == name:
            return item
    return None


def __getattr__(name: str) -> Any:
    """``SuperDictCommand`` (see :func:`codemods.framework.registry.command_class`)."""
    return registry.command_class(__name__, name)
