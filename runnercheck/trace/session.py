"""Run something under tracing: a command (:func:`trace_command`) or a block of code that
starts ranks (:class:`TraceSession`), watch it, stop it on a divergence or a hang.

Both give every Python process they start the trace bootstrap (see
:mod:`runnercheck.trace.bootstrap`) and watch the trace files with a
:class:`~runnercheck.trace.monitor.Monitor`. On a divergence the run is stopped at once;
on a hang once ``deadline`` seconds pass without progress; a ``timeout`` bounds the
whole run. Stopping kills the run's processes (a command's whole session; a block's
traced processes) and waits until they are gone. After a command, every process it
started and left running, in its session or escaped from it (``setsid``, a double
fork), is ended too (:class:`~runnercheck.processes.Sweep`); the report names those and
any that could not be ended. A command that stops this process (``kill -STOP $PPID``)
cannot hold it past its deadline or timeout: a
:class:`~runnercheck.processes.Watchdog` ends the run then.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import TracebackType
from typing import Any

from runnercheck.processes import Survivor, Sweep, Watchdog, stopped_past
from runnercheck.trace.bootstrap import ENV_DIR, ENV_OPTIONS, write_sitecustomize
from runnercheck.trace.monitor import Hang, Monitor, alive, belongs_to_run
from runnercheck.trace.recorder import RecorderOptions
from runnercheck.trace.report import TraceReport, build_report

#: Seconds between two reads of the trace files.
POLL = 0.05


@dataclass(frozen=True)
class TraceOptions:
    recorder: RecorderOptions = field(default_factory=RecorderOptions)
    #: Seconds a rank may wait at a collective its peers have not reached.
    deadline: float = 60.0
    #: Seconds the whole run may take (None: no limit).
    timeout: float | None = None
    max_broadcasts_per_step: int | None = None
    #: Keep the trace files here (default: a temporary directory, removed after).
    keep: Path | None = None


class _Run:
    """The shared part: a run directory, its environment and its monitor."""

    def __init__(self, options: TraceOptions) -> None:
        self.options = options
        if options.keep is not None:
            options.keep.mkdir(parents=True, exist_ok=True)
            self.directory = options.keep.resolve()
            self._temporary = False
        else:
            self.directory = Path(tempfile.mkdtemp(prefix="runnercheck-trace-")).resolve()
            self._temporary = True
        self.site = self.directory / "site"
        self.site.mkdir(exist_ok=True)
        write_sitecustomize(self.site)
        self.monitor = Monitor(self.directory, options.deadline)
        self.started = time.monotonic()
        self.stopped: str | None = None
        #: When the reason to stop was found (monotonic seconds).
        self.detected: float | None = None
        self.hang: Hang | None = None

    def environment(self, base: dict[str, str]) -> dict[str, str]:
        env = dict(base)
        path = env.get("PYTHONPATH")
        env["PYTHONPATH"] = str(self.site) + (os.pathsep + path if path else "")
        env[ENV_DIR] = str(self.directory)
        env[ENV_OPTIONS] = self.options.recorder.to_json()
        return env

    def step(self) -> str | None:
        """Read and check once; the reason to stop, if any."""
        monitor = self.monitor
        monitor.poll()
        if monitor.check() is not None:
            return "the ranks diverged"
        hang = monitor.check_hang()
        if hang is not None:
            world = monitor.world_named(hang.world)
            stacks = monitor.stacks(world)
            self.hang = replace(hang, stacks=stacks)
            return f"no progress for {self.options.deadline:g} s (deadline)"
        timeout = self.options.timeout
        if timeout is not None and time.monotonic() - self.started > timeout:
            return f"the run took more than {timeout:g} s (timeout)"
        return None

    def stop(self, reason: str) -> None:
        self.stopped = reason
        self.detected = time.monotonic()

    def kill_traced(self) -> None:
        for pid in self.monitor.pids():
            if alive(pid) and belongs_to_run(pid, self.directory):
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass

    def wait_gone(self, seconds: float = 10.0) -> list[int]:
        """Wait for the traced processes to end; those still alive after ``seconds``."""
        end = time.monotonic() + seconds
        while True:
            left = [pid for pid in self.monitor.pids() if alive(pid)]
            if not left or time.monotonic() > end:
                return left
            time.sleep(0.02)

    def report(self, command: list[str], returncode: int | None) -> TraceReport:
        self.monitor.poll()
        divergence = self.monitor.finish() if self.hang is None else self.monitor.check()
        report = build_report(
            command,
            self.monitor.worlds,
            returncode,
            time.monotonic() - self.started,
            self.options.max_broadcasts_per_step,
        )
        report.divergence = divergence
        report.hang = self.hang
        report.stopped = self.stopped
        if self.detected is not None:
            report.stop_seconds = time.monotonic() - self.detected
        report.pids = self.monitor.pids()
        return report

    def cleanup(self) -> None:
        if self._temporary:
            shutil.rmtree(self.directory, ignore_errors=True)


def trace_command(
    command: list[str], options: TraceOptions | None = None, *, last_resort: bool = False
) -> TraceReport:
    """Run ``command`` (any program: ``python ...``, ``torchrun ...``) with every Python
    process in it traced; its output goes to this process's stdout and stderr.

    Ctrl-C or SIGTERM stops the command (it runs in a session of its own, so nothing
    else would) and then raises :class:`KeyboardInterrupt`. When the command stops this
    process past the deadline or the timeout, a watchdog process ends the run, and the
    report says so; with ``last_resort`` (the command line's own process), it kills this
    process too if that does not end the run (see :class:`Watchdog`)."""
    options = options if options is not None else TraceOptions()
    run = _Run(options)
    interrupted = threading.Event()
    previous = _catch_interrupts(interrupted)
    watchdog = Watchdog(
        options.deadline, options.timeout, since=run.started, last_resort=last_resort
    )
    sweep = Sweep()  # what the command starts stays below this process, however it leaves
    try:
        process = subprocess.Popen(
            command, env=run.environment(dict(os.environ)), start_new_session=True
        )
        try:
            while process.poll() is None and not interrupted.is_set():
                if watchdog.fired() is not None:
                    break
                reason = run.step()
                if reason is not None:
                    run.stop(reason)
                    break
                time.sleep(POLL)
            overrun = watchdog.overrun()
            if interrupted.is_set():
                run.stop("interrupted")
            elif overrun is not None:  # the watchdog has ended every process of the run
                run.stop(stopped_past(overrun.limit, overrun.seconds, "the command"))
        finally:
            if process.poll() is None or run.stopped is not None:
                _kill_session(process)
                run.kill_traced()
            returncode = process.wait()
            left = run.wait_gone()
            leftovers = sweep.living()
            survivors = sweep.end()
        if interrupted.is_set():
            raise KeyboardInterrupt
        report = run.report(command, returncode)
        report.left_behind = sorted({*left, *(s.pid for s in survivors)})
        report.ended = [
            Survivor(pid, stat[0]).describe()
            for pid, stat in sorted(leftovers.items())
            if pid not in report.left_behind
        ]
        return report
    finally:
        sweep.close()
        watchdog.close()
        for signum, handler in previous.items():
            if handler is not None:
                signal.signal(signum, handler)
        run.cleanup()


def _catch_interrupts(flag: threading.Event) -> dict[int, Any]:
    """In the main thread, let SIGINT and SIGTERM set ``flag`` (checked between polls,
    so the command is always stopped); returns the previous handlers."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def interrupt(signum: int, frame: Any) -> None:
        flag.set()

    return {signum: signal.signal(signum, interrupt) for signum in (signal.SIGINT, signal.SIGTERM)}


def _kill_session(process: subprocess.Popen[bytes]) -> None:
    try:
        os.killpg(process.pid, signal.SIGKILL)
    except OSError:
        pass


class TraceSession:
    """Trace every process a block of code starts (ranks of a launcher, ``torchrun``)::

        with TraceSession(TraceOptions(deadline=20)) as session:
            run_engine("merged", tp=2, steps=8)
        session.report.world().broadcasts_per_step()

    The processes must start inside the block (they read the environment then). A
    watcher thread stops them on a divergence or a hang; the block's own code then sees
    its ranks die. :attr:`report` is set when the block ends, whatever happened in it.
    """

    def __init__(self, options: TraceOptions | None = None) -> None:
        self.options = options if options is not None else TraceOptions()
        self.report: TraceReport | None = None
        self._run: _Run | None = None
        self._saved: dict[str, str | None] = {}
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    @property
    def directory(self) -> Path:
        assert self._run is not None, "the session has not started"
        return self._run.directory

    def __enter__(self) -> TraceSession:
        run = self._run = _Run(self.options)
        env = run.environment({k: v for k in ("PYTHONPATH",) if (v := os.environ.get(k))})
        for key, value in env.items():
            self._saved[key] = os.environ.get(key)
            os.environ[key] = value
        self._thread = threading.Thread(target=self._watch, name="runnercheck-trace", daemon=True)
        self._thread.start()
        return self

    def _watch(self) -> None:
        run = self._run
        assert run is not None
        while not self._stop.wait(POLL):
            reason = run.step()
            if reason is not None:
                run.stop(reason)
                run.kill_traced()
                return

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        run = self._run
        assert run is not None and self._thread is not None
        self._stop.set()
        self._thread.join()
        for key, value in self._saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
        try:
            left = run.wait_gone(2.0)
            if left:
                run.kill_traced()
                left = run.wait_gone()
            report = run.report(["(block)"], None if exc_type is None else 1)
            if exc_type is None:
                report.returncode = 0
            report.left_behind = left
            self.report = report
        finally:
            run.cleanup()
