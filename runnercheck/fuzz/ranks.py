"""What every rank process runs: join the group, then loop over the driver's messages.

Rank 0 (the driver) takes instructions from the process that runs Hypothesis: a job
(the class to round-trip), an example, or stop. It passes jobs and stop on to the
other ranks through the broadcast itself (a dict with :data:`CONTROL_KEY`), sends each
example with the reference ``broadcast_tensor_dict``, then gathers every receiver's
outcome through a second collective on a group whose timeout is the deadline, so a
receiver that blocks is reported instead of waited for.

Groups: the world group (gloo) carries metadata and CPU tensors; its timeout is long
because receivers wait on it between examples. CUDA tensors go over NCCL when every
rank has a GPU of its own, else over gloo (which copies them through host memory:
several ranks can share one GPU that way, NCCL refuses that).
"""

from __future__ import annotations

import datetime
import faulthandler
import gc
import os
import pickle
import signal
import sys
import traceback
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import torch
import torch.distributed as dist

from runnercheck import broadcast as reference
from runnercheck.fuzz import cuda_standin, importing, roundtrip, transfer
from runnercheck.fuzz.roundtrip import CONTROL_KEY, DriverOutcome, Job, RankError, ReceiverOutcome
from runnercheck.fuzz.strategies import ALL_DTYPES

#: How long receivers may wait for the next example (they idle between runs).
IDLE_TIMEOUT = datetime.timedelta(hours=12)


@dataclass(frozen=True)
class Settings:
    world_size: int
    device: str = "cpu"
    deadline: float = 30.0
    rendezvous_timeout: float = 120.0


@dataclass
class Joined:
    """A rank's view of the group once joined."""

    rank: int
    world_size: int
    device: torch.device
    result_group: Any
    device_group: Any
    transport: str
    dtypes: tuple[torch.dtype, ...]
    job: Job | None = None
    job_error: RankError | None = None
    #: Local ranks answer their parent over this pipe (else rank 0 gathers the answers).
    pipe: Any = None
    extra: dict[str, Any] = field(default_factory=dict)


def join(rank: int, settings: Settings, store: Any = None) -> Joined:
    """Initialise torch.distributed (``store`` given: on it; else ``env://``)."""
    device = torch.device("cpu")
    local_rank = int(os.environ.get("LOCAL_RANK", rank))
    if cuda_standin.needed(settings.device):  # CUDA events and streams the inputs make
        cuda_standin.install()
    if settings.device == "cuda":
        if not torch.cuda.is_available():
            raise RuntimeError("--device cuda: no CUDA device on this rank")
        count = torch.cuda.device_count()
        device = torch.device("cuda", local_rank % count)
        torch.cuda.set_device(device)
    if store is not None:
        dist.init_process_group(
            "gloo", store=store, rank=rank, world_size=settings.world_size, timeout=IDLE_TIMEOUT
        )
    else:
        dist.init_process_group("gloo", init_method="env://", timeout=IDLE_TIMEOUT)
    deadline = datetime.timedelta(seconds=settings.deadline)
    result_group = dist.new_group(backend="gloo", timeout=deadline)
    device_group = None
    transport = "gloo"
    if settings.device == "cuda":
        local_world = int(os.environ.get("LOCAL_WORLD_SIZE", settings.world_size))
        own_gpu = torch.cuda.device_count() >= local_world
        backend = "nccl" if own_gpu else "gloo"
        device_group = dist.new_group(backend=backend, timeout=deadline)
        transport = (
            "gloo (metadata), nccl (CUDA tensors)"
            if own_gpu
            else "gloo (metadata and CUDA tensors through host copies; ranks share GPUs)"
        )
    reference.set_groups(cpu=None, device=device_group)
    dtypes = _probe_dtypes(device, device_group)
    return Joined(rank, settings.world_size, device, result_group, device_group, transport, dtypes)


def _probe_dtypes(device: torch.device, device_group: Any) -> tuple[torch.dtype, ...]:
    """The dtypes this transport can broadcast (gloo and NCCL have no int16)."""
    carried = []
    group = device_group if device.type != "cpu" else None
    for dtype in ALL_DTYPES:
        try:
            dist.broadcast(torch.zeros(1, dtype=dtype, device=device), src=0, group=group)
        except (RuntimeError, TypeError, ValueError):
            continue
        carried.append(dtype)
    return tuple(carried)


