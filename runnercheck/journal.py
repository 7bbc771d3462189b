"""``migrate``'s journal and tree lock: what ``check`` and ``migrate`` both read.

``runnercheck migrate`` writes a change set as one transaction (see
:mod:`codemods.transaction`). Before it touches a file it writes a journal into the
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

The tree lock is in :mod:`runnercheck.treelock`.
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from runnercheck.errors import RunnerCheckError
from runnercheck.files import DEFAULT_MAX_FILE_SIZE, JOURNAL_NAME, ReadError, read_source
from runnercheck.treelock import locked

FORMAT = "runnercheck-migrate-journal"
VERSION = 1
MANIFEST = "manifest.json"
#: One line per step of the run, appended as it goes (see :attr:`Journal.steps`).
PROGRESS = "progress"
STEPS = ("start", "done", "undo", "undone")

State = Literal["old", "new", "partial", "changed"]


class JournalError(RunnerCheckError):
    """A journal that cannot be read or does not match its manifest."""


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


def load(directory: Path) -> Journal:
    """The journal in ``directory``; :class:`JournalError` naming what is wrong."""
    root = directory.parent
    try:
        data = json.loads(read_source(directory / MANIFEST, DEFAULT_MAX_FILE_SIZE))
        if data.get("format") != FORMAT or data.get("version") != VERSION:
            raise ValueError("not a journal of this version")
        journal = Journal(root, directory, pid=int(data["pid"]), started=str(data["started"]))
        for item in data["entries"]:
            path = Path(os.path.normpath(root / item["path"]))
            if root not in path.parents:
                raise ValueError(f"{item['path']!r} lies outside {root}")
            old = None
            if item["old"] is not None:
                old = _blob(directory, item["old"], item["old_sha256"])
            new = _blob(directory, item["new"], item["new_sha256"])
            mode = item.get("mode")
            journal.entries.append(
                Entry(path, str(item["group"]), old, new, None if mode is None else int(mode))
            )
        journal.steps = _steps(directory, len(journal.entries))
        return journal
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise JournalError(f"{directory}: unreadable migrate journal ({exc})") from None


def _steps(directory: Path, count: int) -> dict[int, str]:
    try:
        text = read_source(directory / PROGRESS, DEFAULT_MAX_FILE_SIZE).decode("ascii", "replace")
    except ReadError:
        return {}
    steps: dict[int, str] = {}
    for line in text.splitlines():  # a last line cut short by a crash is ignored
        verb, _, index = line.partition(" ")
        if verb in STEPS and index.isdigit() and int(index) < count:
            steps[int(index)] = verb
    return steps


def _blob(directory: Path, name: str, expected: str) -> bytes:
    if not isinstance(name, str) or name.split("/")[0] not in ("old", "new") or ".." in name:
        raise ValueError(f"bad blob name {name!r}")
    data = read_source(directory / name, 1 << 40)
    if digest(data) != expected:
        raise ValueError(f"{name} does not match its hash")
    return data


#: ``step`` when the run's steps are not known (any write may have been under way).
UNKNOWN = "unknown"


def state_of(entry: Entry, step: str | None = UNKNOWN, limit: int = DEFAULT_MAX_FILE_SIZE) -> State:
    """Where ``entry``'s file stands now; ``step``: the last step the run recorded for it."""
    try:
        current: bytes | None = read_source(entry.path, max(limit, len(entry.new) * 2 + 1))
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
        current = read_source(entry.path, max(DEFAULT_MAX_FILE_SIZE, len(entry.new) * 2 + 1))
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
    directories above it, and ``met`` (found while walking below them)."""
    found: dict[Path, None] = {}
    for raw in paths:
        start = Path(os.path.realpath(raw))
        here = start if start.is_dir() else start.parent
        for directory in (here, *here.parents):
            candidate = journal_dir(directory)
            try:
                if candidate.is_dir() and not candidate.is_symlink():
                    found[candidate] = None
            except OSError:
                continue
    for directory in met:
        found[Path(os.path.realpath(directory))] = None
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


def pending(paths: Iterable[str | os.PathLike[str]], met: Iterable[Path] = ()) -> list[Pending]:
    """Every half-applied group (and stale journal) concerning ``paths``; reads only."""
    out: list[Pending] = []
    for directory in find(paths, met):
        try:
            found = load(directory)
        except JournalError as exc:
            out.append(Pending(directory, str(exc)))
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
                out.append(Pending(first, message))
        if not any(group.mixed for group in states):
            message = (
                f"journal {when.removeprefix('left ')}; no group is half-applied; "
                "the next `runnercheck migrate` removes it"
            )
            out.append(Pending(directory, message, half_applied=False))
    return out
