"""Writing a migration: one transaction per worker/runner group, recoverable after a crash.

A run's changes are split into *units*: the files of one group, joined with every
other group that changes one of the same files (a shared ``model_runner_base.py``),
or one file changed alone. Under the tree lock (:class:`runnercheck.writes.treelock.TreeLock`)
:func:`commit`

1. recovers what an interrupted run left (:mod:`runnercheck.writes.recovery`) and removes the
   staging directories a ``kill -9`` may have left;
2. checks each unit: inside the given paths, no links, no read-only file (unless
   ``force``), every file still as planned; a unit that fails is refused
   (MIG003/MIG004/MIG005) and the others go on;
3. writes the journal (old and new contents of every file, see
   :mod:`runnercheck.writes.journal` and :mod:`runnercheck.writes.journal_files`) and makes it visible
   with one ``rename``;
4. writes each unit's files in place (:mod:`runnercheck.writes.write`), re-verifying each file
   right before its write and logging each step; a unit whose file changed meanwhile
   or cannot be written gets its old contents back (MIG005/MIG006) and the others go
   on;
5. removes the journal.

Only a ``kill -9`` (or a power loss) between 3 and 5 leaves anything behind: the
journal, and possibly a half-written group, which the next run recovers. SIGINT,
SIGTERM and SIGHUP take effect between two files: the unit being written gets its old
contents back, the units written stay, the journal is removed, and the run exits.
"""

from __future__ import annotations

import os
import pwd
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from runnercheck.files import within_roots
from runnercheck.records import Change, Refused
from runnercheck.writes import journal as jr
from runnercheck.writes.beneath import Escaped, Tree
from runnercheck.writes.checkpoints import checkpoint, deferred_signals, stop_if_interrupted
from runnercheck.writes.journal_files import Progress, retire, write_journal
from runnercheck.writes.recovery import (
    Unrecoverable,
    put_back,
    recover,
    recover_all,
    shown,
    tree_root,
)
from runnercheck.writes.treelock import TreeLock
from runnercheck.writes.write import (
    Conflict,
    WriteError,
    create,
    links_refused,
    replace_contents,
)
from runnercheck.writes.write import writable as is_writable

__all__ = ["Outcome", "Unrecoverable", "commit", "recover", "units"]


@dataclass
class Outcome:
    written: list[Path] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    #: One line per interrupted run that was recovered.
    recovered: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ units


def units(changes: Iterable[Change]) -> list[list[Change]]:
    """Changes grouped into transactions: a group with every group sharing a file."""
    changes = list(changes)
    parent: dict[str, str] = {}

    def find(key: str) -> str:
        while parent.setdefault(key, key) != key:
            parent[key] = parent[parent[key]]
            key = parent[key]
        return key

    keys: dict[Path, list[str]] = {}
    for change in changes:
        labels = [g for g in change.group.split(" + ") if g] or [f"file:{change.path}"]
        keys[change.path] = labels
        for label in labels[1:]:
            parent[find(label)] = find(labels[0])
    by_unit: dict[str, list[Change]] = {}
    for change in changes:
        by_unit.setdefault(find(keys[change.path][0]), []).append(change)
    return [sorted(unit, key=lambda c: str(c.path)) for unit in by_unit.values()]


def unit_label(unit: Sequence[Change]) -> str:
    labels: list[str] = []
    for change in unit:
        for label in change.group.split(" + ") if change.group else [change.path.name]:
            if label not in labels:
                labels.append(label)
    return " + ".join(labels)


def _precheck(
    tree: Tree, unit: Sequence[Change], roots: Sequence[Path], force: bool, replace_links: bool
) -> Refused | None:
    label = unit_label(unit)
    paths = tuple(c.path for c in unit)

    def refused(code: str, path: Path, why: str) -> Refused:
        return Refused("write", code, path, 0, f"{why}: {label} left alone", label, paths=paths)

    for change in unit:
        path = change.path
        if not within_roots(path, roots):
            return refused("MIG003", path, "outside the given paths or a symbolic link")
        try:
            info = tree.lstat(path)
        except FileNotFoundError:
            info = None
        except Escaped as exc:
            return refused("MIG003", path, f"{exc}")
        except OSError as exc:
            return refused("MIG005", path, f"cannot read: {exc.strerror or exc}")
        if change.old is None:
            if info is not None:
                return refused("MIG005", path, "created by someone else since it was planned")
            cannot = _directory_not_writable(path.parent)
            if cannot:
                return refused("MIG004", path, cannot)
            continue
        if info is None:
            return refused("MIG005", path, "cannot read: No such file or directory")
        if not stat.S_ISREG(info.st_mode):
            return refused("MIG005", path, "no longer a regular file")
        if info.st_nlink > 1 and not replace_links:
            return refused("MIG003", path, links_refused(path, info.st_nlink))
        mode = stat.S_IMODE(info.st_mode)
        if not jr.valid_mode(mode & 0o777):
            return refused("MIG004", path, f"its owner cannot read it (mode {mode:04o})")
        cannot = _not_writable(path, info, force)
        if cannot:
            return refused("MIG004", path, cannot)
        try:
            current: bytes | None = tree.read(path, max(len(change.old), 1) + 1)
        except (OSError, Escaped):
            current = None
        if current != change.old:
            return refused("MIG005", path, "changed on disk since it was planned")
    return None


