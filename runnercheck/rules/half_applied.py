"""RC003 half-applied-migration, as the code shows it: a worker and a runner it drives
at different stages of the migration (see :mod:`runnercheck.analysis.stages`).

The same code is reported from ``migrate``'s journal (:mod:`runnercheck.writes.journal`) when
an interrupted run left a group half-written; this check needs no journal: it finds a
group mixed by any cause, such as an editor saving a buffer read before the run."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck import catalog
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.stages import MixedPair, mixed_message, mixed_pairs
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

RULE = catalog.get("RC003")


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """One finding per call of the worker that no longer matches: the call is the
    cause, the runners it fails in are listed in it."""
    if not project.is_worker(cls):
        return
    by_call: dict[tuple[int, str, str], list[MixedPair]] = {}
    for pair in mixed_pairs(project, cls):
        by_call.setdefault((pair.line, pair.attr, pair.call), []).append(pair)
    for (line, _, _), pairs in by_call.items():
        yield Finding(cls.path, line, 1, RULE.code, mixed_message(pairs))


CHECK = CheckRule(RULE, check_class=check_class)
