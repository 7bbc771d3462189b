"""What one GPU can show of the broadcast: the engine's step, merged or not, and fuzz.

1. ``step_dict``: the merged demo engine's real step dict (its worker input and model
   input, prepared by the engine on the device after a few real steps), split, sent
   and rebuilt with the reference ``broadcast_tensor_dict`` between two processes, as
   ONE merged broadcast (the worker's and the runner's dicts together) against TWO
   separate ones (the worker's dict, then the runner's, as the legacy shape sends
   them). The receiver rebuilds ``WorkerInput`` and the model input from what arrived.
   Both ranks use the one GPU: metadata goes over gloo, and so do the CUDA tensors,
   through host memory (a device-to-host copy on the sender, host-to-device on the
   receiver), since NCCL refuses two ranks on one device. It therefore shows the
   per-broadcast cost a merge saves (one metadata round, one set of allocations and
   synchronisations), not NCCL between GPUs. Time per step is rank 0's wall time over
   blocks of steps between barriers (the receiver synchronises its device first);
   blocks alternate (two, one), (one, two), ...; each pair gives one ratio two/one.
2. ``round_trips``: ``runnercheck fuzz`` of the engine's main input class
   (``ModelInputForGPUWithSamplingMetadata``) on the device: Hypothesis examples per
   second through the whole round trip (generation, hand-over to rank 0, broadcast,
   rebuilding, comparison), at world size 1 (NCCL on CUDA; the broadcast itself is a
   no-op with one rank) and 2 (gloo through host copies on one GPU); the same at world
   size 2 on the CPU is the baseline of the same run.

3. ``marginal_vs_raw``: fuzz's marginal rate against the raw broadcast of the same
   inputs at world size 2 on the device (``benchmarks/fuzz_rate.py``): what one more
   example costs fuzz, against the same dicts through the reference
   ``broadcast_tensor_dict`` alone. Target: at least half.

Figures are medians with min-max spread. ``--quick`` shrinks every count and leaves
out world size 1 (a rehearsal of the logic, not a measurement).

Usage::

    python benchmarks/bench_gpu.py [--device cuda] [--quick] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402

#: The step kinds measured, each with the real engine steps run before it.
WARM_STEPS = {"prefill": 0, "decode": 6}


@dataclasses.dataclass(frozen=True)
class Counts:
    steps: int = 50
    blocks: int = 10
    examples: int = 200
    reps: int = 3


QUICK = Counts(steps=3, blocks=1, examples=10, reps=1)


# ------------------------------------------------------------------ the engine's step


def engine_steps(device: str) -> dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]]:
    """For each step kind (``prefill``, ``decode``): the merged engine's worker dict and
    model-runner dict of one real step at tensor-parallel size 1 on ``device``, and what
    the step holds. The engine runs real steps (model included) until it has both."""
    from runnercheck.demo.engine.launcher import EngineSpec
    from runnercheck.demo.engine.rank import _build_worker
    from runnercheck.demo.engine.scheduler import Scheduler
    from runnercheck.demo.engine.workload import request_stream

    spec = EngineSpec(shape="merged", tp=1, device=device)
    worker = _build_worker(0, spec, "")
    model_config, _, scheduler_config, _, cache_config, _ = spec.configs()
    scheduler = Scheduler(scheduler_config, dataclasses.replace(cache_config), model_config)
    stream = request_stream(spec.seed, model_config, spec.workload())
    steps: dict[str, tuple[dict[str, Any], dict[str, Any], dict[str, Any]]] = {}
    for step in range(64):
        while scheduler.num_unfinished() < scheduler_config.max_num_seqs + 2:
            scheduler.add_request(next(stream))
        request = scheduler.schedule()
        groups = request.seq_group_metadata_list
        kind = "prefill" if groups and groups[0].is_prompt else "decode"
        if groups and kind not in steps and step >= WARM_STEPS[kind]:
            worker_input = worker.prepare_worker_input(request)
            model_input = worker.model_runner.prepare_model_input(groups, request.virtual_engine)
            worker_dict = dict(worker_input.as_broadcastable_tensor_dict())
            model_dict = dict(model_input.as_broadcastable_tensor_dict())
            model_dict["num_steps"] = request.num_steps
            about = describe({**worker_dict, **model_dict}, len(groups), step)
            steps[kind] = (worker_dict, model_dict, about)
        if len(steps) == len(WARM_STEPS):
            return steps
        output = worker.execute_model(request)
        scheduler.process_outputs(output[0] if output else None)
    raise RuntimeError(f"the engine scheduled no {set(WARM_STEPS) - set(steps)} step")


def describe(step: dict[str, Any], groups: int, index: int) -> dict[str, Any]:
    import torch

    from runnercheck.broadcast import split_tensor_dict

    metadata, tensors = split_tensor_dict(step)
    devices = sorted({t.device.type for t in tensors})
    return {
        "engine_step": index,
        "sequence_groups": groups,
        "keys": len(metadata),
        "tensors": {d: sum(t.device.type == d for t in tensors) for d in devices},
        "tensor_bytes": sum(t.numel() * t.element_size() for t in tensors),
        "dtypes": sorted({str(t.dtype).removeprefix("torch.") for t in tensors}),
        "torch": torch.__version__,
    }


def _step_functions(rank: int, worker_dict: dict[str, Any], model_dict: dict[str, Any]) -> Any:
    """One step of each shape: rank 0 sends, rank 1 receives and rebuilds the inputs."""
    from runnercheck.broadcast import broadcast_tensor_dict
    from runnercheck.demo.engine.attention import get_attn_backend
    from runnercheck.demo.engine.merged.model_runner import (
        ModelInputForGPUWithSamplingMetadata as model_cls,
    )
    from runnercheck.demo.engine.merged.worker_base import WorkerInput

    merged_dict = {**worker_dict, **model_dict}
    backend = get_attn_backend()

    def two() -> None:
        if rank == 0:
            broadcast_tensor_dict(worker_dict, src=0)
            broadcast_tensor_dict(model_dict, src=0)
            return
        first = broadcast_tensor_dict(None, src=0)
        second = broadcast_tensor_dict(None, src=0)
        assert first is not None and second is not None
        WorkerInput.from_broadcasted_tensor_dict(first)
        second.pop("num_steps")
        model_cls.from_broadcasted_tensor_dict(second, attn_backend=backend)

    def one() -> None:
        if rank == 0:
            broadcast_tensor_dict(merged_dict, src=0)
            return
        received = broadcast_tensor_dict(None, src=0)
        assert received is not None
        received.pop("num_steps")
        WorkerInput.from_broadcasted_tensor_dict(received)
        model_cls.from_broadcasted_tensor_dict(received, attn_backend=backend)

    return {"two": two, "one": one}


def _rank(rank: int, store: str, device: str, counts: Counts, out: str) -> None:
    import torch
    import torch.distributed as dist

    from runnercheck.broadcast import CollectiveCounter, set_groups

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if device == "cuda":
        torch.cuda.set_device(0)
    steps = engine_steps(device) if rank == 0 else {}
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=2)
    set_groups(cpu=None, device=None)  # metadata and tensors over the world group (gloo)

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    figures: dict[str, Any] = {}
    for kind in WARM_STEPS:
        worker_dict, model_dict, about = steps.get(kind, ({}, {}, {}))  # rank 0 sends
        shapes = _step_functions(rank, worker_dict, model_dict)
        per_step = {}
        for name, step in shapes.items():  # warm-up, and what one step sends
            with CollectiveCounter() as counter:
                step()
                counter.step()
            per_step[name] = {
                "broadcasts": counter.broadcasts_per_step[0],
                "collectives": counter.collectives_per_step[0],
                "bytes": counter.bytes_per_step[0],
            }
        times: dict[str, list[float]] = {"two": [], "one": []}
        for block in range(counts.blocks):
            for name in ("two", "one") if block % 2 == 0 else ("one", "two"):
                sync()
                dist.barrier()
                start = time.perf_counter()
                for _ in range(counts.steps):
                    shapes[name]()
                sync()
                dist.barrier()
                times[name].append((time.perf_counter() - start) / counts.steps)
        figures[kind] = {"step": about, "per_step_on_rank0": per_step, "times": times}
    if rank == 0:
        with open(out, "w", encoding="utf-8") as handle:
            json.dump(figures, handle)
    dist.destroy_process_group()


def bench_step_dict(device: str, counts: Counts, timeout: float = 100.0) -> dict[str, Any]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="runnercheck-bench-gpu-") as tmp:
        store, out = os.path.join(tmp, "store"), os.path.join(tmp, "figures.json")
        procs = [
            ctx.Process(target=_rank, args=(rank, store, device, counts, out), daemon=True)
            for rank in range(2)
        ]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout
        # a rank that fails ends the run at once: its peer would wait for it
        while time.monotonic() < deadline and any(p.is_alive() for p in procs):
            if any(p.exitcode not in (None, 0) for p in procs):
                break
            time.sleep(0.1)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
            proc.join()
        codes = [proc.exitcode for proc in procs]
        if codes != [0, 0] or not os.path.exists(out):
            raise RuntimeError(f"step-dict ranks ended with exit codes {codes} (0 = done)")
        with open(out, encoding="utf-8") as handle:
            raw = json.load(handle)
    result: dict[str, Any] = {}
    for kind, data in raw.items():
        two, one = data["times"]["two"], data["times"]["one"]
        result[kind] = {
            "step": data["step"],
            "per_step_on_rank0": data["per_step_on_rank0"],
            "two_broadcasts_ms_per_step": spread([1e3 * t for t in two]),
            "one_broadcast_ms_per_step": spread([1e3 * t for t in one]),
            "two_over_one": spread([a / b for a, b in zip(two, one, strict=True)]),
        }
    return {
        "measures": (
            "wall time per step on rank 0 for the engine's real step dict split, sent and "
            "rebuilt between 2 processes: two broadcasts (worker dict, then model-runner dict) "
            "against one merged broadcast"
        ),
        "device": device,
        "transport": (
            "gloo; CUDA tensors through host memory, both ranks on one GPU"
            if device == "cuda"
            else "gloo"
        ),
        "steps_per_block": counts.steps,
        "block_pairs": counts.blocks,
        **result,
    }


# ------------------------------------------------------------------ fuzz round trips


def bench_round_trips(device: str, world_size: int, counts: Counts) -> dict[str, Any]:
    from runnercheck.config import Config
    from runnercheck.demo.engine.attention import TinyAttentionBackend
    from runnercheck.demo.engine.merged.model_runner import ModelInputForGPUWithSamplingMetadata
    from runnercheck.fuzz import FuzzOptions, LocalGroup, Target, fuzz

    cls = ModelInputForGPUWithSamplingMetadata
    target = Target(cls, f"{cls.__module__}:{cls.__qualname__}")
    rates, shares = [], []
    options = FuzzOptions(world_size, device, counts.examples, attn_backend=TinyAttentionBackend)
    with LocalGroup(options.settings()) as group:
        transport = group.start().transport
        for rep in range(counts.reps):
            run = dataclasses.replace(options, seed=1000 + rep)
            start = time.perf_counter()
            report = fuzz([target], run, Config(), group)
            wall = time.perf_counter() - start
            result = report.results[0]
            if not result.passed:
                raise RuntimeError(f"the engine input failed to round-trip:\n{report.text()}")
            rates.append(result.examples / wall)
            t = result.timings
            # shares of the wall time: the round trip of one example overlaps the
            # generation of the next, so they add up to more than 1
            shares.append(
                {
                    "generation": t.generation / wall,
                    "round_trip": t.round_trip / wall,
                    "broadcast": t.broadcast / wall,
                    "comparison": t.comparison / wall,
                }
            )
    return {
        "device": device,
        "world_size": world_size,
        "transport": transport,
        "examples_per_run": counts.examples,
        "round_trips_per_s": spread(rates),
        "time_split": {k: round(statistics.median(s[k] for s in shares), 3) for k in shares[0]},
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cuda")
    parser.add_argument("--quick", action="store_true", help="tiny counts: a rehearsal")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    counts = QUICK if args.quick else Counts()
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            parser.error("--device cuda: torch sees no CUDA device")
    figures: dict[str, Any] = {"quick": args.quick}
    failed = False
    try:
        figures["step_dict"] = step = bench_step_dict(args.device, counts)
    except Exception as exc:  # the other figures still come
        failed = True
        figures["step_dict"] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"engine step dict: failed: {figures['step_dict']['error']}")
    else:
        print_step_dict(step)
    runs = [(args.device, 2)] if args.quick else [(args.device, 1), (args.device, 2)]
    if args.device != "cpu":
        runs.append(("cpu", 2))
    figures["round_trips"] = []
    for device, world_size in runs:
        try:
            rt = bench_round_trips(device, world_size, counts)
        except Exception as exc:
            failed = True
            error = f"{type(exc).__name__}: {exc}"
            figures["round_trips"].append(
                {"device": device, "world_size": world_size, "error": error}
            )
            print(f"fuzz round trips, {device}, world size {world_size}: failed: {error}")
            continue
        figures["round_trips"].append(rt)
        rate = rt["round_trips_per_s"]
        print(
            f"fuzz round trips, {device}, world size {world_size} ({rt['transport']}): "
            f"{rate['median']:.0f}/s (min {rate['min']:.0f}, max {rate['max']:.0f}; "
            f"{counts.reps} runs of {counts.examples} examples); split {rt['time_split']}"
        )
    from benchmarks import fuzz_rate

    try:
        rate = fuzz_rate.marginal_vs_raw(
            args.device, 2, *((5, 20, 1) if args.quick else (20, 200, 3))
        )
    except Exception as exc:
        failed = True
        figures["marginal_vs_raw"] = {"error": f"{type(exc).__name__}: {exc}"}
        print(f"fuzz marginal rate vs raw broadcast: failed: {figures['marginal_vs_raw']['error']}")
    else:
        figures["marginal_vs_raw"] = rate
        print(fuzz_rate.describe(rate))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 1 if failed else 0


def print_step_dict(step: dict[str, Any]) -> None:
    print(f"engine step dict, {step['transport']}; {step['measures']}:")
    for kind in WARM_STEPS:
        data, ratio = step[kind], step[kind]["two_over_one"]
        about = data["step"]
        print(
            f"  {kind} ({about['sequence_groups']} groups, {about['keys']} keys, tensors "
            f"{about['tensors']}, {about['tensor_bytes']} B): two "
            f"{data['two_broadcasts_ms_per_step']['median']:.3f} ms, one "
            f"{data['one_broadcast_ms_per_step']['median']:.3f} ms per step; two/one "
            f"{ratio['median']:.2f}x (min {ratio['min']:.2f}, max {ratio['max']:.2f}; "
            f"{step['block_pairs']} block pairs of {step['steps_per_block']} steps)"
        )


if __name__ == "__main__":
    raise SystemExit(main())
