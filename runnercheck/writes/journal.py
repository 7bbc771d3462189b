"""``migrate``'s journal and tree lock: what ``check`` and ``migrate`` both read.

``runnercheck migrate`` writes a change set as one transaction (see
:mod:`runnercheck.writes.transaction`). Before it touches a file it writes a journal into the
root of the tree it migrates, holding every file's old and new contents::

    ROOT/.runnercheck-migrate/
        manifest.json      the files (relative to ROOT), their group, mode and hashes
        old/0, old/1 ...   the old contents, byte for byte (absent for a created file)
        new/0, new/1 ...   the new contents

The journal appears with one ``rename`` once it is complete, and disappears once
every file is written. A journal that is still there means a run was interrupted
(``kill -9``, power loss) or is writing right now (it then holds the tree lock). Each
file is then in one of four states: ``old``, ``new``, ``partial`` (a write was cut
short: a prefix of the new contents over the old ones) or ``changed`` (neither: edited
since). A group whose files are not all ``old`` or all ``new`` is half-applied:
``check`` reports it (RC003), ``migrate`` rolls it back, and ``migrate --recover``
only rolls back. Nothing here executes or imports what it reads.

The tree lock is in :mod:`runnercheck.writes.treelock`.
"""

from __future__ import annotations

import errno
import json
import os
import re
import stat
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runnercheck.errors import RunnerCheckError
from runnercheck.files import (
    DEFAULT_MAX_FILE_SIZE,
    JOURNAL_NAME,
    ReadError,
    kind_of,
    read_source,
)
from runnercheck.writes.beneath import read_all
from runnercheck.writes.treelock import locked

FORMAT = "runnercheck-migrate-journal"
VERSION = 1
MANIFEST = "manifest.json"
#: One line per step of the run, appended as it goes (see :attr:`Journal.steps`).
PROGRESS = "progress"
STEPS = ("start", "done", "undo", "undone")

State = Literal["old", "new", "partial", "changed"]


class JournalError(RunnerCheckError):
    """A journal that is not accepted: unreadable, not as ``migrate`` writes it, or
    listing a file outside its tree. ``why`` says what is wrong, in a few words."""

    def __init__(self, directory: Path, why: str) -> None:
        self.directory = directory
        self.why = why
        super().__init__(f"{_shown(directory)}: {why}")


@dataclass(frozen=True)
class Entry:
    #: Absolute path of the file.
    path: Path
    group: str
    #: None: the transaction creates the file.
    old: bytes | None
    new: bytes
    #: Permission bits of the old file (None for a created file).
    mode: int | None = None


@dataclass
class Journal:
    root: Path
    directory: Path
    entries: list[Entry] = field(default_factory=list)
    pid: int = 0
    started: str = ""
    #: The last step the run recorded for each entry (by index): ``start`` (about to be
    #: written), ``done``, ``undo`` (about to be put back), ``undone``.
    steps: dict[int, str] = field(default_factory=dict)


def journal_dir(root: Path) -> Path:
    return root / JOURNAL_NAME


def blob_name(kind: str, index: int) -> str:
    return f"{kind}/{index}"


def digest(data: bytes) -> str:
    import hashlib  # (only a run that writes, or finds a journal, digests)

    return hashlib.sha256(data).hexdigest()


def manifest(entries: list[Entry], root: Path) -> dict[str, Any]:
    """The manifest of ``entries`` (paths relative to ``root``)."""
    return {
        "format": FORMAT,
        "version": VERSION,
        "pid": os.getpid(),
        "started": time.strftime("%Y-%m-%d %H:%M:%S"),
        "entries": [
            {
                "path": os.path.relpath(entry.path, root),
                "group": entry.group,
                "old": None if entry.old is None else blob_name("old", index),
                "new": blob_name("new", index),
                "mode": entry.mode,
                "old_sha256": None if entry.old is None else digest(entry.old),
                "new_sha256": digest(entry.new),
            }
            for index, entry in enumerate(entries)
        ],
    }


