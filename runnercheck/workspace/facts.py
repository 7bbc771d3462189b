"""Paths and a configuration in, the facts of every file that can matter and the
:class:`~runnercheck.analysis.project.Project` over them out.

:func:`read_facts` finds the files under the given paths, skips by the byte prefilter
the ones that cannot matter (a file the prefilter skipped is read after all when it
defines a subclass of a class of a file read, see
:func:`runnercheck.analysis.prefilter.subclass_rounds`), reads their facts (from the
facts cache when one is given), and reads for context the modules they import
(:mod:`runnercheck.workspace.finder`), in the given paths, the context directories or
the installed packages. :func:`project_of` joins facts into the project the rules read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.prefilter import extensible_classes, needles, subclass_rounds
from runnercheck.analysis.project import Project
from runnercheck.config import Config
from runnercheck.contract import Contract
from runnercheck.errors import UsageError
from runnercheck.files import Walk
from runnercheck.workspace.finder import (
    ModuleFinder,
    context_roots,
    read_partners,
    unread_packages,
)
from runnercheck.workspace.reading import FileOutcome, SourceFile, analyse_all, discover

if TYPE_CHECKING:  # the cache's own imports cost start-up time under --no-cache
    from runnercheck.workspace.cache import FactsCache


@dataclass
class Facts:
    """What :func:`read_facts` read under the given paths."""

    #: The files found under the paths (after excludes), the buffer in place of its file.
    sources: list[SourceFile]
    #: The walk that found them: what it could not read, the journals it met.
    walked: Walk
    #: One per source, in order: its facts, or why it was skipped or failed.
    outcomes: list[FileOutcome]
    #: Modules outside the paths read for context (the modules the files import).
    context: list[ModuleFacts] = field(default_factory=list)
    #: Top-level packages the files build on that no root holds.
    unread: frozenset[str] = frozenset()
    #: Why the facts cache was not used (one line), or None.
    cache_unused: str | None = None


def project_of(
    modules: Iterable[ModuleFacts],
    context: Sequence[ModuleFacts],
    contract: Contract,
    unread: frozenset[str] = frozenset(),
    reportable: set[str] | None = None,
) -> Project:
    """The project over the ``modules`` that parsed and the ``context`` modules;
    ``reportable``: the paths whose findings are reported (all when None)."""
    analysed = [m for m in modules if m.syntax_error is None]
    project = Project([*analysed, *context], contract, unread)
    if reportable is not None:
        project.reportable = reportable
    return project


def read_facts(
    paths: Sequence[str | Path],
    config: Config,
    jobs: int = 1,
    exclude: Iterable[str] = (),
    root: Path | None = None,
    context: Iterable[str] = (),
    cache_root: Path | None = None,
    buffer: SourceFile | None = None,
) -> Facts:
    """The facts of the files under ``paths`` and of the modules they import.
    ``context``: directories of packages the files import (besides ``context`` in the
    config, relative to ``root``), looked in before the installed packages. ``buffer``:
    a file read with the contents it carries instead of those on disk. With
    ``cache_root``, facts are read from and written to the facts cache under it
    (:mod:`runnercheck.workspace.cache`)."""
    contract = config.contract()
    cache: FactsCache | None = None
    if cache_root is not None:
        from runnercheck.workspace.cache import FactsCache

        cache = FactsCache(cache_root, contract)
    sources, walked = discover(paths, (*config.exclude, *exclude), root)
    if buffer is not None:  # in place of the file on disk, or as a file not saved yet
        sources = [s for s in sources if s.path != buffer.path] + [buffer]
    limit = config.max_file_size
    outcomes = analyse_all(sources, contract, jobs, limit=limit, cache=cache)
    # later rounds: skipped files defining a subclass of a class found so far
    by_display = {s.display: s for s in sources}
    skipped = {i: o.skipped_bases for i, o in enumerate(outcomes) if o.skipped_bases is not None}

    partners: list[ModuleFacts] = []

    last: list[tuple[list[int], set[str]]] = []

    def extensible() -> set[str]:
        """The classes whose subclasses are read, over every file read so far."""
        modules = [*(o.facts for o in outcomes if o.facts is not None), *partners]
        key = [id(m) for m in modules]
        if not last or last[0][0] != key:
            last[:] = [(key, extensible_classes(modules, contract))]
        return last[0][1]

    def read(indices: list[int]) -> set[str]:
        redone = analyse_all(
            [by_display[outcomes[i].display] for i in indices], contract, jobs, True, limit, cache
        )
        for index, outcome in zip(indices, redone, strict=True):
            outcomes[index] = outcome
        return extensible()

    subclass_rounds(skipped, read, extensible())
    parsed = [(o.path, o.facts) for o in outcomes if o.facts is not None and o.path is not None]
    on_disk = {os.path.abspath(s.path) for s in sources}
    base = root or Path.cwd()
    for entry in config.context:
        if not (base / entry).is_dir():
            raise UsageError(f"context {entry!r} in the config: not a directory under {base}")
    roots = [*context, *(str(base / c) for c in config.context)]
    finder = ModuleFinder(context_roots(roots))
    partners += read_partners(
        [(os.path.abspath(path), facts) for path, facts in parsed],
        on_disk,
        needles(contract),
        contract,
        limit,
        finder,
        cache,
    )
    # and skipped files that subclass a class of a file read for context (a wrapper's
    # inner worker built on a worker of another package)
    more = subclass_rounds(
        {i: b for i, b in skipped.items() if outcomes[i].facts is None},
        read,
        extensible(),
    )
    if more:
        new = [(outcomes[i].path, outcomes[i].facts) for i in more]
        found_new = [(os.path.abspath(p), f) for p, f in new if f is not None and p is not None]
        partners += read_partners(
            found_new, on_disk, needles(contract), contract, limit, finder, cache
        )
    read_modules = [
        *((os.path.abspath(o.path), o.facts) for o in outcomes if o.facts and o.path),
        *((os.path.abspath(p.path), p) for p in partners),
    ]
    unread = unread_packages(read_modules, finder)
    unused = cache.unused if cache is not None else None
    return Facts(sources, walked, outcomes, partners, unread, unused or None)
