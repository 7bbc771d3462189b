"""fuzz's marginal rate against the raw broadcast of the same inputs, side by side.

* fuzz, marginal: ``runnercheck fuzz`` of the merged demo engine's main input
  (``ModelInputForGPUWithSamplingMetadata``) through one warm group, runs of ``small``
  and ``large`` examples alternating; the marginal rate is
  ``(large - small) / (time(large) - time(small))``, medians over repetitions: what one
  more example costs (generation, hand-over, broadcast, rebuilding, comparison),
  without the start-up.
* raw: the inputs the same strategy generates (``large`` of them, same seed), turned
  into their broadcast dicts (``as_broadcastable_tensor_dict()``) once, then sent
  by rank 0 with the reference ``broadcast_tensor_dict`` and received on the others,
  nothing else: no generation, no rebuilding, no comparison. Same world size, same
  device, same transport as fuzz uses there (gloo; CUDA tensors through host memory
  when the ranks share one GPU).

Target: fuzz's marginal rate at least half the raw rate.
"""

from __future__ import annotations

import dataclasses
import gc
import os
import pickle
import statistics
import tempfile
import time
from typing import Any

from benchmarks.common import spread


def engine_input() -> tuple[type, Any]:
    from runnercheck.demo.engine.attention import TinyAttentionBackend
    from runnercheck.demo.engine.merged.model_runner import ModelInputForGPUWithSamplingMetadata

    return ModelInputForGPUWithSamplingMetadata, TinyAttentionBackend


