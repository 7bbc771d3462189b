"""``driver-only``: declare the fields an input dataclass never broadcasts.

A field of a model-runner input that ``as_broadcastable_tensor_dict`` does not
send is silently the default on the other ranks. When that is deliberate
(vLLM's ``seq_lens``, pooling metadata), the field should say so. vLLM says it
in a comment and leaves the field out of the dict; this codemod writes that
comment above each such field, and changes nothing else::

    # Driver-only: never broadcast; the other ranks hold its default.
    seq_lens: Optional[List[int]] = None

Fields read by the class's (or, through ``super()``, its parents')
``as_broadcastable_tensor_dict`` are left alone, as are fields already declared
(a comment, field metadata, the ``driver_only`` configuration). A class whose
parent cannot be seen is skipped (reported, not guessed).
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

NAME = registry.DRIVER_ONLY.name
#: The comment written above a field that is never broadcast (what ``check``, ``fuzz``
#: and ``migrate`` read as the declaration, see
#: :func:`runnercheck.contract.is_driver_only_comment`).
COMMENT = "# Driver-only: never broadcast; the other ranks hold its default."


def _refused(cls: ClassFacts, code: str, message: str) -> Refused:
    """``cls`` left alone, at its ``class`` line."""
    path = Path(cls.path)
    return Refused(NAME, code, path, cls.line, message, held_back=(f"{cls.name} ({path.name})",))


def rewrite_module(
    module: cst.Module, project: Project, path: str, contract: Contract = VLLM
) -> tuple[cst.Module, dict[str, list[str]], list[Refused]]:
    """Mark the fields RC103 reports (as the analysis of ``path`` in ``project`` finds
    them); returns the module, ``{class: [fields]}`` changed, and the classes skipped
    with why."""
    facts = project.modules.get(path)
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
            comment = cst.EmptyLine(comment=cst.Comment(COMMENT))
            items.append(item.with_changes(leading_lines=[*item.leading_lines, comment]))
            marked.append(small.target.value)
        if marked:
            changed[cls.name] = marked
            statement = statement.with_changes(body=statement.body.with_changes(body=items))
        body.append(statement)
    if not changed:
        return module, {}, skipped
    return module.with_changes(body=body), changed, skipped


def __getattr__(name: str) -> Any:
    """``DriverOnlyCommand`` (see :func:`codemods.framework.registry.command_class`)."""
    return registry.command_class(__name__, name)
