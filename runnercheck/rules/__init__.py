"""The rules of ``runnercheck check``: one module per rule, each holding its catalog
entry (:class:`~runnercheck.catalog.Rule`) beside its message and its check.

Syntax errors (RC001) are reported by :mod:`runnercheck.check.pipeline`; an exception
inside a rule becomes an RC002 finding on the class or file it was looking at, and
the other rules and files go on.
"""

from __future__ import annotations

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.catalog import Rule
from runnercheck.findings import Finding
from runnercheck.rules import (
    collective_in_prepare,
    half_applied,
    merged_dict_leak,
    missing_contract_method,
    paired_broadcast,
    parent_dict_drift,
    recursive_from_dict,
    role_schedules,
    unaccepted_broadcast_key,
    unbroadcast_field,
    unpicklable_broadcast_value,
    unsent_broadcast_key,
    wrapper_control_broadcast,
)
from runnercheck.rules.base import CheckRule
from runnercheck.workspace.reading import CANNOT_READ_RULE, INTERNAL_ERROR_RULE

CHECKS: tuple[CheckRule, ...] = (
    recursive_from_dict.CHECK,
    unaccepted_broadcast_key.CHECK,
    unbroadcast_field.CHECK,
    parent_dict_drift.CHECK,
    collective_in_prepare.CHECK,
    paired_broadcast.CHECK,
    missing_contract_method.CHECK,
    unpicklable_broadcast_value.CHECK,
    merged_dict_leak.CHECK,
    wrapper_control_broadcast.CHECK,
    half_applied.CHECK,
    unsent_broadcast_key.CHECK,
    role_schedules.CHECK,
)

#: Every code ``runnercheck check`` reports: its own errors (RC001, RC002) and its rules.
RULES: tuple[Rule, ...] = (
    CANNOT_READ_RULE,
    INTERNAL_ERROR_RULE,
    half_applied.RULE,
    *(check.rule for check in CHECKS if check.rule is not half_applied.RULE),
)


def _internal(path: str, line: int, col: int, code: str, where: str, exc: Exception) -> Finding:
    return Finding(
        path,
        line,
        col,
        "RC002",
        f"internal error in {code} on {where}: {type(exc).__name__}: {exc}",
    )


def run_rules(project: Project, codes: set[str] | None = None) -> list[Finding]:
    """Findings of every rule whose code is in ``codes`` (all when None), deduplicated.

    An error that rests on a class deriving from a package that was not read (see
    :mod:`runnercheck.analysis.unread`) is a note saying so; ``project.memo[UNREAD]``
    maps each such note to the base it rests on."""
    found: set[Finding] = set()
    checks = [c for c in CHECKS if codes is None or c.code in codes]
    for module in project.modules.values():
        for check in checks:
            if check.check_module is None:
                continue
            try:
                found.update(
                    _knowable(project, check, f, _enclosing(module, f.line))
                    for f in check.check_module(project, module)
                )
            except Exception as exc:
                found.add(_internal(module.path, 1, 1, check.code, module.path, exc))
        for cls in module.classes.values():
            for check in checks:
                if check.check_class is None:
                    continue
                try:
                    found.update(
                        _knowable(project, check, f, cls) for f in check.check_class(project, cls)
                    )
                except Exception as exc:
                    found.add(_internal(cls.path, cls.line, cls.col, check.code, cls.name, exc))
    return sorted(found)


#: ``project.memo`` key: the notes that were errors before an unread base was found
#: behind them, each with that base.
UNREAD = "unread"


def _knowable(
    project: Project, check: CheckRule, finding: Finding, cls: ClassFacts | None
) -> Finding:
    """``finding``, or a note when it is an error about ``cls`` that rests on a base
    of a package that was not read."""
    if finding.is_note or cls is None or not project.unread.packages:
        return finding
    unread = project.unread.behind(cls, partners=check.reads_partners)
    if unread is None:
        return finding
    note = finding.as_note(unread.why())
    demoted = project.memo.setdefault(UNREAD, {})
    assert isinstance(demoted, dict)
    demoted[note] = unread
    return note


def _enclosing(module: ModuleFacts, line: int) -> ClassFacts | None:
    """The innermost class of ``module`` whose lines hold ``line``."""
    around = [c for c in module.classes.values() if c.line <= line <= c.end_line]
    return max(around, key=lambda c: c.line, default=None)