def generated_inputs(count: int, seed: int, transport_dtypes: tuple[Any, ...]) -> list[Any]:
    """``count`` instances of the engine input, from fuzz's own strategy."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    from runnercheck.fuzz.strategies import ALL_DTYPES, StrategyBuilder, TensorOptions

    cls, _ = engine_input()
    builder = StrategyBuilder({}, TensorOptions(dtypes=transport_dtypes, pickled_dtypes=ALL_DTYPES))
    found: list[Any] = []

    @settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )
    @hypothesis_seed(seed)
    @given(builder.for_class(cls))
    def collect(example: Any) -> None:
        found.append(example)

    collect()
    return found


def _raw_rank(
    rank: int, world: int, store: str, device: str, inputs: str, reps: int, out: str
) -> None:
    import torch
    import torch.distributed as dist

    from runnercheck.broadcast import broadcast_tensor_dict, set_groups

    os.environ.setdefault("GLOO_SOCKET_IFNAME", "lo")
    if device == "cuda":
        torch.cuda.set_device(0)
    dist.init_process_group("gloo", init_method=f"file://{store}", rank=rank, world_size=world)
    set_groups(cpu=None, device=None)  # as fuzz on one machine: gloo for everything
    dicts: list[dict[str, Any]] = []
    if rank == 0:
        with open(inputs, "rb") as handle:
            dicts = pickle.load(handle)
        if device == "cuda":
            dicts = [
                {k: v.to(device) if isinstance(v, torch.Tensor) else v for k, v in d.items()}
                for d in dicts
            ]
    count = len(dicts) if rank == 0 else 0
    sizes = [count]
    dist.broadcast_object_list(sizes, src=0)
    count = sizes[0]

    def sync() -> None:
        if device == "cuda":
            torch.cuda.synchronize()

    for i in range(min(count, 5)):  # warm-up
        broadcast_tensor_dict(dicts[i] if rank == 0 else None, src=0)
    times = []
    for _ in range(reps):
        sync()
        dist.barrier()
        start = time.perf_counter()
        for i in range(count):
            broadcast_tensor_dict(dicts[i] if rank == 0 else None, src=0)
        sync()
        dist.barrier()
        times.append(time.perf_counter() - start)
    if rank == 0:
        with open(out, "wb") as handle:
            pickle.dump({"count": count, "times": times}, handle)
    dist.destroy_process_group()


def raw_rate(
    dicts: list[dict[str, Any]], world: int, device: str, reps: int, timeout: float = 300.0
) -> dict[str, Any]:
    import multiprocessing

    ctx = multiprocessing.get_context("spawn")
    with tempfile.TemporaryDirectory(prefix="runnercheck-bench-raw-") as tmp:
        store, out, inputs = (os.path.join(tmp, n) for n in ("store", "out", "inputs"))
        with open(inputs, "wb") as handle:
            pickle.dump(dicts, handle)
        procs = [
            ctx.Process(
                target=_raw_rank, args=(r, world, store, device, inputs, reps, out), daemon=True
            )
            for r in range(world)
        ]
        for proc in procs:
            proc.start()
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline and any(p.is_alive() for p in procs):
            if any(p.exitcode not in (None, 0) for p in procs):
                break
            time.sleep(0.05)
        for proc in procs:
            if proc.is_alive():
                proc.kill()
            proc.join()
        codes = [proc.exitcode for proc in procs]
        if codes != [0] * world or not os.path.exists(out):
            raise RuntimeError(f"raw broadcast ranks ended with exit codes {codes} (0 = done)")
        with open(out, "rb") as handle:
            data = pickle.load(handle)
    rates = [data["count"] / t for t in data["times"]]
    return {"dicts": data["count"], "per_s": spread(rates)}


def marginal_vs_raw(
    device: str, world: int, small: int = 20, large: int = 200, reps: int = 5
) -> dict[str, Any]:
    """Both rates and their ratio (see the module's docstring)."""
    from runnercheck.config import Config
    from runnercheck.fuzz import FuzzOptions, LocalGroup, Target, fuzz

    cls, backend = engine_input()
    target = Target(cls, f"{cls.__module__}:{cls.__qualname__}")
    options = FuzzOptions(world, device, large, attn_backend=backend)
    times: dict[int, list[float]] = {small: [], large: []}
    with LocalGroup(options.settings()) as group:
        info = group.start()
        fuzz([target], dataclasses.replace(options, examples=small, seed=1), Config(), group)
        gc.freeze()  # as the command does before its search (torch's objects stay put)
        for rep in range(reps):
            for count in (small, large) if rep % 2 == 0 else (large, small):
                run = dataclasses.replace(options, examples=count, seed=2000 + rep)
                start = time.perf_counter()
                report = fuzz([target], run, Config(), group)
                times[count].append(time.perf_counter() - start)
                if not report.passed:
                    raise RuntimeError(f"the engine input failed to round-trip:\n{report.text()}")
        dtypes = tuple(info.dtypes)
        transport = info.transport
    inputs = generated_inputs(large, 2000, dtypes)
    dicts = [example.as_broadcastable_tensor_dict() for example in inputs]
    raw = raw_rate(dicts, world, device, reps)
    extra = statistics.median(times[large]) - statistics.median(times[small])
    # a run of ``large`` that does not take longer than one of ``small`` (a machine
    # too busy to measure) gives no rate at all
    marginal = (large - small) / extra if extra > 0 else None
    ratio = marginal / raw["per_s"]["median"] if marginal is not None else None
    return {
        "device": device,
        "world_size": world,
        "transport": transport,
        "examples": {"small": small, "large": large},
        "fuzz_seconds": {str(n): spread(t) for n, t in times.items()},
        "fuzz_marginal_per_s": marginal,
        "raw_broadcast": raw,
        "marginal_over_raw": ratio,
        "target_met": ratio is not None and ratio >= 0.5,
    }


def describe(figures: dict[str, Any]) -> str:
    fuzz_rate, raw = figures["fuzz_marginal_per_s"], figures["raw_broadcast"]["per_s"]
    if fuzz_rate is None:
        return (
            f"fuzz marginal rate vs raw broadcast, {figures['device']}: not measurable "
            f"(runs of {figures['examples']['large']} examples took no longer than runs of "
            f"{figures['examples']['small']}: {figures['fuzz_seconds']}); raw "
            f"{raw['median']:.0f}/s"
        )
    return (
        f"fuzz marginal rate vs raw broadcast, {figures['device']}, world size "
        f"{figures['world_size']} ({figures['transport']}): fuzz "
        f"{fuzz_rate:.0f}/s (median times of runs of {figures['examples']['large']} minus {figures['examples']['small']} "
        f"examples), raw {raw['median']:.0f}/s [{raw['min']:.0f}-{raw['max']:.0f}] "
        f"({figures['raw_broadcast']['dicts']} dicts): {figures['marginal_over_raw']:.2f} "
        f"(target >= 0.5: {'met' if figures['target_met'] else 'NOT met'})"
    )