#: The most bytes of a manifest (it holds paths and hashes, never contents).
MANIFEST_LIMIT = 16 * 1024 * 1024
#: The most bytes of the progress log (a few lines per file).
PROGRESS_LIMIT = 4 * 1024 * 1024
#: The most bytes of one blob: what ``migrate`` reads (``max_file_size``) and more.
BLOB_LIMIT = 2 * DEFAULT_MAX_FILE_SIZE
#: The most bytes of all blobs together: a journal holds one run's old and new contents.
JOURNAL_LIMIT = BLOB_LIMIT
#: The most files one journal lists.
MAX_ENTRIES = 100_000
#: The deepest nesting of ``[`` and ``{`` a manifest has (it has 3).
MAX_DEPTH = 8
#: The largest pid a kernel hands out (Linux's ``pid_max`` limit is 2**22).
MAX_PID = 2**31 - 1
_HEX64 = re.compile(r"[0-9a-f]{64}")
_ENTRY_KEYS = frozenset({"path", "group", "old", "new", "mode", "old_sha256", "new_sha256"})
_NOFOLLOW = os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


class _Bad(ValueError):
    """Why a journal is not accepted (the message says what is wrong)."""


def load(directory: Path) -> Journal:
    """The journal in ``directory``; :class:`JournalError` naming what is wrong.

    A journal is untrusted input (a repository can ship one): it is accepted only when
    the directory, its manifest, progress log and blobs are real files and directories
    (no symbolic link is followed), every field has the type and range ``migrate``
    writes, and every file it lists resolves, links followed, to a path inside the
    tree that holds the journal with no link on the way. Nothing is changed here."""
    root = Path(os.path.realpath(directory.parent))
    directory = root / directory.name
    try:
        fd = _open_dir(directory)
        try:
            journal = _load(root, directory, fd)
        finally:
            os.close(fd)
    except (_Bad, OSError) as exc:
        why = str(exc) if isinstance(exc, _Bad) else (exc.strerror or type(exc).__name__)
        raise JournalError(
            directory, f"migrate journal left alone ({why}): nothing was read from it or changed"
        ) from None
    return journal


def _open_dir(directory: Path, dir_fd: int | None = None, name: str | None = None) -> int:
    """A descriptor of a real directory (never through a symbolic link)."""
    target = name if name is not None else directory
    try:
        info = os.lstat(target, dir_fd=dir_fd)
    except OSError as exc:
        raise _Bad(f"{target}: {exc.strerror or exc}") from None
    if stat.S_ISLNK(info.st_mode):
        raise _Bad(f"{target} is a symbolic link, not followed")
    if not stat.S_ISDIR(info.st_mode):
        raise _Bad(f"{target} is not a directory")
    flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
    try:
        return os.open(target, flags, dir_fd=dir_fd)
    except OSError as exc:
        raise _Bad(f"{target}: {exc.strerror or exc}") from None


def _read_in(dir_fd: int, name: str, limit: int, missing_ok: bool = False) -> bytes | None:
    """A regular file in ``dir_fd`` of at most ``limit`` bytes, never through a link."""
    try:
        fd = os.open(name, os.O_RDONLY | _NOFOLLOW, dir_fd=dir_fd)
    except FileNotFoundError:
        if missing_ok:
            return None
        raise _Bad(f"{name} is missing") from None
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise _Bad(f"{name} is a symbolic link, not followed") from None
        raise _Bad(f"{name}: {exc.strerror or exc}") from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise _Bad(f"{name} is {kind_of(info.st_mode)}, not a regular file")
        if info.st_size > limit:
            raise _Bad(f"{name} has {info.st_size} bytes, more than {limit}")
        return read_all(fd, limit)
    except OSError as exc:
        if exc.errno == errno.EFBIG:
            raise _Bad(f"{name} has more than {limit} bytes") from None
        raise _Bad(f"{name}: {exc.strerror or exc}") from None
    finally:
        os.close(fd)


def _depth(text: bytes) -> int:
    """The deepest nesting of arrays and objects in a JSON text (strings skipped),
    without recursion, so that a hostile manifest cannot exhaust the stack."""
    brackets = re.sub(rb"[^\[\]{}]", b"", re.sub(rb'"(?:[^"\\]|\\.)*"', b"", text))
    depth = deepest = 0
    for byte in brackets:
        depth += 1 if byte in b"[{" else -1
        deepest = max(deepest, depth)
    return deepest


def _field(item: dict[str, Any], key: str, kind: type | tuple[type, ...], where: str) -> Any:
    value = item.get(key)
    if not isinstance(value, kind) or isinstance(value, bool):
        raise _Bad(f"{where}: {key!r} is {_kind(value)}, not what migrate writes")
    return value


def _kind(value: object) -> str:
    text = repr(value)
    return text if len(text) <= 40 else text[:37] + "..."


