"""The advisory lock ``migrate`` takes on the tree it writes.

An ``flock`` on the tree's root directory itself (no lock file is left behind),
exclusive for the tree a run writes and shared on every directory above it, taken
from the top down: two runs on nested trees exclude each other, runs on sibling trees
do not, and a run never waits on itself (a lock the process already holds on the same
tree is not taken again).

``migrate`` holds the exclusive lock from before it reads the tree until it has
written it, so a second run never plans from files the first one is writing: it waits
(bounded) and then reads the finished tree, or says that the tree is held. ``check``
and ``migrate --check`` read under the shared lock (:func:`reading`), which waits for a
run writing the tree (or a tree around it) to finish; :func:`locked` tells a migration
being written from an interrupted one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from collections.abc import Iterable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from pathlib import Path

from runnercheck.errors import RunnerCheckError


def tree_root(roots: Sequence[Path]) -> Path:
    """The directory holding every given path: where the journal and the lock live."""
    directories = [str(r if r.is_dir() else r.parent) for r in roots]
    return Path(os.path.commonpath(directories))


class LockBusy(RunnerCheckError):
    """Another run holds the tree lock."""


#: Locks this process holds: resolved root -> (exclusive, how many holders).
_held: dict[Path, tuple[bool, int]] = {}


class TreeLock:
    """``flock`` on ``root`` (exclusive, or shared with ``shared``) and on each
    directory above it (shared)."""

    def __init__(
        self, root: Path, timeout: float = 30.0, shared: bool = False, required: bool = True
    ) -> None:
        self.root = Path(os.path.realpath(root))
        self.timeout = timeout
        self.shared = shared
        #: False: a root that cannot be opened is not locked (nothing can be read there)
        self.required = required
        self._fds: list[int] = []
        self._counted = False

    def _covered(self) -> bool:
        """True when this process already holds this tree's lock (exclusive, or shared
        and a shared one is wanted)."""
        exclusive, count = _held.get(self.root, (False, 0))
        return count > 0 and (exclusive or self.shared)

    def acquire(self) -> TreeLock:
        """Wait up to ``timeout`` seconds; :class:`LockBusy` when another run holds it."""
        if self._fds or self._counted:
            return self
        if self._covered():
            return self
        chain = [self.root, *self.root.parents]
        deadline = time.monotonic() + self.timeout
        try:
            for index, directory in enumerate(reversed(chain)):
                own = index == len(chain) - 1
                fd = _open_dir(directory, required=own and not self.shared and self.required)
                if fd is None:
                    continue
                self._fds.append(fd)
                how = fcntl.LOCK_EX if own and not self.shared else fcntl.LOCK_SH
                _flock(fd, how, deadline, directory)
        except BaseException:
            self.release()
            raise
        exclusive, count = _held.get(self.root, (False, 0))
        _held[self.root] = (exclusive or not self.shared, count + 1)
        self._counted = True
        return self

    def release(self) -> None:
        if self._counted:
            exclusive, count = _held.pop(self.root, (False, 1))
            if count > 1:
                _held[self.root] = (exclusive, count - 1)
            self._counted = False
        while self._fds:
            os.close(self._fds.pop())  # closing drops the lock

    def __enter__(self) -> TreeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


@contextmanager
def reading(paths: Iterable[str | os.PathLike[str]], timeout: float = 30.0) -> Iterator[None]:
    """Hold the shared lock of every tree ``paths`` name (a directory, or a file's
    directory) while they are read: a ``migrate`` writing one of them (or a tree
    around it) is waited for, up to ``timeout`` seconds (then :class:`LockBusy`)."""
    roots: dict[Path, None] = {}
    for raw in paths:
        real = Path(os.path.realpath(raw))
        roots[real if real.is_dir() else real.parent] = None
    with ExitStack() as stack:
        for root in roots:
            stack.enter_context(TreeLock(root, timeout, shared=True))
        yield


def _open_dir(directory: Path, required: bool) -> int | None:
    try:
        return os.open(directory, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
    except OSError as exc:
        if required:
            raise RunnerCheckError(
                f"{directory}: cannot lock the tree: {exc.strerror or exc}"
            ) from None
        return None  # a directory above that we may not open: other runs cannot lock it either


def _flock(fd: int, how: int, deadline: float, directory: Path) -> None:
    while True:
        try:
            fcntl.flock(fd, how | fcntl.LOCK_NB)
            return
        except OSError as exc:
            if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES):
                return  # a file system without flock: no lock, as before
        if time.monotonic() >= deadline:
            raise LockBusy(
                f"{directory}: another `runnercheck migrate` is writing this tree; "
                "try again when it has finished"
            )
        time.sleep(0.05)


def locked(root: Path) -> bool:
    """True when a run holds ``root``'s tree lock now (it is writing)."""
    fd = _open_dir(root, required=False)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
        return False
    except OSError as exc:
        return exc.errno in (errno.EWOULDBLOCK, errno.EAGAIN, errno.EACCES)
    finally:
        os.close(fd)
