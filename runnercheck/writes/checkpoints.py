"""Named points of a migration's writes: where signals take effect, and where tests and
soak runs interrupt or pause a run.

``RUNNERCHECK_FAULT=kill:N`` kills the process with SIGKILL at the N-th checkpoint it
reaches (counting from 1 over the whole process); ``RUNNERCHECK_FAULT=pause:NAME:SECONDS``
sleeps at each checkpoint called NAME (``verified``: a file was re-read, found as
planned, and is about to be written). :data:`hook`, when set, is called with each
checkpoint's name.

SIGINT, SIGTERM and SIGHUP that arrive during a transaction only set a flag (see
:func:`deferred_signals`); the writer stops at its next safe point, between two files,
so a signal never leaves a file half-written. SIGXFSZ is ignored meanwhile: a write
past the file size limit fails with ``EFBIG`` and its group is put back.
"""

from __future__ import annotations

import os
import signal
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

#: Called with each checkpoint's name.
hook: Callable[[str], None] | None = None
_count = 0
_interrupted = 0


def checkpoint(name: str) -> None:
    global _count
    _count += 1
    if hook is not None:
        hook(name)
    fault = os.environ.get("RUNNERCHECK_FAULT", "")
    if fault.startswith("kill:") and fault[5:].isdigit() and int(fault[5:]) == _count:
        os.kill(os.getpid(), signal.SIGKILL)
    elif fault.startswith("pause:"):
        wanted, _, seconds = fault[6:].partition(":")
        if wanted == name:
            try:
                time.sleep(float(seconds or 0))
            except ValueError:
                pass


def stop_if_interrupted() -> None:
    """KeyboardInterrupt when a deferred signal arrived (call between two files)."""
    if _interrupted:
        raise KeyboardInterrupt


@contextmanager
def deferred_signals() -> Iterator[None]:
    """SIGINT, SIGTERM and SIGHUP set a flag for :func:`stop_if_interrupted`; SIGIO (a
    program opening a file this run holds a lease on) is ignored, the write finishes
    first. Only in the main thread (elsewhere signals stay as they are)."""
    global _interrupted
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    wanted = [signal.SIGINT, signal.SIGTERM, signal.SIGHUP, signal.SIGIO]
    previous = {sig: signal.getsignal(sig) for sig in [*wanted, signal.SIGXFSZ]}

    def note(signum: int, frame: Any) -> None:
        global _interrupted
        if signum != signal.SIGIO:
            _interrupted = signum

    for sig in wanted:
        signal.signal(sig, note)
    # a write past the file size limit (ulimit -f) fails with EFBIG and is rolled back,
    # instead of the signal killing the run between two bytes of a file
    signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _interrupted = 0
