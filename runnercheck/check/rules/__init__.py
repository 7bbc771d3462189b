"""The rules of ``runnercheck check``, one function per rule and class.

A class rule is ``(Project, ClassFacts) -> Iterable[Finding]``; a module rule is
``(Project, ModuleFacts) -> Iterable[Finding]``. Codes and texts come from
:mod:`runnercheck.catalog`. Syntax errors (RC001) are reported by
:mod:`runnercheck.check.pipeline`; an exception inside a rule becomes an RC002 finding on
the class or file it was looking at, and the other rules and files go on.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.check.rules import broadcasts, contract_methods, keys, recursion, values
from runnercheck.findings import Finding

ClassRule = Callable[[Project, ClassFacts], Iterable[Finding]]
ModuleRule = Callable[[Project, ModuleFacts], Iterable[Finding]]

CLASS_RULES: tuple[tuple[str, ClassRule], ...] = (
    ("RC101", recursion.recursive_from_dict),
    ("RC102", keys.unaccepted_keys),
    ("RC103", keys.unbroadcast_fields),
    ("RC104", keys.parent_dict_drift),
    ("RC105", broadcasts.collective_in_prepare),
    ("RC106", broadcasts.paired_broadcast),
    ("RC107", contract_methods.missing_contract_methods),
    ("RC108", values.unpicklable_values),
)
MODULE_RULES: tuple[tuple[str, ModuleRule], ...] = (
    ("RC108", values.unpicklable_values_in_functions),
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
    """Findings of every rule whose code is in ``codes`` (all when None), deduplicated."""
    found: set[Finding] = set()
    for module in project.modules.values():
        for code, module_rule in MODULE_RULES:
            if codes is not None and code not in codes:
                continue
            try:
                found.update(module_rule(project, module))
            except Exception as exc:
                found.add(_internal(module.path, 1, 1, code, module.path, exc))
        for cls in module.classes.values():
            for code, class_rule in CLASS_RULES:
                if codes is not None and code not in codes:
                    continue
                try:
                    found.update(class_rule(project, cls))
                except Exception as exc:
                    found.add(_internal(cls.path, cls.line, cls.col, code, cls.name, exc))
    return sorted(found)
