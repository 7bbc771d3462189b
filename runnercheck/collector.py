"""The cyclic garbage collector during a ``check`` or ``migrate`` run.

A run's sources, facts and syntax trees are many small objects that live to its end;
each full collection would walk them all again for nothing, and what a run leaves as
cyclic garbage is little. So the collector runs far less often while a run lasts.

A young-generation collection walks every object made since the last one that is
still alive: in a run, that is the run's own trees and facts, garbage or not. A
``migrate`` run also holds LibCST trees (more than twice the objects of the same
file's ``ast``) and what its planning and rewriting make of them, and frees them all
when it ends (no reference cycle holds them): it lets ten times as many new objects
pile up between young collections (on vLLM 0.5.0's ``vllm/``, the one walk of 20 ms
in a 0.44 s run becomes one of 8 ms at its end, when the run's objects are gone; on
0.10.0, three walks of 0.07 s in all become one of 0.01 s; the peak memory is the
same)."""

from __future__ import annotations

import contextlib
import gc
from collections.abc import Iterator

#: ``gc.set_threshold``'s arguments while a run lasts
THRESHOLD = (100_000, 50, 100)
#: ... while a run that also holds LibCST trees lasts (``migrate``)
LIBCST_THRESHOLD = (1_000_000, 50, 100)


def rest(threshold: tuple[int, int, int] = THRESHOLD) -> None:
    """Collect seldom from now on, in a process that does nothing but the run."""
    gc.set_threshold(*threshold)


@contextlib.contextmanager
def at_rest(threshold: tuple[int, int, int] = THRESHOLD) -> Iterator[None]:
    """Collect seldom for the ``with`` block, then as before."""
    saved = gc.get_threshold()
    rest(threshold)
    try:
        yield
    finally:
        gc.set_threshold(*saved)
