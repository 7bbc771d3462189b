"""Run the engine on N processes over gloo on loopback and collect one result.

Rank 0 is the driver: it owns the scheduler, calls ``worker.execute_model`` once per
step and counts broadcasts with :class:`runnercheck.broadcast.CollectiveCounter`. The
other ranks run ``worker.start_worker_execution_loop()`` until the driver stops them.
"""

import dataclasses
import hashlib
import json
import os
import pickle
import socket
import statistics
import subprocess
import sys
import tempfile
import time
import traceback
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch

from runnercheck.broadcast import CollectiveCounter
from runnercheck.demo.engine.config import (
    CacheConfig,
    DeviceConfig,
    LoRAConfig,
    ModelConfig,
    ParallelConfig,
    SchedulerConfig,
)
from runnercheck.demo.engine.loader import WORKERS, load_engine_package, load_worker_class
from runnercheck.demo.engine.parallel import destroy_distributed_environment
from runnercheck.demo.engine.scheduler import Scheduler
from runnercheck.demo.engine.sequence import ExecuteModelRequest
from runnercheck.demo.engine.workload import Request, WorkloadConfig, request_stream

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
            DeviceConfig(),
            cache_config,
            lora_config,
        )

    def workload(self) -> WorkloadConfig:
        if self.worker == "cpu":
            return WorkloadConfig(num_loras=0, lora_rate=0.0, embedding=self.embedding)
        return WorkloadConfig(embedding=self.embedding)


# ---------------------------------------------------------------------- one rank


def _build_worker(rank: int, spec: EngineSpec, init_method: str) -> Any:
    package = load_engine_package(spec.shape, spec.engine_dir)
    worker_cls = load_worker_class(package, spec.worker_path())
    model_config, parallel_config, scheduler_config, device_config, cache_config, lora_config = (
        spec.configs()
    )
    worker = worker_cls(
        model_config,
        parallel_config,
        scheduler_config,
        device_config,
        cache_config,
        local_rank=rank,
        rank=rank,
        distributed_init_method=init_method,
        lora_config=lora_config,
        is_driver_worker=rank == 0,
    )
    worker.init_device()
    worker.load_model()
    num_gpu_blocks, num_cpu_blocks = worker.determine_num_available_blocks()
    worker.initialize_cache(num_gpu_blocks, num_cpu_blocks)
    return worker


def _host_blocks_written(worker: Any) -> int:
    """Host (swap) cache blocks holding anything: > 0 once a swap-out reached this rank."""
    engine = getattr(worker, "cache_engine", None)
    if isinstance(engine, list):
        engine = engine[0] if engine else None
    cpu_cache = getattr(engine, "cpu_cache", None)
    if not cpu_cache or engine is None or engine.cpu_cache is engine.gpu_cache:
        return 0
    written = torch.zeros(cpu_cache[0].shape[1], dtype=torch.bool)
    for layer in cpu_cache:
        written |= layer.flatten(2).ne(0).any(-1).any(0)
    return int(written.sum())


def _schedule(spec: EngineSpec, scheduler: Scheduler, step: int) -> ExecuteModelRequest:
    if spec.scenario == "swap-only" and step == 2:
        return scheduler.preempt_all()
    return scheduler.schedule()


def _tokens_digest(scheduler: Scheduler) -> Tuple[str, Optional[str], int]:
    outputs: List[Any] = []
    embeddings: List[Any] = []
    for group in scheduler.all_groups():
        outputs.append([group.request_id, [seq.data.output_token_ids for seq in group.seqs]])
        if group.embedding is not None:
            embeddings.append([group.request_id, group.embedding])
    tokens = hashlib.sha256(json.dumps(outputs).encode()).hexdigest()
    embedding_digest = None
    if embeddings:
        embedding_digest = hashlib.sha256(json.dumps(embeddings).encode()).hexdigest()
    num = sum(len(tokens_) for _, seqs in outputs for tokens_ in seqs)
    return tokens, embedding_digest, num


def _drive(worker: Any, spec: EngineSpec) -> Dict[str, Any]:
    model_config, _, scheduler_config, _, cache_config, _ = spec.configs()
    scheduler = Scheduler(scheduler_config, dataclasses.replace(cache_config), model_config)
    stream: Iterator[Request] = request_stream(spec.seed, model_config, spec.workload())
    execute_times: List[float] = []
    step_walls: List[float] = []
    timed_tokens = 0
    with CollectiveCounter() as counter:
        for step in range(spec.steps):
            started = time.perf_counter()
            while scheduler.num_unfinished() < scheduler_config.max_num_seqs + 2:
                scheduler.add_request(next(stream))
            request = _schedule(spec, scheduler, step)
            kind = _step_kind(request)
            t0 = time.perf_counter()
            try:
                output = worker.execute_model(request)
            except Exception as exc:
                raise EngineRunError(f"step {step} ({kind}): {_one_line(exc)}") from exc
            execute_time = time.perf_counter() - t0
            counter.step()
            new_tokens = scheduler.process_outputs(output[0] if output else None)
            if step >= spec.warmup_steps:
                execute_times.append(execute_time)
                step_walls.append(time.perf_counter() - started)
                timed_tokens += new_tokens
    worker.execute_model(None)  # stop the other ranks' execution loops
    tokens_sha256, embeddings_sha256, num_tokens = _tokens_digest(scheduler)
    timed = sum(step_walls)
    return {
        "tokens_sha256": tokens_sha256,
        "embeddings_sha256": embeddings_sha256,
        "num_tokens": num_tokens,
        "warmup_steps": spec.warmup_steps,
        "tokens_per_s": timed_tokens / timed if timed > 0 else 0.0,
        "step_time_s": statistics.median(execute_times) if execute_times else 0.0,
        "step_times_s": execute_times,
        "broadcasts_per_step": statistics.fmean(counter.broadcasts_per_step or [0]),
        "broadcasts_per_step_list": counter.broadcasts_per_step,
        "collectives_per_step": statistics.fmean(counter.collectives_per_step or [0]),
        "scheduler": dataclasses.asdict(scheduler.stats),
        "host_blocks_written": _host_blocks_written(worker),
    }


