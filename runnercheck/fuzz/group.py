"""The process group's lifecycle, seen from the process that runs Hypothesis.

:class:`LocalGroup` starts its ranks on this machine and joins them on 127.0.0.1
through a TCP store it hosts on a free port (sent to each rank over its pipe once the
ranks exist). The ranks are forked from a ``forkserver`` that has imported torch once,
so restarts cost little; or, with ``launch(fork=True)``, forked from this process
itself: a command that has just imported torch forks them at once and goes on with its
own imports while they join, and torch is imported once in all. It talks to rank 0 over a pipe and holds every
child to a deadline: joining (``rendezvous_timeout``), and each example (``deadline``).
A rank that dies, or a round trip that misses its deadline, raises :class:`GroupLost`
with what each rank was doing (stack dumps) and the dead rank's error; the group is
then torn down and restarts on the next job. Children are always reaped: on close,
on errors, on Ctrl-C, at interpreter exit, and they die with this process.

:class:`EnvGroup` is the same group under ``torchrun`` (``env://`` rendezvous): this
process is rank 0 and drives in-process; the others run :func:`ranks.receiver_loop`.
"""

from __future__ import annotations

import atexit
import itertools
import math
import multiprocessing
import os
import re
import select
import signal
import tempfile
import time
import warnings
import weakref
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from typing import Any

from runnercheck.fuzz import ranks
from runnercheck.fuzz.ranks import Settings
from runnercheck.fuzz.roundtrip import DriverOutcome, Job, RankError
from runnercheck.processes import descendants

#: Extra seconds the parent waits beyond the deadline (rank 0 reports first if it can).
GRACE = 2.0


class GroupLost(BaseException):
    """The group cannot go on: a rank died or missed a deadline. A BaseException so that
    Hypothesis stops at once instead of shrinking through a dead group."""

    def __init__(self, message: str, rank: int | None = None, detail: str = "") -> None:
        super().__init__(message)
        self.message = message
        self.rank = rank
        self.detail = detail


@dataclass(frozen=True)
class GroupInfo:
    world_size: int
    device: str
    transport: str
    dtypes: tuple[Any, ...]


