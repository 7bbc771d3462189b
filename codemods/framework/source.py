"""The files a migration reads: collected under the given paths (read as bytes by
:func:`runnercheck.workspace.reading.read_all`).

Nothing here imports or executes the code it reads. The walk is
:func:`runnercheck.files.walk` (the one ``check`` uses too) in its ``migrate`` form:
symbolic links are never followed (a link inside the given paths is skipped, its
target, when inside them too, is visited on its own; a link pointing outside is
reported), hidden directories are skipped, only regular files are read, and a file
larger than ``max_file_size`` is reported instead of read.
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from runnercheck.files import walk
from runnercheck.records import Note, Refused
from runnercheck.workspace.reading import CANNOT_READ


@dataclass(frozen=True)
class Collected:
    roots: tuple[Path, ...]
    files: tuple[Path, ...]
    #: what the walk did not read: refused, or only a note (nothing that could be
    #: migrated was hidden by it)
    skipped: tuple[Refused | Note, ...]
    #: Journals of interrupted runs met below the given paths.
    journals: tuple[Path, ...] = ()


def collect(paths: Iterable[str | os.PathLike[str]]) -> Collected:
    """Every ``*.py`` file under ``paths`` (files or directories), sorted, no links.

    Raises :class:`UsageError` for a path that does not exist."""
    walked = walk(paths, links="inside", skip_hidden=True)
    skipped: list[Refused | Note] = []
    for problem in walked.problems:
        code = "MIG003" if problem.kind == "link-outside" else CANNOT_READ
        path = Path(os.path.abspath(problem.path))
        if not problem.hides_source and problem.kind != "link-outside":
            skipped.append(Note("path", path, 0, problem.message, label="note"))
        else:
            skipped.append(Refused("parse", code, path, 0, problem.message))
    files = tuple(sorted({source.real for source in walked.files}))
    return Collected(walked.roots, files, tuple(skipped), tuple(walked.journals))


def package_files(files: Iterable[Path], known: Iterable[Path]) -> tuple[Path, ...]:
    """The other ``*.py`` files of the directories holding ``files`` (each file's
    package, read as context: a worker and its runner are planned together even when
    only one of them is given), not in ``known``; regular files only, no links, no
    subdirectories."""
    seen = set(known)
    found: set[Path] = set()
    for directory in sorted({path.parent for path in files}):
        try:
            entries = list(os.scandir(directory))
        except OSError:
            continue
        for entry in entries:
            if not entry.name.endswith(".py") or entry.name.startswith("."):
                continue
            try:
                regular = entry.is_file(follow_symlinks=False)
            except OSError:
                continue
            path = Path(entry.path)
            if regular and path not in seen:
                found.add(path)
    return tuple(sorted(found))
