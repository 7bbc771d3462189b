"""What a rule of ``runnercheck check`` is: its catalog entry and its check functions.

A class check is ``(Project, ClassFacts) -> Iterable[Finding]``, a module check
``(Project, ModuleFacts) -> Iterable[Finding]``. Each rule module defines ``RULE``
(code, name, summary, why, a bad and a good example that run as tests), its
checks, and ``CHECK`` joining them. ``reads_partners``: the rule's conclusion about a
class rests on the classes it takes part in a step with (the worker's step, the merged
dict, the runner); False when the class's own code decides it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.catalog import Rule
from runnercheck.findings import Finding

ClassCheck = Callable[[Project, ClassFacts], Iterable[Finding]]
ModuleCheck = Callable[[Project, ModuleFacts], Iterable[Finding]]


@dataclass(frozen=True)
class CheckRule:
    rule: Rule
    check_class: ClassCheck | None = None
    check_module: ModuleCheck | None = None
    reads_partners: bool = True

    @property
    def code(self) -> str:
        return self.rule.code
