"""Run the engine on N processes over gloo on loopback and collect one result.

Every rank is a fresh ``python -m runnercheck.demo.engine.rank`` process (so nothing of
the caller is re-imported, and a trace session sees it start); with ``fork_server``
(the demo's repeated runs), a process forked from a fork server instead: a fresh
interpreter that imported torch and :mod:`runnercheck.demo.engine.rank` once, so that a
run does not pay torch's import on every rank. Rank 0 is the driver. What a rank does is
in :mod:`runnercheck.demo.engine.rank`. This module does not import torch.
"""

import dataclasses
import os
import pickle
import socket
import subprocess
import sys
import tempfile
import time
from typing import Any, Dict, List, Optional, Tuple

from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
    WorkloadConfig,
)
from runnercheck.demo.engine.loader import WORKERS

#: Scenarios the driver can play.
SCENARIOS = ("run", "swap-only")


class EngineRunError(Exception):
    """A rank failed, hung past its deadline or died; the message is one line."""


@dataclasses.dataclass(frozen=True)
class EngineSpec:
    """Everything a rank needs, sent to every process."""

    shape: Optional[str] = "legacy"
    engine_dir: Optional[str] = None
    worker: str = "default"
    tp: int = 1
    steps: int = 16
    seed: int = 0
    embedding: bool = False
    scenario: str = "run"
    timeout_s: float = 60.0
    model: ModelConfig = dataclasses.field(default_factory=ModelConfig)
    num_gpu_blocks: int = 40
    num_cpu_blocks: int = 64
    block_size: int = 4
    max_num_seqs: int = 8
    threads_per_rank: int = 1
    #: Steps run first and left out of ``tokens_per_s`` and ``step_time_s``.
    warmup_steps: int = 0
    #: Where the model, its KV cache and the step's tensors live: ``cpu`` or ``cuda``.
    device: str = "cpu"
    #: Speculative decoding with this many draft tokens per step (0: off; merged shape).
    num_speculative_tokens: int = 0
    #: A directory holding a speculative-decoding package to run instead of the built-in
    #: :mod:`runnercheck.demo.engine.spec_decode` (e.g. a copy before a codemod).
    spec_decode_dir: Optional[str] = None
    #: Fork the ranks from a server that imported torch once (see the module's docstring).
    fork_server: bool = False

    def worker_path(self) -> str:
        return WORKERS.get(self.worker, self.worker)

    def configs(
        self,
    ) -> Tuple[
        ModelConfig,
        ParallelConfig,
        SchedulerConfig,
        DeviceConfig,
        CacheConfig,
        Optional[LoRAConfig],
    ]:
        model_config = dataclasses.replace(
            self.model, seed=self.seed, embedding_mode=self.embedding
        )
        parallel_config = ParallelConfig(tensor_parallel_size=self.tp, timeout_s=self.timeout_s)
        model_config.verify_with_parallel_config(parallel_config)
        cpu = self.worker == "cpu"
        cache_config = CacheConfig(
            block_size=self.block_size,
            # Without swap space every sequence must fit at once.
            num_gpu_blocks=self.num_gpu_blocks * 4 if cpu else self.num_gpu_blocks,
            num_cpu_blocks=0 if cpu else self.num_cpu_blocks,
        )
        lora_config = None if cpu else LoRAConfig()
        return (
            model_config,
            parallel_config,
            SchedulerConfig(max_num_seqs=self.max_num_seqs),
            DeviceConfig(self.device),
            cache_config,
            lora_config,
        )

    def workload(self) -> WorkloadConfig:
        if self.worker == "cpu":
            return WorkloadConfig(num_loras=0, lora_rate=0.0, embedding=self.embedding)
        return WorkloadConfig(embedding=self.embedding)


# ---------------------------------------------------------------------- the parent


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def launch(spec: EngineSpec) -> Dict[int, Tuple[bool, Any]]:
    """Run every rank; returns ``{rank: (ok, payload or error line)}``. Raises
    :class:`EngineRunError` when a rank dies without a word or the run overruns."""
    for attempt in range(3):
        outcome = _launch_once(spec)
        errors = [msg for ok, msg in outcome.values() if not ok]
        if attempt < 2 and any("address already in use" in str(m).lower() for m in errors):
            continue
        return outcome
    raise AssertionError("unreachable")