class LocalGroup:
    """Ranks spawned on this machine; reused across jobs and examples."""

    #: A lost group starts afresh with new ranks on its next job.
    starts_again = True

    _ids = itertools.count()

    def __init__(self, settings: Settings) -> None:
        if settings.world_size < 1:
            raise ValueError("world size must be at least 1")
        self.settings = settings
        self.info: GroupInfo | None = None
        self.restarts = -1
        self._procs: list[Any] = []
        self._conns: list[Connection] = []
        self._logs: list[str] = []
        self._store: Any = None
        self._logdir: tempfile.TemporaryDirectory[str] | None = None
        self._finalizer: Any = None
        #: When each submitted example's outcome is due, oldest first.
        self._deadlines: list[float] = []
        #: The sizes of the examples out with the ranks, oldest first.
        self._out: list[int] = []
        #: Bytes of examples that may wait in rank 0's pipe without a write blocking.
        self._ahead_bytes = 0
        #: Per rank, a poll object watching its pipe and every rank's process.
        self._pollers: list[Any] = []

    # -- lifecycle

    @property
    def running(self) -> bool:
        return bool(self._procs)

    def rank_pids(self) -> list[int]:
        """The process ids of the ranks, in rank order (none while not running)."""
        return [proc.pid for proc in self._procs if proc.pid is not None]

    def launch(self, fork: bool = False) -> None:
        """Start the rank processes without waiting for them to join (:meth:`start`
        waits). ``fork``: fork them from this process, which must not yet have started
        threads of its own or initialised CUDA (right after importing torch, as a fork
        server is); else from the fork server."""
        if self._procs:
            return
        self.restarts += 1
        self._logdir = tempfile.TemporaryDirectory(prefix="runnercheck-fuzz-")
        prefix = f"rc{os.getpid()}-{next(self._ids)}/"
        if fork:
            ctx: Any = multiprocessing.get_context("fork")
        else:
            ctx = multiprocessing.get_context("forkserver")
            ctx.set_forkserver_preload(["runnercheck.fuzz.ranks"])
        self._finalizer = weakref.finalize(self, _reap, self._procs)
        _LIVE.add(self)
        try:
            self._fork_ranks(ctx, prefix, fork)
        except BaseException:
            self.close(force=True)
            raise

    def _fork_ranks(self, ctx: Any, prefix: str, fork: bool) -> None:
        import torch.distributed as dist

        settings = self.settings
        assert self._logdir is not None
        for rank in range(settings.world_size):
            parent, child = ctx.Pipe()
            log = os.path.join(self._logdir.name, f"rank{rank}.log")
            # a forked rank closes its copies of this side's ends of the pipes, so that it
            # sees this process go (a fork server's ranks never had them)
            inherited = [*self._conns, parent] if fork else []
            proc = ctx.Process(
                target=ranks.local_main,
                args=(rank, settings, prefix, child, log, inherited),
                name=f"runnercheck-rank{rank}",
                daemon=True,
            )
            with warnings.catch_warnings():  # Python 3.12 warns of torch's own thread
                warnings.simplefilter("ignore", DeprecationWarning)
                proc.start()
            child.close()
            self._procs.append(proc)
            self._conns.append(parent)
            self._logs.append(log)
        # the store only now: a forked rank must not inherit its server's thread
        self._store = dist.TCPStore(
            "127.0.0.1",
            0,
            None,
            True,
            wait_for_workers=False,
            timeout=_seconds(settings.rendezvous_timeout),
        )
        for conn in self._conns:
            try:
                ranks.send(conn, ("store", self._store.port))
            except (OSError, ValueError):
                pass  # the rank died: start() says so
        self._ahead_bytes = _send_buffer(self._conns[0]) // 4
        self._pollers = [_poller(conn, self._procs) for conn in self._conns]

    def start(self) -> GroupInfo:
        if self.running and self.info is not None:
            return self.info
        if not self._procs:
            self.launch()
        settings = self.settings
        try:
            ready = self._wait_all("ready", settings.rendezvous_timeout, "join the group")
        except BaseException:
            self.close(force=True)
            raise
        transport, dtypes = ready[0]
        self.info = GroupInfo(settings.world_size, settings.device, transport, tuple(dtypes))
        return self.info

    def close(self, force: bool = False) -> None:
        """Stop the ranks (politely unless ``force``), reap them, remove the logs."""
        if not self._procs:
            return
        if not force:
            try:
                ranks.send(self._conns[0], ("stop",))
                for proc in self._procs:
                    proc.join(timeout=5)
            except (OSError, ValueError):
                pass
        _reap(self._procs)
        for conn in self._conns:
            conn.close()
        self._procs.clear()
        self._conns.clear()
        self._logs.clear()
        self._deadlines.clear()
        self._out.clear()
        self._pollers.clear()
        self._store = None
        if self._logdir is not None:
            self._logdir.cleanup()
            self._logdir = None
        self.info = None
        _LIVE.discard(self)

    def __enter__(self) -> LocalGroup:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.close(force=exc[0] is not None and not isinstance(exc[1], Exception))

    # -- work

    def start_job(self, job: Job) -> list[RankError]:
        self.start()
        try:
            ranks.send(self._conns[0], ("job", ranks.pack_job(job)))
        except (OSError, ValueError) as exc:
            self._lost(f"rank 0 is gone ({exc})", 0)
        deadline = time.monotonic() + self.settings.deadline + GRACE
        _, errors = self._reply(0, deadline, "start the job")
        for rank in range(1, len(self._procs)):
            _, error = self._reply(rank, deadline, "load the job")
            if error is not None:
                errors.append(error)
        return list(errors)

    def round_trip(self, payload: bytes) -> DriverOutcome:
        self.submit(payload)
        return self.collect()

    def room(self, size: int) -> bool:
        """Whether an example of ``size`` pickled bytes can be submitted now without
        waiting: with nothing out, always (rank 0 is reading); else only if it and the
        examples out, which rank 0 may not have read yet, fit in the buffer of its pipe,
        so that this process never blocks writing while a rank blocks writing to it."""
        if not self._out:
            return True
        return sum(self._out) + size + _FRAME_BYTES * (len(self._out) + 1) <= self._ahead_bytes

    def submit(self, payload: bytes) -> None:
        """Hand an example to rank 0 and return at once (:meth:`collect` waits for its
        outcome; its deadline runs from when rank 0 is done with the examples before
        it). Several may be out at once; :meth:`room` says when one more fits."""
        try:
            ranks.send(self._conns[0], ("example", payload))
        except (OSError, ValueError) as exc:
            self._lost(f"rank 0 is gone ({exc})", 0)
        self._deadlines.append(time.monotonic() + self.settings.deadline + GRACE)
        self._out.append(len(payload))

    def collect(self) -> DriverOutcome:
        """The outcome of the example submitted first and not yet collected."""
        deadline = self._deadlines.pop(0)
        self._out.pop(0)
        _, outcome = self._reply(0, deadline, "round-trip the example")
        assert isinstance(outcome, DriverOutcome)
        if outcome.sent and len(self._procs) > 1:
            for rank in range(1, len(self._procs)):
                _, answer = self._reply(rank, deadline, "rebuild the example")
                outcome.receivers.append(answer)
        if self._deadlines:  # the next example's deadline runs from now, when its turn came
            self._deadlines[0] = max(
                self._deadlines[0], time.monotonic() + self.settings.deadline + GRACE
            )
        if outcome.lost:
            self._lost(outcome.lost)
        if outcome.error is not None and outcome.error.desync:
            self._lost(f"rank 0 {outcome.error.stage} failed midway: {outcome.error.text()}", 0)
        for receiver in outcome.receivers:
            if receiver.error is not None and receiver.error.desync:
                error = receiver.error
                self._lost(f"rank {error.rank} could not receive: {error.text()}", error.rank)
        return outcome

    # -- waiting, with deadlines

    def _reply(self, rank: int, deadline: float, what: str) -> tuple[str, Any]:
        """The next message from ``rank``, watching every rank's process."""
        conn = self._conns[rank]
        poller = self._pollers[rank]
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                self._lost(
                    f"no answer within the deadline of {self.settings.deadline:g} s "
                    f"(rank {rank} was to {what})"
                )
            # one poll object per rank, made once: far cheaper than connection.wait()
            ready = {fd for fd, _ in poller.poll(max(1, math.ceil(remaining * 1000)))}
            if conn.fileno() in ready:
                try:
                    message = ranks.receive(conn)
                except (EOFError, OSError):
                    self._died(rank)
                if message[0] == "fatal":
                    self._fatal(message)
                return message[0], message[1]
            for other, proc in enumerate(self._procs):
                if proc.sentinel in ready:
                    self._died(other)

    def _wait_all(self, kind: str, timeout: float, what: str) -> list[Any]:
        deadline = time.monotonic() + timeout
        answers: dict[int, Any] = {}
        while len(answers) < len(self._conns):
            remaining = deadline - time.monotonic()
            waiting = [r for r in range(len(self._conns)) if r not in answers]
            if remaining <= 0:
                self._lost(f"rank {waiting[0]} did not {what} within {timeout:g} s", waiting[0])
            objects = [self._conns[r] for r in waiting] + [self._procs[r].sentinel for r in waiting]
            ready = wait(objects, timeout=remaining)
            for rank in waiting:
                conn = self._conns[rank]
                if conn in ready:
                    try:
                        message = ranks.receive(conn)
                    except (EOFError, OSError):
                        self._died(rank)
                    if message[0] == "fatal":
                        self._fatal(message)
                    if message[0] == kind:
                        answers[rank] = message[1:]
                elif self._procs[rank].sentinel in ready:
                    self._died(rank)
        return [answers[r] for r in range(len(self._conns))]

    # -- failures

    def _fatal(self, message: tuple[Any, ...]) -> None:
        _, rank, error, text = message
        self._lost(f"rank {rank} failed: {error.text()}", rank, text)

    def _died(self, rank: int) -> None:
        proc = self._procs[rank]
        proc.join(timeout=1)
        # a fatal message may be waiting in the pipe
        conn = self._conns[rank]
        try:
            while conn.poll(0):
                message = ranks.receive(conn)
                if message[0] == "fatal":
                    self._fatal(message)
        except (EOFError, OSError):
            pass
        code = proc.exitcode
        how = (
            f"was killed by signal {-code}"
            if code is not None and code < 0
            else f"exited with status {code}"
        )
        self._lost(f"rank {rank} died: it {how}", rank)

    def _lost(self, message: str, rank: int | None = None, detail: str = "") -> None:
        if rank is None:
            rank = self._first_dead()
            if rank is not None:
                self._died(rank)
        if rank is not None:
            detail = detail or _tail(self._logs[rank]).strip()
            self.close(force=True)
            raise GroupLost(message, rank, _last_lines(detail, 15))
        stacks = self._dump_stacks()
        culprit = _stuck_rank(stacks)
        if culprit is not None:
            where = _user_frame(stacks[culprit])
            message = (
                f"rank {culprit} did not finish within the deadline of "
                f"{self.settings.deadline:g} s; it was busy at {where}"
            )
        self.close(force=True)
        raise GroupLost(message, culprit, _format_stacks(stacks))

    def _first_dead(self) -> int | None:
        """A rank that has exited (waiting a moment: a reset connection is often the first
        sign of a rank that is still dying)."""
        deadline = time.monotonic() + 1.0
        while time.monotonic() < deadline:
            for rank, proc in enumerate(self._procs):
                if not proc.is_alive():
                    return rank
            time.sleep(0.05)
        return None

    def _dump_stacks(self) -> dict[int, str]:
        sizes = {}
        for rank, proc in enumerate(self._procs):
            if proc.is_alive() and proc.pid is not None:
                sizes[rank] = _size(self._logs[rank])
                try:
                    os.kill(proc.pid, signal.SIGUSR1)
                except OSError:
                    pass
        if sizes:
            time.sleep(0.3)
        stacks = {}
        for rank, log in enumerate(self._logs):
            stacks[rank] = _read_from(log, sizes.get(rank, 0)) if rank in sizes else _tail(log)
        return stacks


