"""Writing the migrated sources: atomically, only inside the given paths.

Every file of a change set is first written to a temporary file in its own
directory; only when all of them exist are they moved into place with
``os.replace`` (atomic per file). A failure before that removes the temporary
files and leaves every original untouched. Existing files keep their
permission bits; the bytes written are exactly the new source (LibCST keeps
the file's encoding and newlines)."""

from __future__ import annotations

import os
import stat
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from codemods.source import within_roots
from runnercheck.errors import RunnerCheckError


class WriteError(RunnerCheckError):
    """A file could not be written (the message names it)."""


@dataclass(frozen=True)
class Change:
    path: Path
    old: bytes | None  # None: a new file
    new: bytes


def write_changes(changes: Iterable[Change], roots: Iterable[Path]) -> list[Path]:
    """Write a change set; returns the paths written. Raises WriteError (nothing
    replaced) when a path is outside ``roots``, is a link, or cannot be written."""
    changes = list(changes)
    roots = list(roots)
    for change in changes:
        if not within_roots(change.path, roots):
            raise WriteError(f"{change.path}: outside the given paths or a symbolic link")
        if change.old is not None:
            try:
                current = change.path.read_bytes()
            except OSError as exc:
                raise WriteError(f"{change.path}: cannot read: {exc.strerror}") from None
            if current != change.old:
                raise WriteError(f"{change.path}: changed on disk during the migration")
        elif change.path.exists():
            raise WriteError(f"{change.path}: already exists")
    staged: list[tuple[str, Change]] = []
    try:
        for change in changes:
            fd, tmp = tempfile.mkstemp(
                prefix=f".{change.path.name}.", suffix=".migrate", dir=change.path.parent
            )
            staged.append((tmp, change))
            with os.fdopen(fd, "wb") as handle:
                handle.write(change.new)
                handle.flush()
                os.fsync(handle.fileno())
            if change.old is not None:
                mode = stat.S_IMODE(change.path.stat().st_mode)
            else:
                umask = os.umask(0)
                os.umask(umask)
                mode = 0o666 & ~umask
            os.chmod(tmp, mode)
    except OSError as exc:
        for tmp, _ in staged:
            try:
                os.unlink(tmp)
            except OSError:
                pass
        raise WriteError(f"{exc.filename or 'a file'}: cannot write: {exc.strerror}") from None
    written = []
    for tmp, change in staged:
        os.replace(tmp, change.path)
        written.append(change.path)
    return written
