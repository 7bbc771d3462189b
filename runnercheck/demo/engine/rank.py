"""One rank's process: ``python -m runnercheck.demo.engine.rank RANK SPEC INIT RESULT``.

Rank 0 is the driver: it owns the scheduler, calls ``worker.execute_model`` once per
step and counts broadcasts with :class:`runnercheck.broadcast.CollectiveCounter`. The
other ranks run ``worker.start_worker_execution_loop()`` until the driver stops them.
The outcome, ``(ok, figures or one-line error)``, is pickled to RESULT.
"""

import dataclasses
import functools
import hashlib
import json
import os
import pickle
import statistics
import sys
import time
import traceback
from typing import Any, Dict, Iterator, List, Optional, Tuple

import torch

from runnercheck.broadcast import CollectiveCounter
from runnercheck.demo.engine.launcher import EngineRunError, EngineSpec
from runnercheck.demo.engine.loader import load_engine_package, load_worker_class
from runnercheck.demo.engine.parallel import destroy_distributed_environment
from runnercheck.demo.engine.scheduler import Scheduler
from runnercheck.demo.engine.sequence import ExecuteModelRequest
from runnercheck.demo.engine.workload import Request, request_stream


def _build_worker(rank: int, spec: EngineSpec, init_method: str) -> Any:
    if spec.device == "cuda":
        if not torch.cuda.is_available():
            raise EngineRunError("device cuda: torch sees no CUDA device")
        torch.cuda.set_device(rank % torch.cuda.device_count())
    package = load_engine_package(spec.shape, spec.engine_dir)
    worker_cls: Any = load_worker_class(package, spec.worker_path())
    if spec.num_speculative_tokens:
        from runnercheck.demo.engine import spec_decode

        spec_package: Any = spec_decode
        if spec.spec_decode_dir is not None:
            spec_package = load_engine_package(engine_dir=spec.spec_decode_dir)
        worker_cls = functools.partial(
            spec_package.create_spec_worker, num_speculative_tokens=spec.num_speculative_tokens
        )
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


def _tokens_digest(scheduler: Scheduler) -> Tuple[str, Optional[str], int, List[Any]]:
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
    return tokens, embedding_digest, num, outputs


def _drive(worker: Any, spec: EngineSpec) -> Dict[str, Any]:
    model_config, _, scheduler_config, _, _, _ = spec.configs()
    scheduler = _make_scheduler(spec)
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
            if spec.num_speculative_tokens:
                from runnercheck.demo.engine.spec_decode.scheduler import SpecScheduler

                assert isinstance(scheduler, SpecScheduler)
                new_tokens = scheduler.process_spec_outputs(output)
            else:
                new_tokens = scheduler.process_outputs(output[0] if output else None)
            if step >= spec.warmup_steps:
                execute_times.append(execute_time)
                step_walls.append(time.perf_counter() - started)
                timed_tokens += new_tokens
    worker.execute_model(None)  # stop the other ranks' execution loops
    tokens_sha256, embeddings_sha256, num_tokens, token_ids = _tokens_digest(scheduler)
    timed = sum(step_walls)
    return {
        "tokens_sha256": tokens_sha256,
        "embeddings_sha256": embeddings_sha256,
        "num_tokens": num_tokens,
        #: ``[request_id, [output token ids of each sequence]]`` per request, in order.
        "token_ids": token_ids,
        "warmup_steps": spec.warmup_steps,
        "tokens_per_s": timed_tokens / timed if timed > 0 else 0.0,
        "step_time_s": statistics.median(execute_times) if execute_times else 0.0,
        "step_times_s": execute_times,
        "broadcasts_per_step": statistics.fmean(counter.broadcasts_per_step or [0]),
        "broadcasts_per_step_list": counter.broadcasts_per_step,
        "collectives_per_step": statistics.fmean(counter.collectives_per_step or [0]),
        "scheduler": dataclasses.asdict(scheduler.stats),
        "host_blocks_written": _host_blocks_written(worker),
        "finished_outputs": {
            group.request_id: [seq.data.output_token_ids for seq in group.seqs]
            for group in scheduler.finished
        },
        "acceptance_rate": getattr(worker, "acceptance_rate", lambda: None)(),
    }


def _make_scheduler(spec: EngineSpec) -> Scheduler:
    model_config, _, scheduler_config, _, cache_config, _ = spec.configs()
    cache_config = dataclasses.replace(cache_config)
    if spec.num_speculative_tokens:
        from runnercheck.demo.engine.spec_decode.scheduler import SpecScheduler

        return SpecScheduler(
            scheduler_config, cache_config, model_config, spec.num_speculative_tokens
        )
    return Scheduler(scheduler_config, cache_config, model_config)


def _step_kind(request: ExecuteModelRequest) -> str:
    if not request.seq_group_metadata_list:
        return "swap-only"
    return "prefill" if request.seq_group_metadata_list[0].is_prompt else "decode"


#: The name the engine modules import the broadcast under (module-level, as vLLM does).
_BROADCAST = "broadcast_tensor_dict"


def _serve(worker: Any) -> Dict[str, Any]:
    """A non-driver rank: run the execution loop, remember what it received."""
    received: List[int] = []
    package_modules = [
        module
        for name, module in list(sys.modules.items())
        if module is not None
        and name.startswith(type(worker).__module__.rsplit(".", 1)[0] + ".")
        and callable(getattr(module, _BROADCAST, None))
    ]
    originals = [(module, getattr(module, _BROADCAST)) for module in package_modules]

    def recording(original: Any) -> Any:
        def broadcast(*args: Any, **kwargs: Any) -> Any:
            result = original(*args, **kwargs)
            received.append(len(result) if isinstance(result, dict) else -1)
            return result

        return broadcast

    for module, original in originals:
        setattr(module, _BROADCAST, recording(original))
    try:
        with CollectiveCounter() as counter:
            worker.start_worker_execution_loop()
    finally:
        for module, original in originals:
            setattr(module, _BROADCAST, original)
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


def main(argv: List[str]) -> int:
    rank, spec_file, init_method, result_file = argv
    with open(spec_file, "rb") as handle:
        spec = pickle.load(handle)
    return rank_main(int(rank), spec, init_method, result_file)


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