_LIVE: weakref.WeakSet[LocalGroup] = weakref.WeakSet()


@atexit.register
def _close_all() -> None:
    for group in list(_LIVE):
        group.close(force=True)


def _reap(procs: list[Any]) -> None:
    """Kill every rank with its whole process group (what user code started in it) and
    any descendant that left the group, then wait for each rank."""
    victims: set[int] = set()
    for proc in procs:
        if proc.pid is not None:
            victims |= set(descendants(proc.pid))
    for proc in procs:
        if proc.pid is None:
            continue
        try:
            os.killpg(proc.pid, signal.SIGKILL)  # each rank leads its own group
        except OSError:
            pass
        if proc.is_alive():
            proc.kill()
    for pid in victims:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass
    for proc in procs:
        proc.join(timeout=5)


def _poller(conn: Connection, procs: list[Any]) -> Any:
    """A poll object for ``conn`` and the sentinels of ``procs`` (readable once the
    process has ended)."""
    poller = select.poll()
    for fd in (conn.fileno(), *(proc.sentinel for proc in procs)):
        poller.register(fd, select.POLLIN | select.POLLPRI)
    return poller


#: What a message costs in a pipe's buffer beyond its bytes (header, kernel bookkeeping).
_FRAME_BYTES = 2048


def _send_buffer(conn: Connection) -> int:
    """The send buffer of the socket under ``conn``, in bytes (0 if it is not a socket)."""
    import socket

    try:
        sock = socket.socket(fileno=os.dup(conn.fileno()))
    except OSError:
        return 0
    try:
        return sock.getsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF)
    except OSError:
        return 0
    finally:
        sock.close()


