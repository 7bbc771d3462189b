"""Writing, extending and removing ``migrate``'s journal (its format and states are in
:mod:`runnercheck.writes.journal`, which ``check`` reads too).

The journal is built in ``ROOT/.runnercheck-migrate.<pid>.new`` (every file fsynced)
and made visible with one ``rename``; it is removed by a rename to
``.runnercheck-migrate.<pid>.done`` and then deleted. A ``kill -9`` can leave a
``.new`` or ``.done`` directory behind; the next run removes it under the tree lock.
While files are written, :class:`Progress` appends one line per step to the journal's
``progress`` file (``start N``, ``done N``, ``undo N``, ``undone N``), so that recovery
knows which files the run was writing when it stopped.
"""

from __future__ import annotations

import errno
import json
import os
import shutil
import stat
from pathlib import Path

from runnercheck.files import JOURNAL_NAME
from runnercheck.writes import journal as jr
from runnercheck.writes.checkpoints import checkpoint
from runnercheck.writes.write import fsync_dir


def _write_blob(path: Path, data: bytes) -> None:
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_CLOEXEC, 0o600)
    try:
        view = memoryview(data)
        offset = 0
        while offset < len(data):
            offset += os.write(fd, view[offset:])
        os.fsync(fd)
    finally:
        os.close(fd)


def write_journal(tree: Path, entries: list[jr.Entry]) -> Path:
    """Write the journal of ``entries`` into ``tree``; its directory."""
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
        _write_blob(staging / jr.PROGRESS, b"")
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


def retire(directory: Path) -> None:
    """Remove a journal: out of the way with one rename, then its files."""
    done = directory.parent / f"{JOURNAL_NAME}.{os.getpid()}.done"
    shutil.rmtree(done, ignore_errors=True)
    os.rename(directory, done)
    fsync_dir(directory.parent)
    checkpoint("journal-retired")
    shutil.rmtree(done, ignore_errors=True)


def remove_stale(tree: Path) -> None:
    """Staging and retired journals a ``kill -9`` left (call under the tree lock)."""
    try:
        names = os.listdir(tree)
    except OSError:
        return
    for name in names:
        if name.startswith(JOURNAL_NAME + ".") and name.endswith((".new", ".done")):
            shutil.rmtree(tree / name, ignore_errors=True)


class Progress:
    """The journal's step log, appended and fsynced one line at a time."""

    def __init__(self, directory: Path) -> None:
        """Open ``directory``'s log for appending, through no symbolic link (neither the
        journal directory nor the log may be one); ``OSError`` otherwise."""
        flags = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
        dir_fd = os.open(directory, flags)
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
