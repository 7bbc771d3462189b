"""Writing, extending and removing ``migrate``'s journal (its format and states are in
:mod:`runnercheck.writes.journal`, which ``check`` reads too).

The journal is built in ``ROOT/.runnercheck-migrate.<pid>.<token>.new`` (every file
fsynced) and made visible with one ``rename``; it is removed by a rename to
``.runnercheck-migrate.<pid>.<token>.done`` and then deleted, every step through the
tree's descriptor (:mod:`runnercheck.writes.beneath`). A ``kill -9`` can leave a
``.new`` or ``.done`` directory behind; the next run removes it under the tree lock. A
name of that shape that is not a directory (a planted link) is left alone and named.
While files are written, :class:`Progress` appends one line per step to the journal's
``progress`` file (``start N``, ``done N``, ``undo N``, ``undone N``), so that recovery
knows which files the run was writing when it stopped.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

from runnercheck.files import JOURNAL_NAME, kind_of
from runnercheck.writes import journal as jr
from runnercheck.writes.beneath import DIRECTORY, Tree, remove_tree
from runnercheck.writes.checkpoints import checkpoint

_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)


def _write_blob(directory: int, name: str, data: bytes) -> None:
    fd = os.open(name, _NEW_FILE, 0o600, dir_fd=directory)
    try:
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.write(fd, view[offset:])
        os.fsync(fd)
    finally:
        os.close(fd)


def _aside(tree: Tree, suffix: str) -> str:
    """A name for a journal on its way in or out: this run's alone (a name planted
    beside the tree's journal is never reused)."""
    while True:
        name = f"{JOURNAL_NAME}.{os.getpid()}.{os.urandom(4).hex()}.{suffix}"
        try:
            os.lstat(name, dir_fd=tree.fd)
        except FileNotFoundError:
            return name


def write_journal(tree: Tree, entries: list[jr.Entry]) -> Path:
    """Write the journal of ``entries`` into ``tree``'s root; its directory."""
    staging = _aside(tree, "new")
    os.mkdir(staging, 0o700, dir_fd=tree.fd)
    try:
        fd = os.open(staging, DIRECTORY, dir_fd=tree.fd)
        try:
            _fill(fd, tree.root, entries)
        finally:
            os.close(fd)
        checkpoint("journal-staged")
        target = jr.journal_dir(tree.root)
        os.rename(staging, target.name, src_dir_fd=tree.fd, dst_dir_fd=tree.fd)
    except BaseException:
        try:
            remove_tree(tree.fd, staging)
        except OSError:
            pass
        raise
    tree.fsync(tree.root)
    checkpoint("journal-written")
    return target


def _fill(fd: int, root: Path, entries: list[jr.Entry]) -> None:
    """The journal's files, in the directory ``fd``, each fsynced."""
    kinds = {}
    for kind in ("old", "new"):
        os.mkdir(kind, 0o700, dir_fd=fd)
        kinds[kind] = os.open(kind, DIRECTORY, dir_fd=fd)
    try:
        for index, entry in enumerate(entries):
            if entry.old is not None:
                _write_blob(kinds["old"], str(index), entry.old)
            _write_blob(kinds["new"], str(index), entry.new)
        _write_blob(fd, jr.PROGRESS, b"")
        _write_blob(fd, jr.MANIFEST, json.dumps(jr.manifest(entries, root), indent=1).encode())
        for kind_fd in kinds.values():
            os.fsync(kind_fd)
        os.fsync(fd)
    finally:
        for kind_fd in kinds.values():
            os.close(kind_fd)


def retire(tree: Tree, directory: Path) -> None:
    """Remove a journal of ``tree``: out of the way with one rename, then its files."""
    done = _aside(tree, "done")
    os.rename(directory.name, done, src_dir_fd=tree.fd, dst_dir_fd=tree.fd)
    tree.fsync(tree.root)
    checkpoint("journal-retired")
    try:
        remove_tree(tree.fd, done)
    except OSError:
        pass  # the next run removes it


#: How many names of planted entries :func:`remove_stale` lists one by one.
NAMED = 3


def remove_stale(tree: Tree) -> list[str]:
    """Remove the staging and retired journals a ``kill -9`` left (call under the tree
    lock). A name of that shape that is not a directory (a link, a file) is left alone
    and named: a line for each of the first :data:`NAMED`, one for the rest."""
    lines: list[str] = []
    try:
        names = os.listdir(tree.fd)
    except OSError:
        return lines
    for name in sorted(names):
        if not (name.startswith(JOURNAL_NAME + ".") and name.endswith((".new", ".done"))):
            continue
        try:
            info = os.lstat(name, dir_fd=tree.fd)
            if stat.S_ISDIR(info.st_mode):
                remove_tree(tree.fd, name)
                continue
            kind = "a symbolic link" if stat.S_ISLNK(info.st_mode) else kind_of(info.st_mode)
            why = f"is {kind}, not a journal migrate left"
        except OSError as exc:
            why = f"cannot be removed ({exc.strerror or exc})"
        lines.append(f"{shown_name(tree, name)} {why}: left alone")
    if len(lines) > NAMED + 1:
        rest = len(lines) - NAMED
        lines[NAMED:] = [f"and {rest} more names like these beside the journal: left alone"]
    return lines


def shown_name(tree: Tree, name: str) -> str:
    relative = os.path.relpath(tree.root / name)
    return str(tree.root / name) if relative.startswith("..") else relative


class Progress:
    """The journal's step log, appended and fsynced one line at a time."""

    def __init__(self, tree: Tree, directory: Path) -> None:
        """Open the log of the journal ``directory`` (in ``tree``'s root) for appending,
        through no symbolic link (neither the journal directory nor the log may be one);
        ``OSError`` otherwise."""
        dir_fd = os.open(directory.name, DIRECTORY, dir_fd=tree.fd)
        try:
            flags = os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW | os.O_NONBLOCK
            fd = os.open(jr.PROGRESS, flags | os.O_CLOEXEC, 0o600, dir_fd=dir_fd)
        finally:
            os.close(dir_fd)
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            os.close(fd)
            raise OSError(errno.EINVAL, f"{jr.PROGRESS} is not a regular file")
        self._fd: int | None = fd

    def record(self, step: str, index: int) -> None:
        if self._fd is None:
            return
        os.write(self._fd, f"{step} {index}\n".encode())
        os.fsync(self._fd)

    def close(self) -> None:
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None
