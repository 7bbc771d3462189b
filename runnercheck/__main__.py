"""``python -m runnercheck``: the command line, and a clean stop on Ctrl-C.

An interrupted run must not end in an abort. The analysis runs in a daemon thread
with a large stack (:mod:`runnercheck.deep`) that may be inside native code (LibCST's
parser) when Ctrl-C arrives; finalizing the interpreter under it ends that thread with
``pthread_exit``, which aborts the process (SIGABRT) as it unwinds through the native
frames. So the first Ctrl-C stops the run and later ones are ignored (one arriving
while the first is being reported would escape as a traceback), and a run stopped
while such a thread is still working runs the exit handlers and ends the process at
once, without finalizing under it. Commands that handle SIGINT themselves (``trace``,
``migrate``'s writes) install their own handlers meanwhile. The ``runnercheck``
console script is :func:`run` here, so it stops the same way.
"""

import signal
from types import FrameType


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupt)  # first of all: before the imports

import atexit  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
import threading  # noqa: E402

EXIT_INTERRUPTED = 130  # runnercheck.errors.EXIT_INTERRUPTED, before any import of ours


def _analysis_running() -> bool:
    """True while the analysis thread has not ended. Not ``is_alive()``: once a
    ``join()`` of the thread was interrupted, CPython 3.11 may report it stopped while
    it still runs; a thread leaves ``enumerate()`` only as it ends."""
    return any(thread.name == "runnercheck-analysis" for thread in threading.enumerate())


def _stop(code: int) -> None:
    from runnercheck.cli import finish

    if code == EXIT_INTERRUPTED and _analysis_running():
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    finish(code)


def _main() -> int:
    try:
        from runnercheck.cli import main

        return main()
    except KeyboardInterrupt:  # while importing, or while the first one was reported
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        print("runnercheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED


def run() -> None:
    """The ``runnercheck`` program (its console script)."""
    _stop(_main())


if __name__ == "__main__":
    run()