def _seconds(value: float) -> Any:
    import datetime

    return datetime.timedelta(seconds=value)


def _size(path: str) -> int:
    try:
        return os.path.getsize(path)
    except OSError:
        return 0


def _read_from(path: str, offset: int) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            f.seek(offset)
            return f.read()
    except OSError:
        return ""


def _tail(path: str, limit: int = 4000) -> str:
    text = _read_from(path, max(0, _size(path) - limit))
    return text


_NOT_USER = (
    "/torch/",
    "/runnercheck/fuzz/",
    "/runnercheck/broadcast.py",
    "/multiprocessing/",
    "threading.py",
    "<string>",
)
_FRAME = re.compile(r'File "(?P<path>.+)", line (?P<line>\d+) in (?P<func>\S+)')


def _main_thread(stack: str) -> str:
    """The part of a faulthandler dump about the main thread (the one not started by
    ``threading``)."""
    sections = re.split(r"^(?=(?:Current thread|Thread) 0x)", stack, flags=re.MULTILINE)
    for section in sections:
        if "File " in section and "threading.py" not in section:
            return section
    return stack


def _is_user(path: str) -> bool:
    return not any(marker in path for marker in _NOT_USER)


def _user_frame(stack: str) -> str:
    """The innermost frame of a faulthandler dump that is neither torch, runnercheck nor
    the interpreter's own machinery."""
    for match in _FRAME.finditer(_main_thread(stack)):
        path = match["path"]
        if _is_user(path):
            relative = os.path.relpath(path)
            shown = relative if not relative.startswith("..") else path
            return f"{shown}:{match['line']} in {match['func']}"
    return ""