def _load(root: Path, directory: Path, fd: int) -> Journal:
    text = _read_in(fd, MANIFEST, MANIFEST_LIMIT)
    assert text is not None
    if _depth(text) > MAX_DEPTH:
        raise _Bad(f"{MANIFEST} is nested deeper than {MAX_DEPTH} levels")
    try:
        data = json.loads(text)
    except (ValueError, RecursionError) as exc:
        raise _Bad(f"{MANIFEST} is not JSON: {str(exc)[:80]}") from None
    if not isinstance(data, dict) or data.get("format") != FORMAT:
        raise _Bad(f"{MANIFEST} is not a runnercheck migrate journal")
    if data.get("version") != VERSION:
        raise _Bad(f"{MANIFEST} has version {_kind(data.get('version'))}, not {VERSION}")
    pid = _field(data, "pid", int, MANIFEST)
    if not 0 < pid <= MAX_PID:
        raise _Bad(f"{MANIFEST}: 'pid' {_kind(pid)} is out of range")
    started = _field(data, "started", str, MANIFEST)
    items = _field(data, "entries", list, MANIFEST)
    if len(started) > 64 or "\0" in started:
        raise _Bad(f"{MANIFEST}: 'started' is not a time migrate writes")
    if len(items) > MAX_ENTRIES:
        raise _Bad(f"{MANIFEST} lists {len(items)} files, more than {MAX_ENTRIES}")
    journal = Journal(root, directory, pid=pid, started=started)
    seen: set[Path] = set()
    old_fd = _open_dir(directory, fd, "old")
    new_fd = _open_dir(directory, fd, "new")
    try:
        _within_budget(old_fd, new_fd, len(items))
        for index, item in enumerate(items):
            entry = _entry(root, index, item, old_fd, new_fd)
            if entry.path in seen:
                raise _Bad(f"{MANIFEST}: {os.path.relpath(entry.path, root)} is listed twice")
            seen.add(entry.path)
            journal.entries.append(entry)
    finally:
        os.close(old_fd)
        os.close(new_fd)
    journal.steps = _steps(fd, len(journal.entries))
    return journal


def _within_budget(old_fd: int, new_fd: int, count: int) -> None:
    """Every blob is bounded when it is read; here their sum is, before any is read."""
    total = 0
    for directory in (old_fd, new_fd):
        for index in range(count):
            try:
                total += os.lstat(str(index), dir_fd=directory).st_size
            except OSError:
                continue  # a missing blob is reported with its entry
            if total > JOURNAL_LIMIT:
                raise _Bad(f"its blobs hold more than {JOURNAL_LIMIT} bytes in all")


def _entry(root: Path, index: int, item: object, old_fd: int, new_fd: int) -> Entry:
    where = f"{MANIFEST} entry {index}"
    if not isinstance(item, dict) or set(item) != _ENTRY_KEYS:
        raise _Bad(f"{where} does not have the fields migrate writes")
    path = inside_tree(root, _field(item, "path", str, where))
    group = _field(item, "group", str, where)
    if "\0" in group or len(group) > 4096:
        raise _Bad(f"{where}: 'group' is not a group name")
    created = item["old"] is None
    if created != (item["old_sha256"] is None) or created != (item["mode"] is None):
        raise _Bad(f"{where}: 'old', 'old_sha256' and 'mode' disagree")
    if _field(item, "new", str, where) != blob_name("new", index):
        raise _Bad(f"{where}: 'new' is not {blob_name('new', index)!r}")
    new = _blob(new_fd, index, _field(item, "new_sha256", str, where), where)
    if created:
        return Entry(path, group, None, new)
    if _field(item, "old", str, where) != blob_name("old", index):
        raise _Bad(f"{where}: 'old' is not {blob_name('old', index)!r}")
    old = _blob(old_fd, index, _field(item, "old_sha256", str, where), where)
    mode = _field(item, "mode", int, where)
    if not valid_mode(mode):
        raise _Bad(
            f"{where}: mode {_kind(mode)} is not a file's permission bits as migrate records "
            "them (0o400 to 0o777, no setuid, setgid or sticky bit)"
        )
    return Entry(path, group, old, new, mode)


def valid_mode(mode: int) -> bool:
    """A mode ``migrate`` records: permission bits only, readable by the owner."""
    return 0 <= mode <= 0o777 and bool(mode & stat.S_IRUSR)


