"""The plan of ``fold-control-broadcast`` (see :mod:`codemods.fold_control_broadcast`):
the analysis's :func:`~runnercheck.analysis.fold.fold_plan`, the same question RC110 asks
for its severity, with a refusal turned into the codemod's MIG204 record. It imports no
LibCST, so that ``migrate`` parses with LibCST only the files a codemod changes."""

from __future__ import annotations

from pathlib import Path

from codemods.framework import registry
from runnercheck.analysis.fold import RECEIVED, SENT, FoldPlan, FoldRefusal, fold_plan
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.wrappers import receive_lines
from runnercheck.records import Note, Refused

__all__ = [
    "CODE",
    "NAME",
    "NO_FIX",
    "RECEIVED",
    "SENT",
    "Plan",
    "as_note",
    "plan_class",
    "refused",
    "refused_plans",
    "unfixable",
]

NAME = registry.FOLD_CONTROL_BROADCAST.name
CODE = "MIG204"
#: What the step model shows for one wrapper class whose fold applies.
Plan = FoldPlan


#: What to change by hand where the plan refuses: the shape is one the fold does not
#: handle, so the control broadcast is an inefficiency with no automatic fix.
NO_FIX = (
    "nothing automatic: the control broadcast stays unless the step is restructured so "
    "that one inner step runs first on every path, unconditionally, with an extras channel"
)


def refused(
    cls: ClassFacts, code: str, message: str, shape: str, line: int, advice: str = ""
) -> Refused:
    """``cls`` left alone: its control broadcast stays."""
    path = Path(cls.path)
    return Refused(
        NAME,
        code,
        path,
        line,
        message,
        shape=shape,
        advice=advice,
        held_back=(f"{cls.name} ({path.name})",),
    )


def unfixable(refusal: Refused) -> bool:
    """A refusal of the plan: the fold does not apply to that shape. ``check`` reports
    the control broadcast as an RC110 note (no fix works on that code), and ``migrate``
    reports it as a note too (:func:`as_note`): nothing is left for a person to review,
    and the run does not fail on it. A refusal of the rewrite itself (the plan applies,
    the statements do not have the shape the rewrite reads) stays a refusal, as RC110
    stays an error."""
    return refusal.kind == NAME and refusal.code == CODE and refusal.advice == NO_FIX


def as_note(refusal: Refused) -> Note:
    """An :func:`unfixable` refusal as the note ``migrate`` reports instead."""
    return Note(
        "fold",
        refusal.path,
        refusal.line,
        f"{refusal.code} [{NAME}] left alone, no automatic fix applies "
        f"({refusal.shape}): {refusal.message}",
        label=refusal.held_back[0] if refusal.held_back else NAME,
        code=refusal.code,
    )


def plan_class(
    project: Project, cls: ClassFacts, receives: frozenset[int]
) -> Plan | Refused | None:
    """The plan for ``cls`` (None: it has no control broadcast to fold), or its MIG204
    refusal. ``receives``: the lines of its non-driver receives (a broadcast call
    without a dict)."""
    plan = fold_plan(project, cls, receives)
    if isinstance(plan, FoldRefusal):
        return refused(cls, CODE, plan.message, plan.shape, plan.line, NO_FIX)
    return plan


def refused_plans(project: Project, path: str) -> list[Refused] | None:
    """The wrapper classes of ``path`` whose plan is refused (in the order of the file),
    when no class of it has a plan to rewrite; None when one has (only the rewrite can
    tell what then happens)."""
    facts = project.modules.get(path)
    if facts is None:
        return []
    refused: list[Refused] = []
    for cls in sorted(facts.classes.values(), key=lambda c: c.line):
        plan = plan_class(project, cls, receive_lines(cls))
        if isinstance(plan, Plan):
            return None
        if plan is not None:
            refused.append(plan)
    return refused
