"""Writing a migration: one transaction per worker/runner group, recoverable after a crash.

A run's changes are split into *units*: the files of one group, joined with every
other group that changes one of the same files (a shared ``model_runner_base.py``),
or one file changed alone. Under the tree lock (:class:`runnercheck.journal.TreeLock`)
:func:`commit`

1. finishes whatever an interrupted run left (:func:`recover`), and removes the
   staging directories a ``kill -9`` may have left;
2. checks each unit: inside the given paths, no links, no read-only file (unless
   ``force``), every file still holds what the plan was made from; a unit that
   fails is refused (MIG003/MIG004/MIG005) and the others go on;
3. writes the journal (old and new contents of every file, see
   :mod:`runnercheck.journal`) and makes it visible with one ``rename``;
4. writes each unit's files in place (:mod:`codemods.write`), re-verifying each
   file right before its write; a unit whose file changed meanwhile, or cannot be
   written, is put back to its old contents (MIG005/MIG006);
5. removes the journal.

Only a ``kill -9`` (or a power loss) between 3 and 5 leaves anything behind: the
journal, and possibly a half-written group. The next ``runnercheck migrate`` (or
``migrate --recover``) rolls such a group **back** to its old contents, byte for
byte: the new contents were planned from the old ones, so the run that recovers
plans again from a consistent tree and writes them anew (rolling forward without a
fresh plan would write changes no run re-verified). A file edited after the crash is
never overwritten: recovery then stops and says where the old contents are.
SIGINT, SIGTERM and SIGHUP during a transaction finish or roll back the unit being
written and remove the journal before the run exits.

For tests and soak runs, ``RUNNERCHECK_FAULT=kill:N`` kills the process with SIGKILL
at the N-th checkpoint of a transaction, and ``RUNNERCHECK_FAULT=pause:NAME:SECONDS``
sleeps at each checkpoint called NAME (``verified``: after a file was re-verified and
before it is written).
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import threading
import time
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from codemods.source import within_roots
from codemods.write import Change, Conflict, create, fsync_dir, remove_created, replace_contents
from codemods.write import writable as is_writable
from runnercheck import journal as jr
from runnercheck.errors import RunnerCheckError
from runnercheck.files import JOURNAL_NAME, ReadError, read_source


class Unrecoverable(RunnerCheckError):
    """An interrupted run left files that cannot be put back without a person."""


@dataclass(frozen=True)
class Refused:
    """A unit that was not written (its files are as they were)."""

    path: Path
    group: str
    code: str
    message: str
    paths: tuple[Path, ...] = ()


@dataclass
class Outcome:
    written: list[Path] = field(default_factory=list)
    refused: list[Refused] = field(default_factory=list)
    #: One line per interrupted run that was rolled back.
    recovered: list[str] = field(default_factory=list)


# ------------------------------------------------------------------ checkpoints

#: Called with each checkpoint's name (tests count and interrupt with it).
hook: Callable[[str], None] | None = None
_count = 0


def checkpoint(name: str) -> None:
    global _count
    _count += 1
    if hook is not None:
        hook(name)
    fault = os.environ.get("RUNNERCHECK_FAULT", "")
    if fault.startswith("kill:") and fault[5:].isdigit() and int(fault[5:]) == _count:
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault.startswith("pause:"):
        _, _, rest = fault.partition(":")
        wanted, _, seconds = rest.partition(":")
        if wanted == name:
            time.sleep(float(seconds or 0))


def _stop_if_interrupted() -> None:
    if _interrupted:
        raise KeyboardInterrupt


_interrupted: int = 0


@contextmanager
def _deferred_signals() -> Iterator[None]:
    """SIGINT, SIGTERM, SIGHUP set a flag that the next checkpoint turns into
    KeyboardInterrupt (a unit is never left half-written by them). Main thread only."""
    global _interrupted
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGIO]
    previous = {sig: signal.getsignal(sig) for sig in wanted}

    def note(signum: int, frame: Any) -> None:
        global _interrupted
        if signum != signal.SIGIO:  # SIGIO: a lease break; the write finishes first
            _interrupted = signum

    for sig in wanted:
        signal.signal(sig, note)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _interrupted = 0


# ------------------------------------------------------------------ units


def tree_root(roots: Sequence[Path]) -> Path:
    """The directory holding every given path: where the journal and the lock live."""
    directories = [str(r if r.is_dir() else r.parent) for r in roots]
    return Path(os.path.commonpath(directories))


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


def _precheck(unit: Sequence[Change], roots: Sequence[Path], force: bool) -> Refused | None:
    label = unit_label(unit)
    paths = tuple(c.path for c in unit)
    for change in unit:
        path = change.path
        if not within_roots(path, roots):
            message = f"outside the given paths or a symbolic link: {label} left alone"
            return Refused(path, label, "MIG003", message, paths)
        if change.old is None:
            if os.path.lexists(path):
                message = f"created by someone else since it was planned: {label} left alone"
                return Refused(path, label, "MIG005", message, paths)
            continue
        try:
            info = os.lstat(path)
        except OSError as exc:
            message = f"cannot read: {exc.strerror or exc}: {label} left alone"
            return Refused(path, label, "MIG005", message, paths)
        if not stat.S_ISREG(info.st_mode):
            message = f"no longer a regular file: {label} left alone"
            return Refused(path, label, "MIG005", message, paths)
        if not force and (not is_writable(info.st_mode) or not os.access(path, os.W_OK)):
            mode = stat.S_IMODE(info.st_mode)
            message = (
                f"read-only (mode {mode:04o}): {label} left alone (--force rewrites read-only "
                "files and keeps their mode)"
            )
            return Refused(path, label, "MIG004", message, paths)
        try:
            current = read_source(path, max(len(change.old), 1) + 1)
        except ReadError:
            current = None
        if current != change.old:
            message = f"changed on disk since it was planned: {label} left alone"
            return Refused(path, label, "MIG005", message, paths)
    return None


# ------------------------------------------------------------------ the journal


def _write_blob(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    try:
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.write(fd, view[offset:])
        os.fsync(fd)
    finally:
        os.close(fd)


def _write_journal(tree: Path, entries: list[jr.Entry]) -> Path:
    staging = tree / f"{JOURNAL_NAME}.{os.getpid()}.new"
    shutil.rmtree(staging, ignore_errors=True)
    os.mkdir(staging, 0o700)
    try:
        for kind in ("old", "new"):
            os.mkdir(staging / kind, 0o700)
        for index, entry in enumerate(entries):
            if entry.old is not None:
                _write_blob(staging / jr.blob_name("old", index), entry.old)
            _write_blob(staging / jr.blob_name("new", index), entry.new)
        text = json.dumps(jr.manifest(entries, tree), indent=1).encode()
        _write_blob(staging / jr.MANIFEST, text)
        for directory in (staging / "old", staging / "new", staging):
            fsync_dir(directory)
        checkpoint("journal-staged")
        target = jr.journal_dir(tree)
        os.rename(staging, target)
    except BaseException:
        shutil.rmtree(staging, ignore_errors=True)
        raise
    fsync_dir(tree)
    checkpoint("journal-written")
    return target


def _retire(directory: Path) -> None:
    """Remove a journal: first out of the way with one rename, then its files."""
    done = directory.parent / f"{JOURNAL_NAME}.{os.getpid()}.done"
    shutil.rmtree(done, ignore_errors=True)
    os.rename(directory, done)
    fsync_dir(directory.parent)
    checkpoint("journal-retired")
    shutil.rmtree(done, ignore_errors=True)


def _remove_stale(tree: Path) -> None:
    """Staging and retired journals left by a ``kill -9`` (under the lock: nobody
    else is using them)."""
    try:
        names = os.listdir(tree)
    except OSError:
        return
    for name in names:
        if name.startswith(JOURNAL_NAME + ".") and (name.endswith((".new", ".done"))):
            shutil.rmtree(tree / name, ignore_errors=True)


# ------------------------------------------------------------------ recovery


def _shown(path: Path) -> str:
    try:
        relative = os.path.relpath(path)
    except ValueError:
        return str(path)
    return str(path) if relative.startswith("..") else relative


def _partial_or_new(entry: jr.Entry) -> Callable[[bytes], bool]:
    def accept(current: bytes) -> bool:
        return jr.classify(entry, current) in ("new", "partial")

    return accept


def _restore(entry: jr.Entry) -> None:
    """Put one file back to its old contents (and mode); it is new or partly written."""
    if entry.old is None:
        if not remove_created(entry.path, entry.new):
            raise Conflict("was edited since")
        return
    replace_contents(
        entry.path,
        _partial_or_new(entry),
        entry.old,
        max(len(entry.old), len(entry.new)) + 1,
        force=True,
    )


def _restore_mode(entry: jr.Entry) -> None:
    if entry.mode is None or entry.old is None:
        return
    try:
        current = stat.S_IMODE(os.lstat(entry.path).st_mode)
        if current != entry.mode:
            os.chmod(entry.path, entry.mode, follow_symlinks=False)
    except OSError:
        pass


def describe_pending(found: jr.Journal) -> tuple[list[str], list[str]]:
    """(half-applied groups, files edited since) of a journal, as text."""
    mixed, edited = [], []
    for group in jr.groups(found):
        if group.mixed:
            mixed.append(f"{group.group} ({group.describe(found.root)})")
        edited += [_shown(p) for p, s in group.states.items() if s == "changed"]
    return mixed, edited


def recover_journal(found: jr.Journal) -> str:
    """Roll an interrupted run's journal back; the line to print.

    :class:`Unrecoverable` when a file was edited since (nothing is touched then)."""
    states = {entry.path: jr.state_of(entry) for entry in found.entries}
    where = _shown(found.directory)
    mixed, edited = describe_pending(found)
    if edited:
        raise Unrecoverable(
            f"{where}: an interrupted `runnercheck migrate` (pid {found.pid}, {found.started}) "
            f"left {'; '.join(mixed) or 'its groups'} and {', '.join(edited)} changed since: "
            f"nothing was touched; the old and new contents are in {where}/old and "
            f"{where}/new ({jr.MANIFEST} says which is which); put back what you want, then "
            "delete that directory"
        )
    for entry in found.entries:
        if states[entry.path] in ("new", "partial"):
            try:
                _restore(entry)
            except (Conflict, OSError) as exc:
                raise Unrecoverable(
                    f"{_shown(entry.path)}: cannot roll back the interrupted migrate ({exc}); "
                    f"its old contents are in {where}/old (see {jr.MANIFEST})"
                ) from None
        _restore_mode(entry)
    _retire(found.directory)
    run = f"an interrupted `runnercheck migrate` (pid {found.pid}, {found.started})"
    if mixed:
        return f"{where}: rolled back {run}: half-applied {'; '.join(mixed)}"
    if any(s != "old" for s in states.values()):
        return f"{where}: rolled back {run}: every file it had written is old again"
    return f"{where}: removed the journal of {run}; it had written nothing"


def _journals(roots: Sequence[Path], met: Iterable[Path]) -> list[Path]:
    return jr.find(roots, met)


def _recover_all(tree: Path, roots: Sequence[Path], met: Iterable[Path]) -> list[str]:
    """Under ``tree``'s lock: recover every journal that concerns ``roots``."""
    lines: list[str] = []
    _remove_stale(tree)
    for directory in _journals([tree], met):
        try:
            found = jr.load(directory)
        except jr.JournalError as exc:
            raise Unrecoverable(
                f"{exc}: put back the files it lists by hand, then delete {directory}"
            ) from None
        owner = directory.parent
        if owner != tree and owner in tree.parents:
            outside = [e.path for e in found.entries if not within_roots(e.path, roots)]
            if outside:
                raise Unrecoverable(
                    f"{_shown(directory)}: an interrupted `runnercheck migrate` of "
                    f"{_shown(owner)} left files outside the given paths (e.g. "
                    f"{_shown(outside[0])}): run `runnercheck migrate --recover {_shown(owner)}`"
                )
        _remove_stale(owner)
        lines.append(recover_journal(found))
    return lines