def inside_tree(root: Path, relative: str) -> Path:
    """``root / relative`` when it names a path inside ``root`` with no symbolic link on
    the way (links resolved, as the kernel would); :class:`ValueError` otherwise."""
    if "\0" in relative or not relative or len(relative) > 4096:
        raise _Bad(f"{_kind(relative)} is not a file name")
    if os.path.isabs(relative):
        raise _Bad(f"{_kind(relative)} is an absolute path")
    lexical = Path(os.path.normpath(root / relative))
    real = Path(os.path.realpath(lexical))
    if root not in real.parents:
        raise _Bad(f"{_kind(relative)} leads outside {root} (to {real})")
    if real != lexical:
        raise _Bad(f"{_kind(relative)} goes through a symbolic link (to {real})")
    return lexical


def _blob(dir_fd: int, index: int, expected: str, where: str) -> bytes:
    if not _HEX64.fullmatch(expected):
        raise _Bad(f"{where}: a hash is not a sha256")
    data = _read_in(dir_fd, str(index), BLOB_LIMIT)
    assert data is not None
    if digest(data) != expected:
        raise _Bad(f"{where}: blob {index} does not match its hash")
    return data


def _steps(dir_fd: int, count: int) -> dict[int, str]:
    raw = _read_in(dir_fd, PROGRESS, PROGRESS_LIMIT, missing_ok=True)
    if raw is None:
        return {}
    steps: dict[int, str] = {}
    for line in raw.decode("ascii", "replace").splitlines():  # a last line cut short is ignored
        verb, _, index = line.partition(" ")
        if verb in STEPS and index.isdigit() and len(index) < 10 and int(index) < count:
            steps[int(index)] = verb
    return steps


#: ``step`` when the run's steps are not known (any write may have been under way).
UNKNOWN = "unknown"


def state_of(entry: Entry, step: str | None = UNKNOWN, limit: int = DEFAULT_MAX_FILE_SIZE) -> State:
    """Where ``entry``'s file stands now; ``step``: the last step the run recorded for it."""
    try:
        current: bytes | None = read_source(
            entry.path, max(limit, len(entry.new) * 2 + 1), follow=False
        )
    except ReadError:
        if os.path.lexists(entry.path):
            return "changed"
        current = None
    return classify(entry, current, step)


def classify(entry: Entry, current: bytes | None, step: str | None = UNKNOWN) -> State:
    """Where a file holding ``current`` stands (None: the file does not exist).

    ``partial`` only while the run was writing the file (``step`` ``start`` or ``undo``):
    a file it had not started, or had finished, cannot hold a write of its cut short."""
    if current is None:
        return "old" if entry.old is None else "changed"
    if current == entry.new:
        return "new"
    if entry.old is not None and current == entry.old:
        return "old"
    if step not in ("start", "undo", UNKNOWN):
        return "changed"
    old = entry.old or b""
    if _torn(current, entry.new, old) or (entry.old is not None and _torn(current, old, entry.new)):
        return "partial"
    return "changed"


def _torn(current: bytes, written: bytes, under: bytes) -> bool:
    """True when ``current`` is ``written`` cut short over ``under``: a write of
    ``written`` in place of ``under`` (at offset 0, truncating last) that stopped midway."""
    common = _common_prefix(current, written)
    return current == written[:common] + under[common:]


def _common_prefix(a: bytes, b: bytes) -> int:
    size = min(len(a), len(b))
    if a[:size] == b[:size]:
        return size
    low, high = 0, size
    while low < high:  # the longest common prefix, by halving
        middle = (low + high + 1) // 2
        if a[:middle] == b[:middle]:
            low = middle
        else:
            high = middle - 1
    return low


@dataclass(frozen=True)
class GroupState:
    group: str
    states: dict[Path, State]
    #: Files the transaction creates (their "old" state is: absent).
    created: frozenset[Path] = frozenset()

    @property
    def mixed(self) -> bool:
        values = set(self.states.values())
        return values not in ({"old"}, {"new"})

    def describe(self, shown: Path) -> str:
        """``worker.py is new, model_runner.py is old`` (paths relative to ``shown``)."""
        words = {"old": "old", "new": "new", "partial": "partly written", "changed": "edited since"}
        return ", ".join(
            f"{os.path.relpath(path, shown)} "
            + (
                "is not created yet"
                if state == "old" and path in self.created
                else f"is {words[state]}"
            )
            for path, state in self.states.items()
        )


Decision = Literal["back", "forward", "person"]


def state(journal: Journal, index: int) -> State:
    """The state of the journal's ``index``-th file, knowing the run's steps."""
    return state_of(journal.entries[index], journal.steps.get(index))


