"""How many processes a run uses: ``-j N`` capped by the work and by the cores.

``check -j 1000`` on 240 files and 2 cores starts 2 processes, not 1,000: more
processes than cores only compete for them, and more than there are pieces of work
only start and stop again."""

from __future__ import annotations

import os

from runnercheck.errors import UsageError


def cores() -> int:
    """The cores this process may run on (its CPU affinity where the OS tells it)."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):
        return max(1, os.cpu_count() or 1)


def requested(value: int) -> int:
    """A ``-j`` value as given: 0 (one per core) or more; :class:`UsageError` otherwise."""
    if value < 0:
        raise UsageError(f"-j/--jobs must be 0 or more, not {value}")
    return value or cores()


def worker_count(jobs: int, work: int) -> int:
    """Processes for ``work`` pieces of work when ``jobs`` were asked for (0: one per
    core): at least 1, at most the cores and the work."""
    wanted = jobs if jobs > 0 else cores()
    return max(1, min(wanted, cores(), work))