def _launch_once(spec: EngineSpec) -> Dict[int, Tuple[bool, Any]]:
    init_method = f"tcp://127.0.0.1:{_free_port()}"
    outcome: Dict[int, Tuple[bool, Any]] = {}
    deadline = time.monotonic() + 3 * spec.timeout_s + 60
    with tempfile.TemporaryDirectory(prefix="runnercheck-engine-") as tmp:
        spec_file = os.path.join(tmp, "spec.pickle")
        with open(spec_file, "wb") as handle:
            pickle.dump(spec, handle)
        processes: List[Any] = []
        try:
            for rank in range(spec.tp):
                log = os.path.join(tmp, f"rank{rank}.log")
                args = (str(rank), spec_file, init_method, _result_file(tmp, rank))
                processes.append(_start_rank(spec, args, log))
            while len(outcome) < spec.tp:
                for rank, process in enumerate(processes):
                    if rank in outcome or process.exitcode is None:
                        continue
                    outcome[rank] = _read_outcome(tmp, rank, process.exitcode)
                    if not outcome[rank][0]:
                        # The others get one collective timeout to notice, then go.
                        deadline = min(deadline, time.monotonic() + spec.timeout_s + 2)
                if time.monotonic() > deadline:
                    failed = [rank for rank, (ok, _) in outcome.items() if not ok]
                    why = f"after rank {failed[0]} failed" if failed else "before the deadline"
                    for rank in range(spec.tp):
                        outcome.setdefault(rank, (False, f"killed: no result {why}"))
                    break
                time.sleep(0.02)
        finally:
            for process in processes:
                if process.exitcode is None:
                    process.kill()
                process.join()
    return outcome


#: The module every rank runs (imported with torch once by the fork server).
RANK_MODULE = "runnercheck.demo.engine.rank"


class _Fresh:
    """A rank in a fresh interpreter, with the face of a ``multiprocessing`` process."""

    def __init__(self, spec: EngineSpec, args: Tuple[str, ...], log: str) -> None:
        env = dict(os.environ, OMP_NUM_THREADS=str(spec.threads_per_rank))
        with open(log, "wb") as out:
            self._process = subprocess.Popen(
                [sys.executable, "-m", RANK_MODULE, *args],
                stdout=out,
                stderr=subprocess.STDOUT,
                env=env,
            )

    @property
    def exitcode(self) -> Optional[int]:
        return self._process.poll()

    def kill(self) -> None:
        self._process.kill()

    def join(self) -> None:
        self._process.wait()


def _start_rank(spec: EngineSpec, args: Tuple[str, ...], log: str) -> Any:
    if not spec.fork_server:
        return _Fresh(spec, args, log)
    process = _context().Process(
        target=_rank_process, args=(args, log), name=f"runnercheck-engine-rank{args[0]}"
    )
    process.start()
    return process


def _context() -> Any:
    import multiprocessing

    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload([RANK_MODULE])
    return context


def _rank_process(args: Tuple[str, ...], log: str) -> None:
    """A rank, in a process forked from the server: its output goes to ``log``."""
    import importlib

    handle = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(handle, 1)
    os.dup2(handle, 2)
    os.close(handle)
    code = 1
    try:
        code = int(importlib.import_module(RANK_MODULE).main(list(args)))
    except BaseException:  # as an interpreter would: the traceback, in the log
        import traceback

        traceback.print_exc()
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code)


def _result_file(tmp: str, rank: int) -> str:
    return os.path.join(tmp, f"rank{rank}.result")


def _read_outcome(tmp: str, rank: int, returncode: int) -> Tuple[bool, Any]:
    try:
        with open(_result_file(tmp, rank), "rb") as handle:
            ok, payload = pickle.load(handle)
        return bool(ok), payload
    except (OSError, EOFError, pickle.UnpicklingError):
        with open(os.path.join(tmp, f"rank{rank}.log"), "rb") as handle:
            lines = handle.read().decode(errors="replace").strip().splitlines()
        last = lines[-1].strip() if lines else ""
        return False, f"process exited with code {returncode}" + (f": {last}" if last else "")


def first_error(outcome: Dict[int, Tuple[bool, Any]]) -> Optional[str]:
    """The most telling failure: a rank's own error before a peer's lost connection."""
    failures = [(rank, str(msg)) for rank, (ok, msg) in sorted(outcome.items()) if not ok]
    if not failures:
        return None
    secondary = ("connection", "closed", "timed out", "timeout", "peer", "exited with", "killed")

    def rank_key(item: Tuple[int, str]) -> Tuple[bool, int]:
        first_line = item[1].splitlines()[0].lower() if item[1] else ""
        return (any(word in first_line for word in secondary), item[0])

    rank, message = sorted(failures, key=rank_key)[0]
    return f"rank {rank}: {message.splitlines()[0]}"
