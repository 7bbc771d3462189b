"""One migration run, from the walk of the given paths to the files written: the one
way in for ``runnercheck migrate``, the demo and the benchmarks.

:func:`apply` walks the given paths once, under the tree lock taken before that walk
(never planning from another run's half-written files):

1. in ``write`` mode, puts back what an interrupted run left
   (:mod:`runnercheck.writes.recovery`; the paths are walked again only when it put
   something back);
2. plans, rewrites and verifies (:func:`codemods.framework.pipeline.migrate`, nothing written);
3. ``write``: commits the changes, one journaled transaction per group
   (:func:`runnercheck.writes.transaction.commit`); a unit it does not write is a
   :class:`~runnercheck.records.Refused` of the result and its files leave the
   changes. ``check`` and ``diff``: names each group an interrupted run left
   half-applied (MIG007) and each journal met (a note).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Literal

from codemods.framework import registry
from codemods.framework.pipeline import MigrateResult, migrate
from codemods.framework.source import collect
from runnercheck.config import Config
from runnercheck.files import within_roots
from runnercheck.records import Note, Refused
from runnercheck.writes import journal
from runnercheck.writes.treelock import TreeLock, tree_root

Mode = Literal["write", "check", "diff"]


def apply(
    paths: Sequence[str | os.PathLike[str]],
    select: Sequence[str] = registry.NAMES,
    config: Config | None = None,
    *,
    mode: Mode = "write",
    force: bool = False,
    replace_links: bool = False,
    jobs: int = 1,
    progress: Callable[[int, int], None] | None = None,
    decide: bool = True,
    cache_root: Path | None = None,
    exact: bool = True,
    callers: bool = True,
    plain_mypy: bool = True,
) -> MigrateResult:
    """Plan, verify and (``mode="write"``) commit the migration of ``paths``.

    ``force``: also write read-only files. ``replace_links``: write a file with other
    hard links as a new file (refused otherwise). ``decide=False``: without the analysis's
    decision of which files a codemod may change (:mod:`codemods.framework.decision`; the same
    result, slower). ``cache_root``: where the facts cache lives (none by default; see
    :func:`codemods.framework.pipeline.migrate`). ``callers=False`` (``--no-callers``): calls of
    a removed method are rewritten only inside the given paths, not across the
    project (a caller outside them is written with its groups, under the lock of a
    tree holding both). ``exact=False``: ``--check`` parses with LibCST
    every file a single-class codemod may change, also those the analysis replays
    (:mod:`codemods.framework.replay`; the same result, slower). ``--check`` looks for no new
    plain-mypy errors: it says whether files would change; ``--diff`` and writing
    report the new errors, unless ``plain_mypy=False`` (``--no-mypy``). Raises
    :class:`~runnercheck.writes.recovery.Unrecoverable` when an interrupted run left
    files a person has to put right."""
    roots = [Path(os.path.realpath(p)) for p in paths]
    write = mode == "write"
    recovered: list[str] = []
    locked = roots
    while True:
        with TreeLock(tree_root(locked), shared=not write, required=False):
            collected = collect(paths)
            if write:  # (what only a write needs is imported then)
                from runnercheck.writes import recovery

                recovered = recovery.recover(locked, collected.journals)
                if recovered:  # files were put back (or removed): read the tree as it is now
                    collected = collect(paths)
            result = migrate(
                paths,
                select,
                config,
                jobs,
                progress,
                collected=collected,
                decide=decide,
                cache_root=cache_root,
                exact=exact and mode == "check",
                plain_mypy=plain_mypy and mode != "check",
                callers=callers,
            )
            outside = [p for p in result.changes if not within_roots(p, [tree_root(locked)])]
            if write and outside and locked == roots:
                # callers outside the locked tree: plan again under the lock of a tree
                # that holds them too, and write them with their groups
                locked = [*roots, *outside]
                continue
            for path in outside if write else []:  # (appeared since: never written unlocked)
                result.changes.pop(path)
                why = "appeared outside the locked tree during the run: left alone"
                result.refusals.append(Refused("write", "MIG005", path, 0, why))
            if not write:
                _pending(result)
            elif result.changes:
                from runnercheck.writes import transaction

                outcome = transaction.commit(
                    list(result.changes.values()),
                    (*result.roots, *locked),
                    force=force,
                    met=result.journals,
                    replace_links=replace_links,
                )
                recovered += outcome.recovered
                result.written = outcome.written
                for refused in outcome.refused:
                    for path in refused.paths:
                        result.changes.pop(path, None)
                    result.refusals.append(refused)
        break
    result.recovered = recovered
    return result


def _pending(result: MigrateResult) -> None:
    """What interrupted runs left under the paths: one MIG007 per half-applied group
    (not one per cause), a note for each other journal."""
    for item in journal.pending(list(result.roots), result.journals):
        if item.half_applied:
            result.refusals = [
                r for r in result.refusals if r.code != "MIG007" or r.path not in item.files
            ]
            result.refusals.append(Refused("write", "MIG007", item.path, 0, item.message))
        else:
            result.notes.append(Note("journal", item.path, 0, item.message, label="note"))
