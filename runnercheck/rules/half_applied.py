"""RC003 half-applied-migration, as the code shows it: a worker and a runner it drives
at different stages of the migration (see :mod:`runnercheck.analysis.stages`).

The same code is reported from ``migrate``'s journal (:mod:`runnercheck.writes.journal`) when
an interrupted run left a group half-written; this check needs no journal: it finds a
group mixed by any cause, such as an editor saving a buffer read before the run."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.stages import MixedPair, mixed_message, mixed_pairs
from runnercheck.catalog import Rule
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

RULE = Rule(
    code="RC003",
    name="half-applied-migration",
    tool="check",
    summary="An interrupted `runnercheck migrate` left a worker/runner group half-applied.",
    why="Some files of the group are in the merged shape and some are not: every file "
    "compiles, but the old worker calls the new runner with the old arguments and fails "
    "at run time. `runnercheck migrate --recover` puts the old contents back. A journal "
    "that is not as `migrate` writes it (a symbolic link, a file outside its tree, a "
    "field of the wrong type or range) is reported too, and left alone.",
    bad="# worker.py still calls execute_model(seq_group_metadata_list, kv_caches)\n"
    "# model_runner.py already defines execute_model(model_input, kv_caches)",
    good="# both files old, or both files migrated",
    runnable=False,
)


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