def _broadcast(tensor_dict: dict[str, Any] | None) -> dict[str, Any] | None:
    return reference.broadcast_tensor_dict(tensor_dict, src=0)


def _gather(joined: Joined, value: Any) -> list[Any] | None:
    if joined.world_size == 1:
        return [value]
    out: list[Any] | None = [None] * joined.world_size if joined.rank == 0 else None
    dist.gather_object(value, out, dst=0, group=joined.result_group)
    return out


# ------------------------------------------------------------------ driver (rank 0)


def start_job(joined: Joined, job_bytes: bytes) -> list[RankError]:
    """Load a job on every rank; the errors of ranks that cannot (e.g. cannot import
    the class)."""
    errors = []
    error = _load_job(joined, job_bytes)
    if error is not None:
        errors.append(error)
    if joined.world_size > 1:
        _broadcast({CONTROL_KEY: ("job", job_bytes)})
        if joined.pipe is not None:
            return errors  # the parent collects the other ranks' answers
        try:
            answers = _gather(joined, None) or []
        except RuntimeError as exc:
            return [RankError(-1, "job", "Timeout", f"ranks did not answer: {exc}", desync=True)]
        errors.extend(a for a in answers[1:] if a is not None)
    return errors


class UnsendableJob(Exception):
    """A job that cannot be pickled: a rank imports each class by its module and
    qualified name, and this one's does not lead back to it."""


def pack_job(job: Job) -> bytes:
    """A job as sent to the ranks: its ``sys_path`` and the stubbed packages first, so
    that a rank can import the class's module before unpickling the class."""
    try:
        inner = pickle.dumps(job)
    except (pickle.PicklingError, AttributeError, TypeError) as exc:
        raise UnsendableJob(f"{type(exc).__name__}: {exc}") from exc
    return pickle.dumps((job.sys_path, importing.stubbed(), inner))


def _load_job(joined: Joined, job_bytes: bytes) -> RankError | None:
    try:
        sys_path, stubs, inner = pickle.loads(job_bytes)
        for entry in sys_path:  # before the class is unpickled: it may live there
            if entry not in sys.path:
                sys.path.insert(0, entry)
        importing.stub_in_rank(stubs)  # the packages the driver's process stubbed
        job = pickle.loads(inner)
        joined.job = job
        joined.job_error = None
        return None
    except Exception as exc:
        joined.job = None
        joined.job_error = roundtrip.describe_exception(exc, joined.rank, "job")
        return joined.job_error


def drive_example(joined: Joined, payload: bytes) -> DriverOutcome:
    """Rank 0: one example through the broadcast, with every rank's outcome."""
    assert joined.job is not None
    try:
        example = transfer.loads(payload, joined.device)
    except Exception as exc:
        return DriverOutcome(error=roundtrip.describe_exception(exc, 0, "transfer"))
    outcome, sent = roundtrip.send(joined.job, example, _broadcast)
    if sent is None and (outcome.error is None or not outcome.error.desync):
        return outcome  # nothing was broadcast: receivers still wait for the next dict
    outcome.sent = True
    if joined.world_size == 1:
        if sent is not None:
            outcome.receivers.append(roundtrip.receive(joined.job, sent, 0))
        return outcome
    if joined.pipe is not None:
        return outcome  # the parent collects the other ranks' answers
    try:
        answers = _gather(joined, None) or []
    except RuntimeError as exc:
        outcome.lost = f"not every rank answered within the deadline ({_first_line(exc)})"
        return outcome
    outcome.receivers.extend(a for a in answers[1:] if isinstance(a, ReceiverOutcome))
    return outcome


def stop(joined: Joined) -> None:
    if joined.world_size > 1:
        _broadcast({CONTROL_KEY: ("stop",)})


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0][:200] if text else type(exc).__name__


# ------------------------------------------------------------------ receivers


def _answer(joined: Joined, value: Any) -> None:
    if joined.pipe is not None:
        send(joined.pipe, ("answer", value))
    else:
        _gather(joined, value)


