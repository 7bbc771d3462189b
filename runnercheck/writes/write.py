"""Replacing one file's contents in place, without losing an edit made meanwhile.

Files are rewritten **in place** (the same inode), not replaced by a renamed
temporary file. That keeps, with no extra work and no privileges, everything the
inode carries: owner, group, permission bits, ACLs and extended attributes; a rename
would give the file the owner of whoever runs ``migrate`` and drop ACLs, and
restoring ownership afterwards needs root. Every path is reached through the tree's
descriptor (:mod:`runnercheck.writes.beneath`), never through a link. A file with
other hard links is not written in place, since its other names may lie outside the
tree: it is refused, or, when the user asks for it, replaced by a new file. What
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
from runnercheck.writes import beneath
from runnercheck.writes.beneath import Linked, Tree, identity

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


def links_refused(path: Path, count: int) -> str:
    return (
        f"{path.name} has {count} hard links: writing it in place would change the other "
        "names of the file too (--replace-hard-links writes it as a new file)"
    )


def replace_contents(
    tree: Tree,
    path: Path,
    accept: Callable[[bytes], bool],
    new: bytes,
    limit: int,
    force: bool = False,
    checkpoint: Callable[[str], None] = lambda name: None,
    replace_links: bool = False,
) -> None:
    """Rewrite ``path`` (below ``tree``) in place with ``new`` if ``accept(current
    contents)``.

    Raises :class:`Conflict` when the contents right before the write are not accepted
    (or the file was replaced meanwhile), :class:`Escaped` when the path leads through
    a link, :class:`Linked` for a file with other hard links (unless
    ``replace_links``: it is then written as a new file, renamed over its name),
    ``OSError`` when it cannot be written. ``limit``: the most bytes the accepted
    contents can have. ``force`` makes a read-only file writable for the write and
    restores its mode after."""
    with tree.parent(path) as (directory, name):
        info, raised = _prepare(directory, name, path, force, replace_links)
        mode = stat.S_IMODE(info.st_mode)
        try:
            fd = os.open(name, _RDWR, dir_fd=directory)
        except BaseException:
            if raised:
                _chmod(directory, name, mode)
            raise
        try:
            opened = os.fstat(fd)
            if identity(opened) != identity(info):
                raise Conflict("was replaced by another file during the migration")
            _rewrite(directory, name, fd, opened, accept, new, limit, checkpoint)
        finally:
            if raised:
                os.fchmod(fd, mode)
            os.close(fd)


def _prepare(
    directory: int, name: str, path: Path, force: bool, replace_links: bool
) -> tuple[os.stat_result, bool]:
    """The file's status before the write, and whether its owner's write bit was added
    for it (``force`` on a read-only file); the descriptor used is closed again, so
    that the write can take a lease."""
    try:
        probe = os.open(name, beneath.READ, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Conflict("is no longer a regular file") from None
        raise
    try:
        info = os.fstat(probe)
        if not stat.S_ISREG(info.st_mode):
            raise Conflict("is no longer a regular file")
        if info.st_nlink > 1 and not replace_links:
            raise Linked(links_refused(path, info.st_nlink))
        mode = stat.S_IMODE(info.st_mode)
        raised = force and not writable(mode)
        if raised:
            os.fchmod(probe, mode | stat.S_IWUSR)
        return info, raised
    finally:
        os.close(probe)


def _chmod(directory: int, name: str, mode: int) -> None:
    try:
        fd = os.open(name, beneath.READ, dir_fd=directory)
    except OSError:
        return
    try:
        os.fchmod(fd, mode)
    finally:
        os.close(fd)


_RDWR = os.O_RDWR | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)


def _rewrite(
    directory: int,
    name: str,
    fd: int,
    opened: os.stat_result,
    accept: Callable[[bytes], bool],
    new: bytes,
    limit: int,
    checkpoint: Callable[[str], None],
) -> None:
    """The write itself, on ``fd`` (``name`` in ``directory``), under a lease."""
    leased = _lease(fd)
    try:
        current = _read_all(fd, limit)
        if not accept(current):
            raise Conflict("changed on disk during the migration")
        checkpoint("verified")
        if opened.st_nlink > 1:
            mode = stat.S_IMODE(opened.st_mode)
            opened = beneath.replace_file(directory, name, new, mode, sync=True)
        else:
            _write_all(fd, new)
        checkpoint("written")
        try:
            now = os.stat(name, dir_fd=directory, follow_symlinks=False)
        except OSError:
            now = None
        if now is None or identity(now) != identity(opened):
            raise Conflict("was replaced by another file during the migration")
    finally:
        if leased:
            _unlease(fd)


def create(
    tree: Tree, path: Path, new: bytes, checkpoint: Callable[[str], None] = lambda n: None
) -> None:
    """Create ``path`` (below ``tree``) with ``new``; :class:`Conflict` if it exists."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    with tree.parent(path) as (directory, name):
        try:
            fd = os.open(name, flags, 0o666, dir_fd=directory)
        except FileExistsError:
            raise Conflict("was created by someone else during the migration") from None
    try:
        checkpoint("created")
        _write_all(fd, new)
    finally:
        os.close(fd)


def remove_created(tree: Tree, path: Path, new: bytes) -> bool:
    """Remove a file this run created, if it still holds (a prefix of) ``new``."""
    with tree.parent(path) as (directory, name):
        try:
            fd = os.open(name, beneath.READ, dir_fd=directory)
        except FileNotFoundError:
            return True
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                return False
            raise
        try:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode) or info.st_nlink > 1:
                return False
            current = _read_all(fd, len(new) + 1)
        except Conflict:
            return False
        finally:
            os.close(fd)
        if not new.startswith(current):
            return False
        os.unlink(name, dir_fd=directory)
    return True
