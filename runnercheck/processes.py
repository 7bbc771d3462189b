"""Ending every process a command started, however it left.

A :class:`Sweep` makes this process the *child subreaper* of everything started below it
(Linux ``prctl(PR_SET_CHILD_SUBREAPER)``): a process whose parent exits, such as a
daemon that double-forked or one that left its process group and session with
``setsid``, is re-parented here instead of to init, so it stays a descendant. When the
work is done, :meth:`Sweep.end` walks ``/proc`` for every descendant that did not exist
when the sweep began (a pid together with its start time, so a reused pid is never
taken for another), asks each to stop (SIGTERM), kills what is left after a grace
period (SIGKILL), reaps the ones that were re-parented here, and returns those that
could not be ended, with their pid and name.

Without ``/proc`` (not Linux) a sweep finds nothing and ends nothing.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterable
from dataclasses import dataclass

#: ``prctl`` options (linux/prctl.h).
_PR_SET_CHILD_SUBREAPER = 36
_PR_GET_CHILD_SUBREAPER = 37
#: Seconds between two looks at processes that were told to stop.
_POLL = 0.02


@dataclass(frozen=True)
class Survivor:
    """A process that could not be ended."""

    pid: int
    name: str

    def describe(self) -> str:
        return f"{self.pid} ({self.name})" if self.name else str(self.pid)


def _stat(pid: int) -> tuple[str, int, str, int] | None:
    """(name, parent pid, state letter, start time) of ``pid``, None when it is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as handle:
            raw = handle.read()
    except OSError:
        return None
    head, _, tail = raw.rpartition(b")")
    fields = tail.split()
    try:
        name = head.partition(b"(")[2].decode(errors="replace")
        return name, int(fields[1]), fields[0].decode(), int(fields[19])
    except (IndexError, ValueError):
        return None


def _table() -> dict[int, tuple[str, int, str, int]]:
    try:
        entries = os.listdir("/proc")
    except OSError:
        return {}
    table = {}
    for entry in entries:
        if entry.isdigit():
            stat = _stat(int(entry))
            if stat is not None:
                table[int(entry)] = stat
    return table


def descendants(root: int) -> dict[int, tuple[str, int, str, int]]:
    """Every process below ``root`` (pid -> name, parent, state, start time)."""
    table = _table()
    children: dict[int, list[int]] = {}
    for pid, (_, parent, _, _) in table.items():
        children.setdefault(parent, []).append(pid)
    found: dict[int, tuple[str, int, str, int]] = {}
    stack = [root]
    while stack:
        for child in children.get(stack.pop(), []):
            if child not in found:
                found[child] = table[child]
                stack.append(child)
    return found


def _prctl(option: int, value: int = 0) -> int | None:
    try:
        import ctypes

        libc = ctypes.CDLL(None, use_errno=True)
        if option == _PR_GET_CHILD_SUBREAPER:
            out = ctypes.c_int(0)
            if libc.prctl(option, ctypes.byref(out), 0, 0, 0) != 0:
                return None
            return out.value
        return 0 if libc.prctl(option, value, 0, 0, 0) == 0 else None
    except (OSError, AttributeError):
        return None


class Sweep:
    """Everything started below this process from now on, found and ended::

    sweep = Sweep()
    try:
        ...  # start processes
    finally:
        survivors = sweep.end()
    """

    def __init__(self, spare: Iterable[int] = ()) -> None:
        self._pid = os.getpid()
        self._before = {(pid, stat[3]) for pid, stat in descendants(self._pid).items()}
        self._spare = set(spare)
        self._previous = _prctl(_PR_GET_CHILD_SUBREAPER)
        if self._previous is not None:
            _prctl(_PR_SET_CHILD_SUBREAPER, 1)

    def spare(self, pids: Iterable[int]) -> None:
        """Never end these (processes this one keeps using, e.g. a fork server); what
        they start is ended all the same."""
        self._spare.update(pids)

    def started(self) -> dict[int, tuple[str, int, str, int]]:
        """The processes below this one that the sweep did not find when it began."""
        return {
            pid: stat
            for pid, stat in descendants(self._pid).items()
            if (pid, stat[3]) not in self._before and pid not in self._spare
        }

    def end(self, grace: float = 2.0) -> list[Survivor]:
        """SIGTERM to every process started since, SIGKILL after ``grace`` seconds to what
        is left (and to whatever those started meanwhile), reap the ones re-parented
        here; the ones still running after that. Ends being the subreaper."""
        try:
            return self._end(grace)
        finally:
            self.close()

    def close(self) -> None:
        """Stop being the subreaper (unless this process was one before the sweep)."""
        if self._previous == 0:
            _prctl(_PR_SET_CHILD_SUBREAPER, 0)
            self._previous = None

    def _end(self, grace: float) -> list[Survivor]:
        living = self.living()
        if not living:
            return []
        self._signal(living, signal.SIGTERM)
        living = self._wait(grace)
        for _ in range(5):  # a process may fork while it is being killed
            if not living:
                return []
            self._signal(living, signal.SIGKILL)
            living = self._wait(2.0)
        return [Survivor(pid, stat[0]) for pid, stat in sorted(living.items())]

    def living(self) -> dict[int, tuple[str, int, str, int]]:
        """Started processes that still run (zombies re-parented here are reaped)."""
        living = {}
        for pid, stat in self.started().items():
            if stat[2] in ("Z", "X"):
                if stat[1] == self._pid:
                    try:
                        os.waitpid(pid, os.WNOHANG)
                    except ChildProcessError:
                        pass
                continue
            living[pid] = stat
        return living

    def _wait(self, seconds: float) -> dict[int, tuple[str, int, str, int]]:
        end = time.monotonic() + seconds
        while True:
            living = self.living()
            if not living or time.monotonic() > end:
                return living
            time.sleep(_POLL)

    @staticmethod
    def _signal(processes: dict[int, tuple[str, int, str, int]], signum: int) -> None:
        for pid, stat in processes.items():
            current = _stat(pid)
            if current is None or current[3] != stat[3]:
                continue  # gone, or the pid now names another process
            try:
                os.kill(pid, signum)
            except OSError:
                pass
