"""Replacing one file's contents in place, without losing an edit made meanwhile.

Files are rewritten **in place** (the same inode), not replaced by a renamed
temporary file. That keeps, with no extra work and no privileges, everything the
inode carries: owner, group, permission bits, ACLs and extended attributes, and every
hard link to it; a rename would give the file the owner of whoever runs ``migrate``,
drop ACLs and split hard links, and restoring ownership afterwards needs root. What
an in-place write loses is atomicity, and the journal of
:mod:`runnercheck.writes.transaction` gives it back: the old contents are on disk before the
first byte is written, and a write cut short is recognised (a prefix of the new
contents over the old ones) and rolled back by the next run.

Each write re-reads the file on the open descriptor and compares it with the
contents the plan was made from, right before writing. While it compares and writes
it holds a Linux write lease on the file where it can (it owns the file or runs with
CAP_LEASE, the file system supports leases, and nothing else has the file open): a
program that opens the file meanwhile (an editor saving) waits until the write is
done, then sees the new contents, so its edit lands on them instead of being
overwritten. Without a lease the window between the comparison and the write is a
few system calls long. A file replaced by a rename during the write keeps the
replacement (the write went to the old inode) and the group is rolled back.
"""

from __future__ import annotations

import errno
import fcntl
import os
import stat
import threading
import time
from collections.abc import Callable
from pathlib import Path

from runnercheck.errors import RunnerCheckError

F_SETLEASE = getattr(fcntl, "F_SETLEASE", 1024)
#: How long to wait for other programs to close a file before writing without a lease.
LEASE_WAIT = 0.5


class WriteError(RunnerCheckError):
    """A file could not be written (the message names it)."""


class Conflict(Exception):
    """The file is not what the plan was made from (edited, replaced, created)."""


def writable(mode: int) -> bool:
    """False for a read-only file (no write permission bit at all)."""
    return bool(mode & (stat.S_IWUSR | stat.S_IWGRP | stat.S_IWOTH))


def _lease(fd: int) -> bool:
    """Take a write lease on ``fd`` (see the module docstring); False where none can be
    had. Only the main thread takes leases (it handles the lease-break signal)."""
    if threading.current_thread() is not threading.main_thread():
        return False
    deadline = time.monotonic() + LEASE_WAIT
    while True:
        try:
            fcntl.fcntl(fd, F_SETLEASE, fcntl.F_WRLCK)
            return True
        except OSError as exc:
            if exc.errno != errno.EAGAIN or time.monotonic() >= deadline:
                return False  # unsupported, not ours, or kept open elsewhere
        time.sleep(0.01)


def _unlease(fd: int) -> None:
    try:
        fcntl.fcntl(fd, F_SETLEASE, fcntl.F_UNLCK)
    except OSError:
        pass


def _read_all(fd: int, limit: int) -> bytes:
    chunks: list[bytes] = []
    offset = 0
    while True:
        chunk = os.pread(fd, 1 << 20, offset)
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        offset += len(chunk)
        if offset > limit:
            raise Conflict("changed on disk during the migration")


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    offset = 0
    while offset < len(data):
        offset += os.pwrite(fd, view[offset:], offset)
    os.ftruncate(fd, len(data))
    os.fsync(fd)


def replace_contents(
    path: Path,
    accept: Callable[[bytes], bool],
    new: bytes,
    limit: int,
    force: bool = False,
    checkpoint: Callable[[str], None] = lambda name: None,
) -> None:
    """Rewrite ``path`` in place with ``new`` if ``accept(current contents)``.

    Raises :class:`Conflict` when the contents right before the write are not accepted
    (or the file was replaced meanwhile), ``OSError`` when it cannot be written.
    ``limit``: the most bytes the accepted contents can have. ``force`` makes a
    read-only file writable for the write and restores its mode after."""
    flags = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    info = os.lstat(path)
    if not stat.S_ISREG(info.st_mode):
        raise Conflict("is no longer a regular file")
    mode = stat.S_IMODE(info.st_mode)
    raised = force and not writable(mode)
    if raised:
        os.chmod(path, mode | stat.S_IWUSR, follow_symlinks=False)
    try:
        fd = os.open(path, flags)
    except OSError:
        if raised:
            os.chmod(path, mode, follow_symlinks=False)
        raise
    leased = False
    try:
        opened = os.fstat(fd)
        if not stat.S_ISREG(opened.st_mode):
            raise Conflict("is no longer a regular file")
        leased = _lease(fd)
        current = _read_all(fd, limit)
        if not accept(current):
            raise Conflict("changed on disk during the migration")
        checkpoint("verified")
        _write_all(fd, new)
        checkpoint("written")
        try:
            now = os.stat(path, follow_symlinks=False)
        except OSError:
            now = None
        if now is None or (now.st_ino, now.st_dev) != (opened.st_ino, opened.st_dev):
            raise Conflict("was replaced by another file during the migration")
    finally:
        if leased:
            _unlease(fd)
        if raised:
            os.fchmod(fd, mode)
        os.close(fd)


def create(path: Path, new: bytes, checkpoint: Callable[[str], None] = lambda n: None) -> None:
    """Create ``path`` with ``new``; :class:`Conflict` if it exists."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    try:
        fd = os.open(path, flags, 0o666)
    except FileExistsError:
        raise Conflict("was created by someone else during the migration") from None
    try:
        checkpoint("created")
        _write_all(fd, new)
    finally:
        os.close(fd)


def remove_created(path: Path, new: bytes) -> bool:
    """Remove a file this run created, if it still holds (a prefix of) ``new``."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
    except FileNotFoundError:
        return True
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return False
        current = _read_all(fd, len(new) + 1)
    except Conflict:
        return False
    finally:
        os.close(fd)
    if not new.startswith(current):
        return False
    os.unlink(path)
    return True


def fsync_dir(directory: Path) -> None:
    try:
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)