def receiver_loop(joined: Joined) -> None:
    """Ranks > 0: receive, rebuild, answer; until the driver says stop."""
    while True:
        try:
            received = _broadcast(None)
        except Exception as exc:
            error = roundtrip.describe_exception(exc, joined.rank, "receive", desync=True)
            _answer(joined, ReceiverOutcome(joined.rank, error))
            continue
        assert received is not None
        control = received.get(CONTROL_KEY) if len(received) == 1 else None
        if control is not None:
            if control[0] == "stop":
                return
            if control[0] == "job":
                _answer(joined, _load_job(joined, control[1]))
            continue
        if joined.job is None:
            error = joined.job_error or RankError(joined.rank, "job", "RuntimeError", "no job")
            _answer(joined, ReceiverOutcome(joined.rank, error))
            continue
        _answer(joined, roundtrip.receive(joined.job, received, joined.rank))


# ------------------------------------------------------------------ local processes


def send(conn: Any, message: tuple[Any, ...]) -> None:
    """Plain pickle over the pipe (multiprocessing's pickler would move tensors through
    shared memory)."""
    conn.send_bytes(pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL))


def receive(conn: Any) -> Any:
    return pickle.loads(conn.recv_bytes())


def _quiet_and_traceable(log_path: str) -> Any:
    """Lead a process group of our own (so that a kill on a deadline takes the processes
    user code started too), send this process's output to its log, dump stacks there on
    SIGUSR1, ignore Ctrl-C (the parent reaps us), and die with the parent where the OS
    allows."""
    try:
        os.setpgid(0, 0)
    except OSError:
        pass
    log = open(log_path, "a", buffering=1)
    os.dup2(log.fileno(), 1)
    os.dup2(log.fileno(), 2)
    sys.stdout = sys.stderr = log
    faulthandler.register(signal.SIGUSR1, file=log, all_threads=True)
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except Exception:
        pass
    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    return log


def local_main(
    rank: int,
    settings: Settings,
    prefix: str,
    conn: Any,
    log_path: str,
    inherited: Sequence[Any] = (),
) -> None:
    """Entry point of a rank process started on this machine: close ``inherited`` (the
    parent's ends of the pipes, in a rank forked from the parent), then wait for the
    port of the parent's store on ``conn`` and join the group."""
    for end in inherited:
        end.close()
    _quiet_and_traceable(log_path)
    try:
        try:
            kind, port = receive(conn)
        except (EOFError, OSError):
            os._exit(3)  # the parent gave up before the store existed
        assert kind == "store"
        store = dist.TCPStore(
            "127.0.0.1",
            port,
            is_master=False,
            timeout=datetime.timedelta(seconds=settings.rendezvous_timeout),
        )
        joined = join(rank, settings, dist.PrefixStore(prefix, store))
        joined.pipe = conn
        # what is here now lives to the end; each example makes short-lived objects only
        gc.freeze()
        gc.set_threshold(20_000, *gc.get_threshold()[1:])
        send(conn, ("ready", joined.transport, joined.dtypes))
        if rank == 0:
            _driver_loop(joined, conn)
        else:
            _watch_parent(conn)
            receiver_loop(joined)
        dist.destroy_process_group()
    except BaseException as exc:
        text = "".join(traceback.format_exception(exc))
        print(text, file=sys.stderr, flush=True)
        try:
            send(conn, ("fatal", rank, roundtrip.describe_exception(exc, rank, "rank"), text))
        except Exception:
            pass
        os._exit(1)
    os._exit(0)


def _watch_parent(conn: Any) -> None:
    """Exit when the parent's end of our pipe closes (it died or gave up on us)."""
    import threading

    def watch() -> None:
        try:
            while True:
                conn.recv()
        except (EOFError, OSError):
            os._exit(3)

    threading.Thread(target=watch, daemon=True).start()


def _driver_loop(joined: Joined, conn: Any) -> None:
    while True:
        try:
            message = receive(conn)
        except (EOFError, OSError):
            os._exit(3)
        kind = message[0]
        if kind == "example":
            outcome = drive_example(joined, message[1])
            send(conn, ("outcome", outcome))
        elif kind == "job":
            send(conn, ("job", start_job(joined, message[1])))
        elif kind == "stop":
            stop(joined)
            return