def recover(
    roots: Sequence[Path], met: Iterable[Path] = (), lock_timeout: float = 30.0
) -> list[str]:
    """Roll back whatever interrupted runs left under (or above) ``roots``; one line
    per journal. :class:`Unrecoverable` when a person must decide."""
    tree = tree_root(roots)
    with _deferred_signals(), jr.TreeLock(tree, lock_timeout):
        return _recover_all(tree, roots, met)


# ------------------------------------------------------------------ commit


def _entries(ready: list[list[Change]]) -> list[jr.Entry]:
    entries = []
    for unit in ready:
        label = unit_label(unit)
        for change in unit:
            mode = None
            if change.old is not None:
                mode = stat.S_IMODE(os.lstat(change.path).st_mode)
            entries.append(jr.Entry(change.path, label, change.old, change.new, mode))
    return entries


def _write_unit(unit: Sequence[Change], force: bool) -> list[Change]:
    """Write one unit; on any failure put back what was written and re-raise."""
    done: list[Change] = []
    change = unit[0]
    try:
        for change in unit:
            _stop_if_interrupted()
            checkpoint("file")
            if change.old is None:
                create(change.path, change.new, checkpoint)
            else:
                expected = change.old
                replace_contents(
                    change.path,
                    lambda current, expected=expected: current == expected,  # type: ignore[misc]
                    change.new,
                    len(expected) + 1,
                    force,
                    checkpoint,
                )
            done.append(change)
    except BaseException as exc:
        _undo(done, unit)
        if isinstance(exc, (Conflict, OSError)):
            raise _Failed(change.path, exc) from None
        raise
    return done


