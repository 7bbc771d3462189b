"""The reasons ``runnercheck migrate`` leaves code alone (MIGxxx), beside the stages
that give them: the run and the writes (:mod:`codemods.reasons.run`),
``merge-broadcasts``'s planners (:mod:`codemods.reasons.merge`) and the single-class
codemods (:mod:`codemods.reasons.single`). A :class:`~codemods.framework.refusal.Refusal` names
one by code; the report shows its name and what to change by hand.

The registry (:mod:`runnercheck.catalog`) finds :data:`RULES` and :data:`FIXES` (the
codes each codemod of :mod:`codemods.framework.registry` fixes) through the entry point
``migrate`` of the group ``runnercheck.rules``.
"""

from __future__ import annotations

from codemods.framework.registry import CODEMODS
from codemods.reasons import merge, run, single
from runnercheck.catalog import Rule

RULES: tuple[Rule, ...] = (*run.RULES, *merge.RULES, *single.RULES)

#: The entries by code.
BY_CODE: dict[str, Rule] = {rule.code: rule for rule in RULES}

#: Each code a codemod fixes, and that codemod's name (``--select`` takes it).
FIXES: dict[str, str] = {code: codemod.name for codemod in CODEMODS for code in codemod.fixes}
