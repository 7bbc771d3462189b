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
  when the ranks share one GPU). Its ranks start once; each repetition runs fuzz's
  two runs and then one raw pass through the dicts, so both rates are measured under
  the same load on the machine (a busy shared machine moved the raw rate alone by
  3x between runs).

The ranks alone: the same ``large`` inputs, pickled once, handed to rank 0 through the
same group as fuzz does (as many out at once as the search allows), each converted,
checked, broadcast, rebuilt and answered as in a fuzz run, with nothing generated and
nothing compared: what fuzz's ranks and hand-over allow where generation costs nothing;
with the CPU the ranks spend per example there (all their threads, gloo's included).

CPU, side by side (Linux): what one more example costs fuzz in CPU time, over the
process that runs Hypothesis and every rank (the same difference of medians, over
``large - small`` examples), against what one dict costs the raw broadcast's ranks.
Their ratio is the rate fuzz would reach against raw where CPU is the only limit, as
on a machine that other work keeps busy; it moves far less with that load than the
ratio of the rates does.

Target: fuzz's marginal rate at least half the raw rate.
"""

from __future__ import annotations

import contextlib
import dataclasses
import gc
import os
import pickle
import statistics
import tempfile
import time
from collections.abc import Callable
from typing import Any

from benchmarks.common import spread


def engine_input() -> tuple[type, Any]:
    from runnercheck.demo.engine.attention import TinyAttentionBackend
    from runnercheck.demo.engine.merged.model_runner import ModelInputForGPUWithSamplingMetadata

    return ModelInputForGPUWithSamplingMetadata, TinyAttentionBackend


def generation_run(strategy: Any, count: int, seed: int, test: Callable[[Any], None]) -> Any:
    """A function that runs ``test`` over ``count`` examples of ``strategy`` as a search
    generates them (no database, no deadline, no shrinking: every example passes)."""
    from hypothesis import HealthCheck, Phase, Verbosity, given, settings
    from hypothesis import seed as hypothesis_seed

    return settings(
        max_examples=count,
        deadline=None,
        database=None,
        phases=(Phase.generate,),
        suppress_health_check=list(HealthCheck),
        verbosity=Verbosity.quiet,
    )(hypothesis_seed(seed)(given(strategy)(test)))


def generated_inputs(
    count: int,
    seed: int,
    transport_dtypes: tuple[Any, ...],
    each: Callable[[Any], object] | None = None,
) -> list[Any]:
    """``count`` instances of the engine input, from fuzz's own strategy, as a search
    generates them; ``each`` is called with each one as it is made."""
    from runnercheck.fuzz.strategies import ALL_DTYPES, StrategyBuilder, TensorOptions

    cls, _ = engine_input()
    builder = StrategyBuilder({}, TensorOptions(dtypes=transport_dtypes, pickled_dtypes=ALL_DTYPES))
    found: list[Any] = []

    def collect(example: Any) -> None:
        found.append(example)
        if each is not None:
            each(example)

    once: contextlib.AbstractContextManager[object]
    try:
        from runnercheck.fuzz.prng import seeded_once

        once = seeded_once()
    except ImportError:  # a tree from before it
        once = contextlib.nullcontext()
    with once:  # as a search runs
        generation_run(builder.for_class(cls), count, seed, collect)()
    return found


def _raw_rank(rank: int, world: int, store: str, device: str, inputs: str, conn: Any) -> None:
    """A rank of the raw broadcast: join, load the dicts (rank 0), then on each "run"
    broadcast all of them once between two barriers (rank 0 answers the time), until
    "stop"."""
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
    conn.send(("ready", count))
    while conn.recv() == "run":
        sync()
        dist.barrier()
        start, cpu = time.perf_counter(), time.process_time()
        for i in range(count):
            broadcast_tensor_dict(dicts[i] if rank == 0 else None, src=0)
        sync()
        dist.barrier()
        conn.send((time.perf_counter() - start, time.process_time() - cpu))
    dist.destroy_process_group()


class RawBroadcast:
    """The raw broadcast's ranks, started once (``spawn``) and told when to send all the
    dicts once (:meth:`run`), so that its runs alternate with fuzz's under the same load
    on the machine."""

    def __init__(
        self, dicts: list[dict[str, Any]], world: int, device: str, timeout: float = 300.0
    ) -> None:
        import multiprocessing

        self.timeout = timeout
        self._tmp = tempfile.TemporaryDirectory(prefix="runnercheck-bench-raw-")
        store, inputs = (os.path.join(self._tmp.name, n) for n in ("store", "inputs"))
        with open(inputs, "wb") as handle:
            pickle.dump(dicts, handle)
        ctx = multiprocessing.get_context("spawn")
        self._conns = []
        self._procs = []
        for rank in range(world):
            parent, child = ctx.Pipe()
            proc = ctx.Process(
                target=_raw_rank, args=(rank, world, store, device, inputs, child), daemon=True
            )
            proc.start()
            child.close()
            self._conns.append(parent)
            self._procs.append(proc)
        try:
            ready = [self._answer(conn) for conn in self._conns]
        except BaseException:
            self.close()
            raise
        self.count = int(ready[0][1])
        #: CPU seconds of the last :meth:`run`, over all its ranks (all their threads).
        self.cpu_seconds = 0.0

    def _answer(self, conn: Any) -> Any:
        if not conn.poll(self.timeout):
            raise RuntimeError(f"the raw broadcast's ranks did not answer in {self.timeout:g} s")
        try:
            return conn.recv()
        except EOFError:
            codes = [proc.exitcode for proc in self._procs]
            raise RuntimeError(f"a raw broadcast rank ended (exit codes {codes})") from None

    def run(self) -> float:
        """Seconds to broadcast every dict once (:attr:`cpu_seconds`: what it cost)."""
        for conn in self._conns:
            conn.send("run")
        answers = [self._answer(conn) for conn in self._conns]
        self.cpu_seconds = sum(float(cpu) for _, cpu in answers)
        return float(answers[0][0])

    def close(self) -> None:
        for conn in self._conns:
            try:
                conn.send("stop")
            except OSError:
                pass
        for proc in self._procs:
            proc.join(timeout=10)
            if proc.is_alive():
                proc.kill()
                proc.join()
        self._tmp.cleanup()

    def __enter__(self) -> RawBroadcast:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def process_cpu(pid: int) -> float | None:
    """CPU seconds a process has spent so far, all its threads (None without /proc)."""
    try:
        with open(f"/proc/{pid}/stat") as handle:
            fields = handle.read().rsplit(")", 1)[1].split()
    except (OSError, IndexError):
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def ranks_cpu(group: Any) -> float | None:
    """CPU seconds spent so far by the ranks of ``group`` (None where they cannot be
    read, or from a group of an earlier commit that cannot name them)."""
    rank_pids = getattr(group, "rank_pids", None)
    if rank_pids is None:
        return None
    ranks = [process_cpu(pid) for pid in rank_pids()]
    if any(cpu is None for cpu in ranks):
        return None
    return sum(cpu for cpu in ranks if cpu is not None)


def group_cpu(group: Any) -> float | None:
    """CPU seconds spent so far by this process and the ranks of ``group`` (None as
    for :func:`ranks_cpu`)."""
    ranks = ranks_cpu(group)
    return None if ranks is None else time.process_time() + ranks


def ranks_alone(
    group: Any, cls: type, backend: Any, inputs: list[Any]
) -> tuple[float, float | None] | None:
    """Seconds for ``group``'s ranks to round-trip ``inputs`` handed over ready-made (see
    the module's docstring), and the CPU seconds the ranks spent on them (None where it
    cannot be read); None for a group of an earlier commit that cannot be fed that way."""
    from runnercheck.config import Config
    from runnercheck.fuzz import search, transfer
    from runnercheck.fuzz.roundtrip import Job

    if not all(hasattr(group, name) for name in ("submit", "collect", "room")):
        return None
    contract = Config().contract()
    job = Job(0, cls, contract.as_dict_method, contract.from_dict_method, backend)
    if group.start_job(job):
        raise RuntimeError("the ranks could not load the engine input")
    payloads = [transfer.dumps(example) for example in inputs]
    ahead = max(1, getattr(search, "LOOKAHEAD", 1))
    cpu = ranks_cpu(group)
    start = time.perf_counter()
    out = 0
    for payload in payloads:
        while out and (out >= ahead or not group.room(len(payload))):
            group.collect()
            out -= 1
        group.submit(payload)
        out += 1
    for _ in range(out):
        group.collect()
    seconds = time.perf_counter() - start
    cpu_after = ranks_cpu(group)
    return seconds, (None if cpu is None or cpu_after is None else cpu_after - cpu)


class MarginalRate:
    """fuzz's group and the raw broadcast's ranks, started once and warmed up; each
    :meth:`measure` runs its repetitions through them. Held open, so that a side-by-side
    (``fuzz_rate_baseline``) can take turns between two trees one measurement at a time,
    with nothing started or set up between the turns."""

    def __init__(self, device: str, world: int, small: int = 20, large: int = 200) -> None:
        self.device, self.world, self.small, self.large = device, world, small, large
        self._stack = contextlib.ExitStack()

    def __enter__(self) -> MarginalRate:
        from runnercheck.config import Config
        from runnercheck.fuzz import FuzzOptions, LocalGroup, Target, fuzz

        try:
            self.cls, self.backend = engine_input()
            self.target = Target(self.cls, f"{self.cls.__module__}:{self.cls.__qualname__}")
            self.options = FuzzOptions(
                self.world, self.device, self.large, attn_backend=self.backend
            )
            self.group = self._stack.enter_context(LocalGroup(self.options.settings()))
            info = self.group.start()
            self.transport = info.transport
            self.inputs = generated_inputs(self.large, 2000, tuple(info.dtypes))
            dicts = [example.as_broadcastable_tensor_dict() for example in self.inputs]
            self.raw = self._stack.enter_context(RawBroadcast(dicts, self.world, self.device))
            warm = dataclasses.replace(self.options, examples=self.small, seed=1)
            fuzz([self.target], warm, Config(), self.group)
            gc.freeze()  # as the command does before its search (torch's objects stay put)
        except BaseException:
            self._stack.close()
            raise
        return self

    def __exit__(self, *exc: object) -> None:
        self._stack.close()

    def measure(self, reps: int) -> dict[str, Any]:
        """Both rates and their ratio over ``reps`` repetitions (see the module's
        docstring). Each repetition runs fuzz (``small`` and ``large`` examples) and the
        raw broadcast (once through the ``large`` dicts) one after the other, so that
        both see the same load."""
        from runnercheck.config import Config
        from runnercheck.fuzz import fuzz

        small, large, group, raw = self.small, self.large, self.group, self.raw
        times: dict[int, list[float]] = {small: [], large: []}
        cpu: dict[int, list[float]] = {small: [], large: []}
        raw_times: list[float] = []
        raw_cpu: list[float] = []
        alone_times: list[float] = []
        alone_cpu: list[float] = []
        for rep in range(reps):
            for count in (small, large) if rep % 2 == 0 else (large, small):
                run = dataclasses.replace(self.options, examples=count, seed=2000 + rep)
                spent = group_cpu(group)
                start = time.perf_counter()
                report = fuzz([self.target], run, Config(), group)
                times[count].append(time.perf_counter() - start)
                after = group_cpu(group)
                if spent is not None and after is not None:
                    cpu[count].append(after - spent)
                if not report.passed:
                    raise RuntimeError(f"the engine input failed to round-trip:\n{report.text()}")
            alone = ranks_alone(group, self.cls, self.backend, self.inputs)
            if alone is not None:
                alone_times.append(alone[0])
                if alone[1] is not None:
                    alone_cpu.append(alone[1])
            raw_times.append(raw.run())
            raw_cpu.append(raw.cpu_seconds)
        return self._figures(times, cpu, raw_times, raw_cpu, alone_times, alone_cpu)

    def _figures(
        self,
        times: dict[int, list[float]],
        cpu: dict[int, list[float]],
        raw_times: list[float],
        raw_cpu: list[float],
        alone_times: list[float],
        alone_cpu: list[float],
    ) -> dict[str, Any]:
        small, large, raw_count = self.small, self.large, self.raw.count
        raw_per_s = spread([raw_count / t for t in raw_times])
        raw_figures = {"dicts": raw_count, "per_s": raw_per_s}
        extra = statistics.median(times[large]) - statistics.median(times[small])
        # a run of ``large`` that does not take longer than one of ``small`` (a machine
        # too busy to measure) gives no rate at all
        marginal = (large - small) / extra if extra > 0 else None
        ratio = marginal / raw_per_s["median"] if marginal is not None else None
        cpu_figures = None
        if cpu[small] and cpu[large]:
            extra_cpu = statistics.median(cpu[large]) - statistics.median(cpu[small])
            fuzz_ms = 1000 * extra_cpu / (large - small)
            raw_ms = 1000 * statistics.median(raw_cpu) / raw_count
            cpu_figures = {
                "fuzz_ms_per_example": fuzz_ms,
                "raw_ms_per_dict": raw_ms,
                "raw_over_fuzz": raw_ms / fuzz_ms if fuzz_ms > 0 else None,
            }
        alone_figures = None
        if alone_times:
            alone_per_s = spread([len(self.inputs) / t for t in alone_times])
            alone_figures = {
                "per_s": alone_per_s,
                "over_raw": alone_per_s["median"] / raw_per_s["median"],
                # summed over the repetitions: /proc counts CPU in ticks of 10 ms
                "ranks_cpu_ms_per_example": (
                    1000 * sum(alone_cpu) / (len(alone_cpu) * len(self.inputs))
                    if alone_cpu
                    else None
                ),
            }
        return {
            "device": self.device,
            "world_size": self.world,
            "transport": self.transport,
            "examples": {"small": small, "large": large},
            "fuzz_seconds": {str(n): spread(t) for n, t in times.items()},
            "fuzz_marginal_per_s": marginal,
            "raw_broadcast": raw_figures,
            "marginal_over_raw": ratio,
            "target_met": ratio is not None and ratio >= 0.5,
            "cpu": cpu_figures,
            "ranks_alone": alone_figures,
        }


def marginal_vs_raw(
    device: str, world: int, small: int = 20, large: int = 200, reps: int = 5
) -> dict[str, Any]:
    """Both rates and their ratio (:meth:`MarginalRate.measure`), with the ranks
    started for this measurement alone."""
    with MarginalRate(device, world, small, large) as rate:
        return rate.measure(reps)


def describe(figures: dict[str, Any]) -> str:
    return (
        _describe_rates(figures)
        + _describe_cpu(figures.get("cpu"))
        + _describe_alone(figures.get("ranks_alone"))
    )


def _describe_alone(alone: dict[str, Any] | None) -> str:
    if not alone:
        return ""
    rate = alone["per_s"]
    cpu = alone.get("ranks_cpu_ms_per_example")
    return (
        f"; the ranks alone (examples handed over ready-made, nothing generated or "
        f"compared): {rate['median']:.0f}/s [{rate['min']:.0f}-{rate['max']:.0f}] = "
        f"{alone['over_raw']:.2f} of raw"
        + (f", the ranks' CPU {cpu:.2f} ms per example" if cpu is not None else "")
    )


def _describe_cpu(cpu: dict[str, Any] | None) -> str:
    if not cpu:
        return ""
    ratio = cpu["raw_over_fuzz"]
    return (
        f"; CPU: fuzz {cpu['fuzz_ms_per_example']:.2f} ms per example (all processes), raw "
        f"{cpu['raw_ms_per_dict']:.2f} ms per dict: "
        + (f"{ratio:.2f}" if ratio is not None else "not measurable")
    )


def _describe_rates(figures: dict[str, Any]) -> str:
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
