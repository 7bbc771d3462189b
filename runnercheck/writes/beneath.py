"""Paths below a tree, reached from a descriptor of the tree opened once.

Every write, create, rename and delete of ``migrate``, of its recovery and of the
facts cache goes through a :class:`Tree`: the tree's root is opened once, from ``/``,
one component at a time and never through a symbolic link, and a path below it is
reached the same way from that descriptor (``openat`` with ``O_NOFOLLOW |
O_DIRECTORY`` for each directory). A directory of the path swapped for a link while
the run goes on is therefore never followed: the kernel refuses the link
(:class:`Escaped`), and a directory replaced by another one (a copy moved into its
place) is told by its device and inode, which the tree records the first time it
meets each directory. What the run writes lands inside the tree it was pointed at,
or nowhere.

A regular file with more than one hard link shares its inode with a name the tree
may not hold: writing it in place would change that other file too, so the tree
refuses it (:class:`Linked`), unless the caller replaces it with a new file.
"""

from __future__ import annotations

import errno
import os
import stat
import weakref
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

_CLOEXEC = getattr(os, "O_CLOEXEC", 0)
#: Opening a directory of the path: never a link, always a directory.
DIRECTORY = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | _CLOEXEC
#: Opening a file to read it: never a link, never blocking (a FIFO).
READ = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | _CLOEXEC


class Escaped(Exception):
    """A path of the tree leads out of it: a link on the way, or a directory that is
    no longer the one the run met (the message says which, relative to the tree)."""


class Linked(Escaped):
    """A regular file with other hard links: writing it would write them too."""


def identity(info: os.stat_result) -> tuple[int, int]:
    return (info.st_dev, info.st_ino)


def open_directory(path: Path) -> int:
    """A descriptor of the directory ``path`` (absolute), reached from ``/`` without
    following a link; :class:`Escaped` when a component is a link or not a directory,
    ``OSError`` when one cannot be opened."""
    fd = os.open("/", DIRECTORY)
    for part in Path(os.path.normpath(path)).parts[1:]:
        fd = _step(fd, part, str(path))
    return fd


