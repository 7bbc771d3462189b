"""The cyclic garbage collector during a ``check`` or ``migrate`` run.

A run's sources, facts and syntax trees are many small objects that live to its end;
each full collection would walk them all again for nothing, and what a run leaves as
cyclic garbage is little. So the collector runs far less often while a run lasts."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: ``gc.set_threshold``'s arguments while a run lasts
THRESHOLD = (100_000, 50, 100)


def rest() -> None:
    """Collect seldom from now on, in a process that does nothing but the run."""
    gc.set_threshold(*THRESHOLD)


@contextlib.contextmanager
def at_rest() -> Iterator[None]:
    """Collect seldom for the ``with`` block, then as before."""
    threshold = gc.get_threshold()
    rest()
    try:
        yield
    finally:
        gc.set_threshold(*threshold)
