"""The advisory lock ``migrate`` takes on the tree it writes.

An ``flock`` on the tree's root directory itself (no lock file is left behind),
exclusive for the tree a run writes and shared on every directory above it, taken
from the top down: two runs on nested trees exclude each other, runs on sibling trees
do not, and a run never waits on itself. ``check`` only asks whether a run holds it
(:func:`locked`), to tell a migration being written from an interrupted one.
"""

from __future__ import annotations

import errno
import fcntl
import os
import time
from pathlib import Path

from runnercheck.errors import RunnerCheckError


class LockBusy(RunnerCheckError):
    """Another run holds the tree lock."""


class TreeLock:
    """``flock`` on ``root`` (exclusive) and on each directory above it (shared)."""

    def __init__(self, root: Path, timeout: float = 30.0) -> None:
        self.root = root
        self.timeout = timeout
        self._fds: list[int] = []

    def acquire(self) -> TreeLock:
        """Wait up to ``timeout`` seconds; :class:`LockBusy` when another run holds it."""
        if self._fds:
            return self
        chain = [self.root, *self.root.parents]
        deadline = time.monotonic() + self.timeout
        try:
            for index, directory in enumerate(reversed(chain)):
                exclusive = index == len(chain) - 1
                fd = _open_dir(directory, required=exclusive)
                if fd is None:
                    continue
                self._fds.append(fd)
                _flock(fd, fcntl.LOCK_EX if exclusive else fcntl.LOCK_SH, deadline, directory)
        except BaseException:
            self.release()
            raise
        return self

    def release(self) -> None:
        while self._fds:
            os.close(self._fds.pop())  # closing drops the lock

    def __enter__(self) -> TreeLock:
        return self.acquire()

    def __exit__(self, *exc: object) -> None:
        self.release()


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
