"""``python -m runnercheck``: the command line, and a clean stop on Ctrl-C.

An interrupted run must not end in an abort. The analysis runs in a daemon thread
with a large stack (:mod:`runnercheck.deep`) that may be inside native code (LibCST's
parser) when Ctrl-C arrives; finalizing the interpreter under it ends that thread with
``pthread_exit``, which aborts the process (SIGABRT) as it unwinds through the native
frames. So the first Ctrl-C stops the run and later ones are ignored (one arriving
while the first is being reported would escape as a traceback), and a run stopped
while such a thread is still working runs the exit handlers and ends the process at
once, without finalizing under it. Commands that handle SIGINT themselves (``trace``,
``migrate``'s writes) install their own handlers meanwhile.
"""

import atexit
import os
import signal
import sys
import threading
from types import FrameType

from runnercheck.cli import main
from runnercheck.errors import EXIT_INTERRUPTED


def _interrupt(signum: int, frame: FrameType | None) -> None:
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    raise KeyboardInterrupt


def _analysis_running() -> bool:
    return any(
        thread.daemon and thread.is_alive() and thread.name == "runnercheck-analysis"
        for thread in threading.enumerate()
    )


def _stop(code: int) -> None:
    if code == EXIT_INTERRUPTED and _analysis_running():
        atexit._run_exitfuncs()
        for stream in (sys.stdout, sys.stderr):
            try:
                stream.flush()
            except (OSError, ValueError):
                pass
        os._exit(code)
    raise SystemExit(code)


if signal.getsignal(signal.SIGINT) is signal.default_int_handler:
    signal.signal(signal.SIGINT, _interrupt)
try:
    status = main()
except KeyboardInterrupt:  # raised while the first Ctrl-C was being reported
    status = EXIT_INTERRUPTED
_stop(status)