class _Failed(Exception):
    """A unit's write failed at ``path`` (its files are back to their old contents)."""

    def __init__(self, path: Path, cause: Conflict | OSError) -> None:
        super().__init__(str(cause))
        self.path = path
        self.cause = cause


def _undo(done: list[Change], unit: Sequence[Change]) -> None:
    label = unit_label(unit)
    for change in reversed(done):
        entry = jr.Entry(change.path, label, change.old, change.new)
        try:
            _restore(entry)
        except (Conflict, OSError) as exc:
            raise Unrecoverable(
                f"{_shown(change.path)}: cannot put back its old contents ({exc}); "
                f"run `runnercheck migrate --recover` on the tree"
            ) from None


def commit(
    changes: Iterable[Change],
    roots: Sequence[Path],
    force: bool = False,
    met: Iterable[Path] = (),
    lock_timeout: float = 30.0,
) -> Outcome:
    """Write ``changes`` (see the module docstring); never raises for one unit's
    problem (it is refused), only when a person must decide (:class:`Unrecoverable`)."""
    outcome = Outcome()
    planned = units(changes)
    if not planned:
        return outcome
    tree = tree_root(roots)
    with _deferred_signals(), jr.TreeLock(tree, lock_timeout):
        outcome.recovered = _recover_all(tree, roots, met)
        ready: list[list[Change]] = []
        for unit in planned:
            refused = _precheck(unit, roots, force)
            if refused is not None:
                outcome.refused.append(refused)
            else:
                ready.append(unit)
        if not ready:
            return outcome
        directory = _write_journal(tree, _entries(ready))
        try:
            for unit in ready:
                try:
                    _write_unit(unit, force)
                except _Failed as failed:
                    cause = failed.cause
                    if isinstance(cause, Conflict):
                        refusal = _refusal(unit, failed.path, "MIG005", str(cause))
                    else:
                        reason = f"cannot write: {cause.strerror or cause}"
                        refusal = _refusal(unit, failed.path, "MIG006", reason)
                    outcome.refused.append(refusal)
                    continue
                outcome.written += [c.path for c in unit]
            for parent in sorted({c.path.parent for u in ready for c in u}):
                fsync_dir(parent)
        except Unrecoverable:
            raise  # the journal stays: the next run (or --recover) finishes the job
        except BaseException:
            # interrupted between units: the units written stay, the journal goes
            _retire(directory)
            raise
        _retire(directory)
    return outcome


def _refusal(unit: Sequence[Change], path: Path, code: str, reason: str) -> Refused:
    label = unit_label(unit)
    message = f"{reason}: {label} left as it was"
    return Refused(path, label, code, message, tuple(c.path for c in unit))