def _stuck_rank(stacks: dict[int, str]) -> int | None:
    for rank, stack in sorted(stacks.items()):
        if _user_frame(stack):
            return rank
    return None


def _format_stacks(stacks: dict[int, str]) -> str:
    """Each rank's innermost frames of its own code (where it was when time ran out)."""
    parts = []
    for rank, stack in sorted(stacks.items()):
        frames = [
            f"{os.path.relpath(m['path']) if not os.path.relpath(m['path']).startswith('..') else m['path']}"
            f":{m['line']} in {m['func']}"
            for m in _FRAME.finditer(_main_thread(stack))
            if "/multiprocessing/" not in m["path"]
            and "threading.py" not in m["path"]
            and "<string>" not in m["path"]
        ]
        if frames:
            parts.append(f"rank {rank} was at: " + " <- ".join(frames[:4]))
    return "\n".join(parts)


def _last_lines(text: str, count: int) -> str:
    return "\n".join(text.splitlines()[-count:])


class EnvGroup:
    """Under torchrun: this process is rank 0 and drives in-process."""

    #: The ranks torchrun started cannot be replaced: a lost group stays lost.
    starts_again = False

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        self.info: GroupInfo | None = None
        self.restarts = 0
        self._joined: ranks.Joined | None = None
        self._submitted: list[bytes] = []

    def start(self) -> GroupInfo:
        if self._joined is None:
            self._joined = ranks.join(int(os.environ["RANK"]), self.settings)
            self.info = GroupInfo(
                self._joined.world_size,
                self.settings.device,
                self._joined.transport,
                self._joined.dtypes,
            )
        assert self.info is not None
        return self.info

    def start_job(self, job: Job) -> list[RankError]:
        joined = self._joined
        assert joined is not None
        errors = ranks.start_job(joined, ranks.pack_job(job))
        if any(e.desync for e in errors):
            raise GroupLost("ranks did not take the job: " + "; ".join(e.text() for e in errors))
        return errors

    def room(self, size: int) -> bool:
        """One example at a time: this process is rank 0, so no rank works ahead of it,
        and an example held back only goes out after a failure found before it."""
        return not self._submitted

    def submit(self, payload: bytes) -> None:
        """This process is rank 0: the example goes out when it is collected."""
        self._submitted.append(payload)

    def collect(self) -> DriverOutcome:
        return self.round_trip(self._submitted.pop(0))

    def round_trip(self, payload: bytes) -> DriverOutcome:
        assert self._joined is not None
        outcome = ranks.drive_example(self._joined, payload)
        if outcome.lost:
            raise GroupLost(outcome.lost)
        if outcome.error is not None and outcome.error.desync:
            raise GroupLost(
                f"rank 0 {outcome.error.stage} failed midway: {outcome.error.text()}", 0
            )
        for receiver in outcome.receivers:
            if receiver.error is not None and receiver.error.desync:
                raise GroupLost(
                    f"rank {receiver.rank} could not receive: {receiver.error.text()}",
                    receiver.rank,
                )
        return outcome

    def close(self, force: bool = False) -> None:
        if self._joined is not None:
            import torch.distributed as dist

            if not force:
                try:
                    ranks.stop(self._joined)
                except Exception:
                    pass
            dist.destroy_process_group()
            self._joined = None


def helper_pids() -> list[int]:
    """The processes multiprocessing keeps for this one (its fork server and resource
    tracker): reused by later groups, so never ended with a run's processes."""
    from multiprocessing import forkserver, resource_tracker

    pids = [
        getattr(forkserver._forkserver, "_forkserver_pid", None),
        getattr(resource_tracker._resource_tracker, "_pid", None),
    ]
    return [pid for pid in pids if isinstance(pid, int)]


def torchrun_rank() -> int | None:
    """This process's rank when started by torchrun (RANK and WORLD_SIZE set), else None."""
    if "RANK" in os.environ and "WORLD_SIZE" in os.environ:
        return int(os.environ["RANK"])
    return None


def run_receiver(settings: Settings) -> int:
    """A torchrun rank other than 0: serve until rank 0 says stop."""
    import torch.distributed as dist

    joined = ranks.join(int(os.environ["RANK"]), settings)
    try:
        ranks.receiver_loop(joined)
    finally:
        dist.destroy_process_group()
    return 0