def _owner(uid: int) -> str:
    try:
        return pwd.getpwuid(uid).pw_name
    except (KeyError, OverflowError):
        return f"uid {uid}"


def _read_only_fs(path: Path) -> bool:
    try:
        return bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return False


def _not_writable(path: Path, info: os.stat_result, force: bool) -> str:
    """Why this run may not rewrite ``path`` (``""`` when it may), in words."""
    mode = stat.S_IMODE(info.st_mode)
    if _read_only_fs(path):
        return "on a read-only file system"
    owner = info.st_uid == os.geteuid()
    if not is_writable(info.st_mode):
        if not force:
            return (
                f"read-only (mode {mode:04o}; --force rewrites read-only files and keeps "
                "their mode)"
            )
        if owner or os.access(path, os.W_OK):
            return ""
        return (
            f"read-only (mode {mode:04o}) and owned by {_owner(info.st_uid)}, not by this "
            "user: --force cannot make it writable (only its owner can)"
        )
    if os.access(path, os.W_OK):
        return ""
    if owner:
        return f"not writable by this user, its owner (mode {mode:04o})"
    return (
        f"not writable by this user: owned by {_owner(info.st_uid)} (mode {mode:04o}); run as "
        "a user who may write it"
    )


def _directory_not_writable(directory: Path) -> str:
    """Why no file can be created in (or a journal written to) ``directory``."""
    if os.access(directory, os.W_OK | os.X_OK):
        return ""
    try:
        info = os.stat(directory)
    except OSError as exc:
        return f"{shown(directory)}: {exc.strerror or exc}"
    if _read_only_fs(directory):
        return f"{shown(directory)} is on a read-only file system"
    mode = stat.S_IMODE(info.st_mode)
    return (
        f"cannot create files in {shown(directory)}: the directory is not writable by this "
        f"user (owned by {_owner(info.st_uid)}, mode {mode:04o})"
    )


# ------------------------------------------------------------------ commit


def _entries(tree: Tree, ready: list[list[Change]]) -> list[jr.Entry]:
    entries = []
    for unit in ready:
        label = unit_label(unit)
        for change in unit:
            mode = None
            if change.old is not None:
                mode = stat.S_IMODE(tree.lstat(change.path).st_mode) & 0o777
            entries.append(jr.Entry(change.path, label, change.old, change.new, mode))
    return entries


class _Failed(Exception):
    """A unit's write failed at ``path`` (its files have their old contents again)."""

    def __init__(self, path: Path, cause: Conflict | Escaped | OSError) -> None:
        super().__init__(str(cause))
        self.path = path
        self.cause = cause


def _write_unit(
    tree: Tree,
    unit: Sequence[Change],
    force: bool,
    replace_links: bool,
    index: dict[Path, int],
    progress: Progress,
) -> None:
    """Write one unit; on any failure put back what was written (the file whose write
    failed part-way too) and re-raise."""
    done: list[Change] = []
    change = unit[0]
    begun: list[Change] = []  # the file being written, once its first byte may be
    try:
        for change in unit:
            stop_if_interrupted()
            checkpoint("file")
            number = index[change.path]
            if change.old is None:
                progress.record("start", number)
                begun[:] = [change]
                create(tree, change.path, change.new, checkpoint)
                progress.record("done", number)
            else:
                expected = change.old

                def verified(name: str, number: int = number, change: Change = change) -> None:
                    if name == "written":  # logged while the lease still holds editors off
                        progress.record("done", number)
                    checkpoint(name)
                    if name == "verified":  # re-read and as planned: the write begins
                        progress.record("start", number)
                        begun[:] = [change]

                replace_contents(
                    tree,
                    change.path,
                    lambda current, expected=expected: current == expected,  # type: ignore[misc]
                    change.new,
                    len(expected) + 1,
                    force,
                    verified,
                    replace_links,
                )
            begun.clear()
            done.append(change)
    except BaseException as exc:
        _undo(tree, done + begun, unit, index, progress)
        if isinstance(exc, (Conflict, Escaped, OSError)):
            raise _Failed(change.path, exc) from None
        raise


