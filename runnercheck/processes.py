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

A :class:`Watchdog` keeps a command's deadline in a process of its own, which the code
under test has no reason to signal: a stopped process keeps no clock, so code that stops
its parent (``os.kill(os.getppid(), SIGSTOP)``, ``kill -STOP $PPID``) would otherwise
hold ``fuzz`` or ``trace`` past every deadline. When the command's process stays
stopped for its deadline (or past its timeout), the watchdog ends every process the
command started since, continues the command's process and tells it why, so that it
ends with one line. A stop from the terminal (Ctrl-Z: SIGTSTP, SIGTTIN, SIGTTOU) is the
user's and is never ended.
"""

from __future__ import annotations

import os
import select
import signal
import sys
import time
from collections.abc import Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the watchdog's own process imports this module: it stays light
    import subprocess
    from types import FrameType

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


# ------------------------------------------------------------------ the watchdog

#: Seconds between two looks of the watchdog at the command's process.
_WATCH_POLL = 0.05
#: Seconds the watchdog leaves the processes of an ended run frozen, the command's
#: process running, before it kills them.
_SETTLE = 0.5
#: Seconds the watchdog gives the command's process to end once continued, before it
#: kills it (only where it may: the command line's own process).
_LAST_RESORT = 10.0
#: The stops that come from a terminal (job control): the user's, never ended.
_JOB_CONTROL = (signal.SIGTSTP, signal.SIGTTIN, signal.SIGTTOU)


class Overrun(BaseException):
    """Raised in the main thread of the command's process once its :class:`Watchdog`
    has ended the run: the process was stopped past ``limit`` (``"deadline"`` or
    ``"timeout"``) of ``seconds``. A BaseException, like KeyboardInterrupt, so that no
    ``except Exception`` of the code under test takes it."""

    def __init__(self, limit: str, seconds: float) -> None:
        super().__init__(limit, seconds)
        self.limit = limit
        self.seconds = seconds

    def describe(self, culprit: str) -> str:
        return stopped_past(self.limit, self.seconds, culprit)


def stopped_past(limit: str, seconds: float, culprit: str) -> str:
    """What happened, for the one line that says so (``culprit``: who likely did it)."""
    return (
        f"runnercheck's own process was stopped (SIGSTOP; does {culprit} signal its "
        f"parent?) and the {limit} of {seconds:g} s passed"
    )


class Watchdog:
    """This process's deadline, kept by a process of its own::

        watchdog = Watchdog(stall=60.0)
        try:
            ...  # start and watch the code under test
        finally:
            watchdog.close()

    When this process stays stopped for ``stall`` seconds, or is stopped when
    ``timeout`` seconds have passed since ``since`` (a ``time.monotonic()``; default:
    now), the watchdog freezes every process started below this one since it began,
    continues this process, and kills the frozen ones ``_SETTLE`` seconds later (or as
    soon as this process closes it); from then on :meth:`fired` names the limit. With
    ``interrupt``, :class:`Overrun` is also raised in this process's main thread as it
    continues (its waits may be long). With ``last_resort`` (the command line's own
    process), the watchdog kills this process too if it has not closed the watchdog
    ``_LAST_RESORT`` seconds after that.

    Without ``/proc``, or where no process can be started, it watches nothing."""

    def __init__(
        self,
        stall: float,
        timeout: float | None = None,
        *,
        since: float | None = None,
        interrupt: bool = False,
        last_resort: bool = False,
    ) -> None:
        self.stall = stall
        self.timeout = timeout
        until = (
            None if timeout is None else (time.monotonic() if since is None else since) + timeout
        )
        self._owner = os.getpid()
        self._interrupt = interrupt
        self._limit: str | None = None
        self._raised = False
        self._handlers: dict[int, Any] = {}
        self._process: subprocess.Popen[bytes] | None = None
        if not os.path.isdir("/proc"):
            return
        import subprocess
        import threading

        root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        # what runs below this process now is not the run's (taken here: the watchdog
        # may start after the run's first processes)
        before = ",".join(f"{pid}:{stat[3]}" for pid, stat in descendants(self._owner).items())
        command = [
            sys.executable,
            "-I",
            "-S",
            "-c",
            "import sys; sys.path.insert(0, sys.argv[1]); "
            "from runnercheck.processes import watch; watch(sys.argv[2:])",
            root,
            str(self._owner),
            repr(stall),
            "" if until is None else repr(until),
            "1" if last_resort else "",
            before,
        ]
        try:
            self._process = subprocess.Popen(
                command,
                stdin=subprocess.PIPE,
                stdout=subprocess.PIPE,
                start_new_session=True,  # no terminal's signal reaches it
            )
        except OSError:
            return
        assert self._process.stdout is not None
        os.set_blocking(self._process.stdout.fileno(), False)
        if threading.current_thread() is threading.main_thread():
            for signum in _JOB_CONTROL:
                self._handlers[signum] = signal.signal(signum, self._suspend)
            if interrupt:
                self._handlers[signal.SIGCONT] = signal.signal(signal.SIGCONT, self._continued)

    def fired(self) -> str | None:
        """The limit that passed while this process was stopped (``"deadline"`` or
        ``"timeout"``), once the watchdog has ended the run; else None."""
        process = self._process
        if self._limit is None and process is not None and process.stdout is not None:
            try:
                said = os.read(process.stdout.fileno(), 64).decode(errors="replace").split()
            except OSError:  # nothing yet (BlockingIOError), or the pipe is gone
                said = []
            if said:
                self._limit = said[0]
        return self._limit

    def overrun(self) -> Overrun | None:
        """The :class:`Overrun` to report, once the watchdog has ended the run."""
        limit = self.fired()
        if limit is None:
            return None
        seconds = self.timeout if limit == "timeout" and self.timeout is not None else self.stall
        return Overrun(limit, seconds)

    def close(self) -> None:
        """Stop watching: the handlers as they were, the watchdog ended and reaped."""
        if os.getpid() != self._owner:
            return
        self._raised = True  # no Overrun from here on
        for signum, handler in self._handlers.items():
            signal.signal(signum, handler if handler is not None else signal.SIG_DFL)
        self._handlers.clear()
        process, self._process = self._process, None
        if process is None:
            return
        self._tell(process, b"x")
        import subprocess

        try:
            process.wait(timeout=5)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        for pipe in (process.stdin, process.stdout):
            if pipe is not None:
                try:
                    pipe.close()
                except OSError:
                    pass

    def __enter__(self) -> Watchdog:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    @staticmethod
    def _tell(process: subprocess.Popen[bytes] | None, what: bytes) -> None:
        if process is not None and process.stdin is not None:
            try:
                os.write(process.stdin.fileno(), what)
            except (OSError, ValueError):
                pass

    def _suspend(self, signum: int, frame: FrameType | None) -> None:
        """A stop from the terminal: the watchdog is told (it holds no clock meanwhile),
        then this process stops as it would have."""
        mine = os.getpid() == self._owner
        if mine:
            self._tell(self._process, b"s")
        previous = signal.signal(signum, signal.SIG_DFL)
        try:
            os.kill(os.getpid(), signum)  # stopped here, until continued
        finally:
            signal.signal(signum, previous)
            if mine:
                self._tell(self._process, b"r")

    def _continued(self, signum: int, frame: FrameType | None) -> None:
        if os.getpid() != self._owner or self._raised:
            return
        overrun = self.overrun()
        if overrun is not None:
            self._raised = True
            raise overrun


def watch(argv: list[str]) -> None:
    """The watchdog process (started by :class:`Watchdog`): ``OWNER STALL UNTIL
    LAST_RESORT BEFORE`` (BEFORE: ``pid:start,...``, the processes below OWNER that are
    not the run's). Its stdin says ``s`` (suspended from the terminal), ``r`` (resumed)
    and ``x`` (done); its stdout says which limit passed when it ended the run."""
    owner, stall = int(argv[0]), float(argv[1])
    until = float(argv[2]) if argv[2] else None
    last_resort = bool(argv[3])
    before = {
        (int(pid), int(start))
        for pid, _, start in (entry.partition(":") for entry in argv[4].split(",") if entry)
    }
    first = _stat(owner)
    if first is None:
        return
    born = first[3]
    suspended = False
    since: float | None = None
    while True:
        said = _heard(_WATCH_POLL)
        if said is None or b"x" in said:
            return
        for byte in said:
            suspended = {ord("s"): True, ord("r"): False}.get(byte, suspended)
        state = _stat(owner)
        if state is None or state[3] != born or state[2] in ("Z", "X"):
            return  # the command's process is gone
        now = time.monotonic()
        if state[2] != "T" or suspended:  # running, traced ("t"), or stopped by its user
            since = None
            continue
        since = now if since is None else since
        if now - since >= stall:
            limit = "deadline"
        elif until is not None and now >= until:
            limit = "timeout"
        else:
            continue
        _end_run(owner, born, before, limit, last_resort)
        return


def _heard(seconds: float) -> bytes | None:
    """What the command's process wrote on stdin within ``seconds`` (None: it closed)."""
    try:
        ready, _, _ = select.select([0], [], [], seconds)
        return (os.read(0, 64) or None) if ready else b""
    except OSError:
        return None


def _end_run(
    owner: int, born: int, before: set[tuple[int, int]], limit: str, last_resort: bool
) -> None:
    """Freeze what the command's process started (SIGSTOP: nothing of it can stop the
    command again, and no peer of the command's sockets is gone before the command has
    answered what it was sent meanwhile), continue the command's process (it says the
    one line and ends its run), and kill what is still frozen ``_SETTLE`` seconds later,
    or once the command is done; kill the command's process too after
    ``_LAST_RESORT`` seconds if it may and has not closed the watchdog."""
    try:
        os.write(1, limit.encode() + b"\n")  # read by the command as it continues
    except OSError:
        pass
    frozen = _signal_below(owner, before, signal.SIGSTOP)
    _kill(owner, signal.SIGCONT)
    now = time.monotonic()
    settle, end = now + _SETTLE, now + _LAST_RESORT
    try:
        while time.monotonic() < end:
            state = _stat(owner)
            if state is None or state[3] != born or state[2] in ("Z", "X"):
                return
            if time.monotonic() > settle:
                frozen |= _signal_below(owner, before, signal.SIGKILL)
                _signal_each(frozen, signal.SIGKILL)
            if state[2] == "T":  # not yet continued, or stopped again
                frozen |= _signal_below(owner, before, signal.SIGKILL)
                _kill(owner, signal.SIGCONT)
            said = _heard(_WATCH_POLL)
            if said is None or b"x" in said:
                return
        if last_resort:
            _signal_below(owner, before, signal.SIGKILL)
            state = _stat(owner)
            if state is not None and state[3] == born:
                line = (
                    "runnercheck: runnercheck's own process was stopped (SIGSTOP) and the "
                    f"{limit} passed; it did not end once continued, so it was killed\n"
                )
                try:
                    os.write(2, line.encode())
                except OSError:
                    pass
                _kill(owner, signal.SIGKILL)
    finally:
        _signal_each(frozen, signal.SIGKILL)  # wherever they are now


def _signal_below(owner: int, before: set[tuple[int, int]], signum: int) -> set[tuple[int, int]]:
    """``signum`` (SIGSTOP or SIGKILL) to every process below ``owner`` that was not there
    before, but this one, until each is stopped or gone (also what they start
    meanwhile); the processes signalled (pid, start time)."""
    me = os.getpid()
    signalled: set[tuple[int, int]] = set()
    for _ in range(50):
        waiting = {
            (pid, stat[3])
            for pid, stat in descendants(owner).items()
            if pid != me
            and (pid, stat[3]) not in before
            and stat[2] not in ("Z", "X")
            and not (signum == signal.SIGSTOP and stat[2] == "T")
        }
        if not waiting:
            break
        _signal_each(waiting, signum)
        signalled |= waiting
        time.sleep(_POLL)
    return signalled


def _signal_each(processes: set[tuple[int, int]], signum: int) -> None:
    """``signum`` to each process (pid, start time) that still runs under that pid."""
    for pid, started in processes:
        current = _stat(pid)
        if current is not None and current[3] == started and current[2] not in ("Z", "X"):
            _kill(pid, signum)


def _kill(pid: int, signum: int) -> None:
    try:
        os.kill(pid, signum)
    except OSError:
        pass