def _step_kind(request: ExecuteModelRequest) -> str:
    if not request.seq_group_metadata_list:
        return "swap-only"
    return "prefill" if request.seq_group_metadata_list[0].is_prompt else "decode"


def _serve(worker: Any) -> Dict[str, Any]:
    """A non-driver rank: run the execution loop, remember what it received."""
    received: List[int] = []
    package_modules = [
        module
        for name, module in list(__import__("sys").modules.items())
        if module is not None
        and name.startswith(type(worker).__module__.rsplit(".", 1)[0] + ".")
        and callable(getattr(module, "broadcast_tensor_dict", None))
    ]
    originals = [(module, module.broadcast_tensor_dict) for module in package_modules]

    def recording(original: Any) -> Any:
        def broadcast(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            received.append(len(result) if isinstance(result, dict) else -1)
            return result

        return broadcast

    for module, original in originals:
        module.broadcast_tensor_dict = recording(original)
    try:
        with CollectiveCounter() as counter:
            worker.start_worker_execution_loop()
    finally:
        for module, original in originals:
            module.broadcast_tensor_dict = original
    return {
        "broadcasts_received": counter.broadcasts,
        "received_sizes": received,
        "stopped_by_driver": bool(received) and received[-1] == 0,
        "host_blocks_written": _host_blocks_written(worker),
    }


def _one_line(exc: BaseException) -> str:
    text = " ".join(str(exc).split()) or "(no message)"
    if len(text) > 300:
        text = text[:297] + "..."
    return f"{type(exc).__name__}: {text}"


def rank_main(rank: int, spec: EngineSpec, init_method: str, result_file: str) -> int:
    """Body of one rank's process: the outcome goes to ``result_file`` (pickled)."""
    torch.set_num_threads(spec.threads_per_rank)
    outcome: Tuple[bool, Any]
    try:
        worker = _build_worker(rank, spec, init_method)
        outcome = (True, _drive(worker, spec) if rank == 0 else _serve(worker))
    except BaseException as exc:  # reported to the parent as one line
        message = _one_line(exc)
        if os.environ.get("RUNNERCHECK_ENGINE_TRACEBACK"):
            message += "\n" + traceback.format_exc()
        outcome = (False, message)
    finally:
        destroy_distributed_environment()
    partial = result_file + ".part"
    with open(partial, "wb") as handle:
        pickle.dump(outcome, handle)
    os.replace(partial, result_file)
    return 0 if outcome[0] else 1


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
        env = dict(os.environ, OMP_NUM_THREADS=str(spec.threads_per_rank))
        processes: List[subprocess.Popen[bytes]] = []
        logs = []
        try:
            for rank in range(spec.tp):
                log = open(os.path.join(tmp, f"rank{rank}.log"), "wb")
                logs.append(log)
                command = [sys.executable, "-m", "runnercheck.demo.engine.rank"]
                command += [str(rank), spec_file, init_method, _result_file(tmp, rank)]
                processes.append(
                    subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env=env)
                )
            while len(outcome) < spec.tp:
                for rank, process in enumerate(processes):
                    if rank in outcome or process.poll() is None:
                        continue
                    outcome[rank] = _read_outcome(tmp, rank, process.returncode)
                if time.monotonic() > deadline:
                    for rank in range(spec.tp):
                        outcome.setdefault(rank, (False, "no result before the deadline"))
                    break
                time.sleep(0.02)
        finally:
            for process in processes:
                if process.poll() is None:
                    process.kill()
                process.wait()
            for log in logs:
                log.close()
    return outcome


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
    secondary = ("connection", "closed", "timed out", "timeout", "peer", "exited with code")

    def rank_key(item: Tuple[int, str]) -> Tuple[bool, int]:
        first_line = item[1].splitlines()[0].lower() if item[1] else ""
        return (any(word in first_line for word in secondary), item[0])

    rank, message = sorted(failures, key=rank_key)[0]
    return f"rank {rank}: {message.splitlines()[0]}"