def _undo(
    tree: Tree,
    done: list[Change],
    unit: Sequence[Change],
    index: dict[Path, int],
    progress: Progress,
) -> None:
    """Put back every file of ``done`` (the last one may hold a write cut short)."""
    label = unit_label(unit)
    for change in reversed(done):
        number = index[change.path]
        try:
            _record(progress, "undo", number)
            put_back(tree, jr.Entry(change.path, label, change.old, change.new))
            _record(progress, "undone", number)
        except (Conflict, Escaped, OSError) as exc:
            reason = exc.strerror if isinstance(exc, OSError) and exc.strerror else exc
            raise Unrecoverable(
                f"{shown(change.path)}: cannot put back its old contents ({reason}); "
                "the journal stays: run `runnercheck migrate --recover` on the tree"
            ) from None


def _record(progress: Progress, step: str, number: int) -> None:
    """Log a step of putting a file back, if the log can still grow (a full disk): the
    old contents go back either way, and recovery reads the file itself."""
    try:
        progress.record(step, number)
    except OSError:
        pass


def _refusal(unit: Sequence[Change], path: Path, code: str, reason: str) -> Refused:
    label = unit_label(unit)
    message = f"{reason}: {label} left as it was"
    return Refused("write", code, path, 0, message, label, paths=tuple(c.path for c in unit))


def commit(
    changes: Iterable[Change],
    roots: Sequence[Path],
    force: bool = False,
    met: Iterable[Path] = (),
    lock_timeout: float = 30.0,
    replace_links: bool = False,
) -> Outcome:
    """Write ``changes`` (see the module docstring); a unit's problem refuses that unit,
    only a state a person must sort out raises (:class:`Unrecoverable`).
    ``replace_links``: a file with other hard links is written as a new file instead of
    being refused (MIG003)."""
    outcome = Outcome()
    planned = units(changes)
    if not planned:
        return outcome
    root = tree_root(roots)
    with deferred_signals(), TreeLock(root, lock_timeout):
        outcome.recovered = recover_all(root, roots, met)
        try:
            tree = Tree(root)
        except (OSError, Escaped) as exc:
            raise WriteError(
                f"{shown(root)}: cannot open the tree ({exc}): nothing was changed"
            ) from None
        with tree:
            _commit_in(tree, planned, roots, force, replace_links, outcome)
    return outcome


def _commit_in(
    tree: Tree,
    planned: list[list[Change]],
    roots: Sequence[Path],
    force: bool,
    replace_links: bool,
    outcome: Outcome,
) -> None:
    """Steps 2 to 5 of the module docstring, every path reached through ``tree``."""
    ready: list[list[Change]] = []
    for unit in planned:
        refused = _precheck(tree, unit, roots, force, replace_links)
        if refused is not None:
            outcome.refused.append(refused)
        else:
            ready.append(unit)
    if not ready:
        return
    entries = _entries(tree, ready)
    size = sum(len(e.old or b"") + len(e.new) for e in entries)
    if size > jr.JOURNAL_LIMIT:
        raise WriteError(
            f"{shown(tree.root)}: the changes hold {size} bytes, more than one journal takes "
            f"({jr.JOURNAL_LIMIT}); migrate fewer paths at a time: nothing was changed"
        )
    index = {entry.path: number for number, entry in enumerate(entries)}
    cannot = _directory_not_writable(tree.root)
    if cannot:
        raise WriteError(f"{cannot}; migrate writes its journal there first: nothing was changed")
    directory = None
    try:
        directory = write_journal(tree, entries)
        progress = Progress(tree, directory)
    except OSError as exc:
        if directory is not None:
            retire(tree, directory)  # published, but nothing was written under it
        raise WriteError(
            f"{shown(tree.root)}: cannot write the migrate journal ({exc.strerror or exc}): "
            "nothing was changed"
        ) from None
    try:
        for unit in ready:
            try:
                _write_unit(tree, unit, force, replace_links, index, progress)
            except _Failed as failed:
                outcome.refused.append(_failed_refusal(unit, failed))
                continue
            outcome.written += [c.path for c in unit]
        for parent in sorted({c.path.parent for u in ready for c in u}):
            tree.fsync(parent)
    except Unrecoverable:
        progress.close()
        raise  # the journal stays: the next run (or --recover) finishes the job
    except BaseException:
        progress.close()  # interrupted between units: what is written stays
        retire(tree, directory)
        raise
    progress.close()
    retire(tree, directory)


def _failed_refusal(unit: Sequence[Change], failed: _Failed) -> Refused:
    cause = failed.cause
    if isinstance(cause, Escaped):  # a link on the way, or a file with other hard links
        return _refusal(unit, failed.path, "MIG003", str(cause))
    if isinstance(cause, Conflict):
        return _refusal(unit, failed.path, "MIG005", str(cause))
    return _refusal(unit, failed.path, "MIG006", f"cannot write: {cause.strerror or cause}")