def _step(fd: int, name: str, shown: str) -> int:
    """Open ``name`` in the directory ``fd`` as a directory; the new descriptor. ``fd``
    is closed either way."""
    try:
        child = os.open(name, DIRECTORY, dir_fd=fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            kind = "a symbolic link" if _is_link(fd, name) else "not a directory"
            raise Escaped(f"{shown}: {name} is {kind}; not followed") from None
        raise
    finally:
        os.close(fd)
    return child


def _is_link(fd: int, name: str) -> bool:
    try:
        return stat.S_ISLNK(os.lstat(name, dir_fd=fd).st_mode)
    except OSError:
        return False


class Tree:
    """A directory opened once, and the paths below it (see the module docstring).

    ``Tree(root)`` opens ``root`` (an absolute path with no link in it); close it with
    :meth:`close` or a ``with`` block (a tree left open is closed when collected)."""

    def __init__(self, root: Path) -> None:
        self.root = Path(os.path.normpath(root))
        self.fd = open_directory(self.root)
        self._close = weakref.finalize(self, os.close, self.fd)
        #: The identity of each directory met, by its path relative to the root.
        self._met: dict[tuple[str, ...], tuple[int, int]] = {(): identity(os.fstat(self.fd))}

    def close(self) -> None:
        self._close()

    def __enter__(self) -> Tree:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def parts(self, path: Path, root_ok: bool = False) -> tuple[str, ...]:
        """``path`` relative to the root, as names (``()`` for the root itself, where
        ``root_ok``); :class:`Escaped` if it is not below the root."""
        relative = os.path.relpath(os.path.normpath(path), self.root)
        parts = () if relative == "." else tuple(Path(relative).parts)
        if ".." in parts or not (parts or root_ok):
            raise Escaped(f"{path}: not inside {self.root}")
        return parts

    @contextmanager
    def directory(self, path: Path) -> Iterator[int]:
        """A descriptor of the directory ``path`` (the root or one below it), reached
        from the root without following a link; every directory on the way is the one
        the tree met first (:class:`Escaped` otherwise)."""
        fd = self._walk(self.parts(path, root_ok=True), path)
        try:
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def parent(self, path: Path) -> Iterator[tuple[int, str]]:
        """``(descriptor of the directory holding path, its last name)``, reached as
        :meth:`directory` reaches a directory."""
        parts = self.parts(path)
        fd = self._walk(parts[:-1], path)
        try:
            yield fd, parts[-1]
        finally:
            os.close(fd)

    def _walk(self, parts: tuple[str, ...], path: Path) -> int:
        fd = os.dup(self.fd)
        for depth, name in enumerate(parts, start=1):
            fd = _step(fd, name, str(path))
            now = identity(os.fstat(fd))
            if self._met.setdefault(parts[:depth], now) != now:
                os.close(fd)
                where = os.path.join(*parts[:depth])
                raise Escaped(f"{where} was replaced by another directory during the run")
        return fd

    def lstat(self, path: Path) -> os.stat_result:
        with self.parent(path) as (fd, name):
            return os.lstat(name, dir_fd=fd)

    def exists(self, path: Path) -> bool:
        try:
            self.lstat(path)
        except FileNotFoundError:
            return False
        return True

    def read(self, path: Path, limit: int) -> bytes:
        """A regular file's contents, at most ``limit`` bytes (``OSError`` EFBIG past it);
        :class:`Escaped` for a link, ``OSError`` for anything else it cannot read."""
        with self.parent(path) as (directory, name):
            fd = open_file(directory, name, READ, str(path))
        try:
            return read_all(fd, limit)
        finally:
            os.close(fd)

    def fsync(self, directory: Path) -> None:
        """Flush ``directory`` (the root, or a directory below it); errors are ignored."""
        try:
            with self.directory(directory) as fd:
                os.fsync(fd)
        except (OSError, Escaped):
            pass


def open_file(directory: int, name: str, flags: int, shown: str, mode: int = 0o666) -> int:
    """Open ``name`` in ``directory`` never through a link (``flags`` must hold
    ``O_NOFOLLOW``); a link is :class:`Escaped`, anything but a regular file ``OSError``
    (EINVAL)."""
    try:
        fd = os.open(name, flags, mode, dir_fd=directory)
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise Escaped(f"{shown} is a symbolic link; not followed") from None
        raise
    kind = os.fstat(fd).st_mode
    if not stat.S_ISREG(kind):
        os.close(fd)
        raise OSError(errno.EINVAL, "not a regular file", shown)
    return fd


def read_all(fd: int, limit: int) -> bytes:
    """Everything ``fd`` holds, at most ``limit`` bytes (``OSError`` EFBIG past it)."""
    chunks: list[bytes] = []
    total = 0
    while True:
        chunk = os.read(fd, min(1 << 20, limit + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > limit:
            raise OSError(errno.EFBIG, f"more than {limit} bytes")


#: The deepest directory :func:`remove_tree` goes into (``migrate`` makes two levels).
REMOVE_DEPTH = 16


def remove_tree(directory: int, name: str, depth: int = 0) -> None:
    """Remove the directory ``name`` of ``directory`` and what it holds, never through
    a link (a link inside is removed as a name; what it points to is left alone).
    ``OSError`` when something cannot be removed, or lies deeper than
    :data:`REMOVE_DEPTH`."""
    if depth > REMOVE_DEPTH:
        raise OSError(errno.ELOOP, "nested too deep to be migrate's", name)
    try:
        fd = os.open(name, DIRECTORY, dir_fd=directory)
    except FileNotFoundError:
        return
    try:
        for entry in os.listdir(fd):
            try:
                info = os.lstat(entry, dir_fd=fd)
            except FileNotFoundError:
                continue
            if stat.S_ISDIR(info.st_mode):
                remove_tree(fd, entry, depth + 1)
            else:
                os.unlink(entry, dir_fd=fd)
    finally:
        os.close(fd)
    os.rmdir(name, dir_fd=directory)


_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | _CLOEXEC


def replace_file(directory: int, name: str, data: bytes, mode: int, sync: bool) -> os.stat_result:
    """Write ``data`` into a new file of ``directory`` and rename it over ``name``, so
    that a reader sees the old file or the whole new one (``sync``: flushed first); the
    new file's status. Never through a link; the other hard links of the old file keep
    its contents."""
    temporary = f".{name}.{os.urandom(6).hex()}.tmp"
    fd = os.open(temporary, _NEW_FILE, 0o600, dir_fd=directory)
    try:
        try:
            os.fchmod(fd, mode)
            view = memoryview(data)
            offset = 0
            while offset < len(data):
                offset += os.write(fd, view[offset:])
            if sync:
                os.fsync(fd)
            made = os.fstat(fd)
        finally:
            os.close(fd)
        os.rename(temporary, name, src_dir_fd=directory, dst_dir_fd=directory)
        return made
    except BaseException:
        try:
            os.unlink(temporary, dir_fd=directory)
        except OSError:
            pass
        raise