def _base(journal: Journal, index: int) -> Literal["old", "new"] | None:
    """What an edited file was edited from: ``old`` when the run had not written it
    (or had put it back), ``new`` when it had finished writing it; for a file it was
    writing, what the file still starts with (an edit appended after the crash), if
    either."""
    step = journal.steps.get(index)
    if step in (None, "undone"):
        return "old"
    if step == "done":
        return "new"
    entry = journal.entries[index]
    try:
        limit = max(DEFAULT_MAX_FILE_SIZE, len(entry.new) * 2 + 1)
        current = read_source(entry.path, limit, follow=False)
    except ReadError:
        return None
    if current.startswith(entry.new):
        return "new"
    if entry.old is not None and current.startswith(entry.old):
        return "old"
    return None


def decide(journal: Journal, group: str) -> tuple[Decision, str]:
    """How to recover one group, and why when a person must decide.

    ``back`` (put every file's old contents back) unless a file was edited after the
    crash: then ``back`` still when every edited file was edited from its old contents
    (see :func:`_base`), ``forward`` (write the new contents into the files that do
    not hold them yet) when every edited file was edited from its new contents, and
    ``person`` otherwise (an edit of a file cut short, or edits of both kinds)."""
    indices = [i for i, entry in enumerate(journal.entries) if entry.group == group]
    edited = [i for i in indices if state(journal, i) == "changed"]
    if not edited:
        return "back", ""
    bases = {_base(journal, i) for i in edited}
    if bases == {"old"}:
        return "back", ""
    if bases == {"new"}:
        return "forward", ""
    shown = ", ".join(_shown(journal.entries[i].path) for i in edited)
    return "person", f"{shown} changed since, while or after the run wrote it"


def groups(journal: Journal) -> list[GroupState]:
    """Every group of the journal with its files' states."""
    by_group: dict[str, dict[Path, State]] = {}
    created = frozenset(entry.path for entry in journal.entries if entry.old is None)
    for index, entry in enumerate(journal.entries):
        by_group.setdefault(entry.group, {})[entry.path] = state(journal, index)
    return [GroupState(name, states, created) for name, states in by_group.items()]


def find(paths: Iterable[str | os.PathLike[str]], met: Iterable[Path] = ()) -> list[Path]:
    """Journal directories that concern ``paths``: in each path (a directory), in the
    directories above it, and ``met`` (found while walking below them).

    A ``.runnercheck-migrate`` that is a symbolic link is listed too (under its own
    name, never its target), so that :func:`load` reports it."""
    found: dict[Path, None] = {}
    for raw in paths:
        start = Path(os.path.realpath(raw))
        here = start if start.is_dir() else start.parent
        for directory in (here, *here.parents):
            candidate = journal_dir(directory)
            try:
                info = os.lstat(candidate)
            except OSError:
                continue
            if stat.S_ISDIR(info.st_mode) or stat.S_ISLNK(info.st_mode):
                found[candidate] = None
    for directory in met:  # met before the tree lock was taken: it may be gone since
        if os.path.lexists(directory):
            found[Path(os.path.realpath(directory.parent)) / directory.name] = None
    return list(found)


def _shown(path: Path) -> str:
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


@dataclass(frozen=True)
class Pending:
    """What a journal left: a half-applied group, or a note that nothing is."""

    #: The first file of the group that was written (or the journal directory).
    path: Path
    message: str
    #: False: a note (nothing is half-applied).
    half_applied: bool = True
    #: The files of the group (whose own findings of a mixed group this one covers).
    files: tuple[Path, ...] = ()


def pending(paths: Iterable[str | os.PathLike[str]], met: Iterable[Path] = ()) -> list[Pending]:
    """Every half-applied group (and stale journal) concerning ``paths``; reads only."""
    out: list[Pending] = []
    for directory in find(paths, met):
        try:
            found = load(directory)
        except JournalError as exc:
            out.append(Pending(directory, exc.why))
            continue
        when = (
            "a `runnercheck migrate` is writing it now"
            if locked(found.root)
            else f"left by an interrupted `runnercheck migrate`, pid {found.pid}, "
            f"at {found.started}"
        )
        states = groups(found)
        for group in states:
            if group.mixed:
                first = next(p for p, s in group.states.items() if s != "old")
                message = (
                    f"half-applied migration of {group.group}: {group.describe(found.root)} "
                    f"({when}); `runnercheck migrate --recover {_shown(found.root)}` puts the "
                    "old contents back"
                )
                out.append(Pending(first, message, files=tuple(group.states)))
        if not any(group.mixed for group in states):
            message = (
                f"journal {when.removeprefix('left ')}; no group is half-applied; "
                "the next `runnercheck migrate` removes it"
            )
            out.append(Pending(directory, message, half_applied=False))
    return out
