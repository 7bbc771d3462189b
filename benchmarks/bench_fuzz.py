"""Benchmark ``runnercheck fuzz`` and the reference broadcast on a 2-rank gloo group.

1. Round trips per second for the engine's main input, the merged demo engine's
   ``ModelInputForGPUWithSamplingMetadata``: Hypothesis examples through a real
   2-process broadcast and back, with the time split into generation (Hypothesis),
   round trip (hand-over to rank 0, conversion, broadcast, rebuilding on rank 1,
   answers; of which the broadcast itself is shown apart) and comparison (snapshots and
   field-by-field comparison in the process that runs Hypothesis), as shares of the
   wall time: the round trip of one example overlaps the generation of the next, so
   the shares add up to more than 100%. One group serves every repetition, as in a
   real run.
2. One merged broadcast per step against the two legacy broadcasts (the worker's dict,
   then the model runner's), with the same content: a decode step of the demo engine
   (16 sequences). Blocks of steps alternate (legacy, merged), (merged, legacy), ...;
   each pair of blocks gives one ratio legacy/merged of the time per step.

3. One-example runs (``--one-example-runs``): ``runnercheck fuzz CLASS --examples 1`` as
   a command, this tree against an earlier commit (``--baseline``, default where this
   branch left ``main``; see ``benchmarks/baseline.py``), and ``python -c "import
   torch"`` beside them (the floor on a loaded machine), in rotating order, wall time
   (target: at most 2.5 s) and the children's CPU time.
4. fuzz's marginal rate against the raw broadcast of the same inputs at the same world
   size on the same device (``benchmarks/fuzz_rate.py``; target: at least half).

Figures are medians with min-max spread over repetitions.

Usage::

    python benchmarks/bench_fuzz.py [--examples 300] [--reps 3] [--steps 200]
                                    [--blocks 10] [--device cpu|cuda] [--json out.json]
                                    [--one-example-runs 5] [--baseline REF]
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import torch  # noqa: E402

from benchmarks import baseline, fuzz_rate  # noqa: E402
from benchmarks.common import spread  # noqa: E402
from runnercheck.config import Config  # noqa: E402
from runnercheck.fuzz import FuzzOptions, LocalGroup, Target, fuzz  # noqa: E402


def engine_input() -> tuple[type, Any]:
    from runnercheck.demo.engine.attention import TinyAttentionBackend
    from runnercheck.demo.engine.merged.model_runner import ModelInputForGPUWithSamplingMetadata

    return ModelInputForGPUWithSamplingMetadata, TinyAttentionBackend


def bench_round_trips(examples: int, reps: int, device: str) -> dict[str, Any]:
    cls, backend = engine_input()
    target = Target(cls, f"{cls.__module__}:{cls.__qualname__}")
    config = Config()
    rates, shares = [], []
    with LocalGroup(FuzzOptions(world_size=2, device=device).settings()) as group:
        for rep in range(reps):
            options = FuzzOptions(2, device, examples, seed=1000 + rep, attn_backend=backend)
            start = time.perf_counter()
            report = fuzz([target], options, config, group)
            wall = time.perf_counter() - start
            result = report.results[0]
            if not result.passed:
                raise SystemExit(f"the engine input failed to round-trip:\n{report.text()}")
            rates.append(result.examples / wall)
            t = result.timings
            # shares of the wall time: the round trip of one example overlaps the
            # generation of the next, so they add up to more than 100%
            shares.append(
                {
                    "generation": t.generation / wall,
                    "round_trip": t.round_trip / wall,
                    "broadcast": t.broadcast / wall,
                    "comparison": t.comparison / wall,
                    "ms_per_example": 1000 * wall / result.examples,
                }
            )
    return {
        "class": target.name,
        "examples": examples,
        "round_trips_per_s": spread(rates),
        "split": {k: statistics.median(s[k] for s in shares) for k in shares[0]},
    }


# ------------------------------------------------------------------ merged vs legacy


def step_dicts() -> tuple[dict[str, Any], dict[str, Any]]:
    """The worker's and the model runner's broadcast dicts of one decode step."""
    from runnercheck.demo.engine.attention import TinyAttentionMetadata
    from runnercheck.demo.engine.merged.model_runner import ModelInputForGPUWithSamplingMetadata
    from runnercheck.demo.engine.merged.worker_base import WorkerInput
    from runnercheck.demo.engine.sampling import SamplingMetadata

    seqs = 16
    seq_lens = torch.randint(32, 256, (seqs,))
    attn = TinyAttentionMetadata(
        num_prefills=0,
        num_prefill_tokens=0,
        num_decode_tokens=seqs,
        slot_mapping=torch.arange(seqs) * 16,
        seq_lens_tensor=seq_lens,
        context_lens_tensor=seq_lens - 1,
        query_start_loc=torch.arange(seqs + 1),
        block_tables=torch.randint(0, 512, (seqs, 16)),
        max_seq_len=int(seq_lens.max()),
    )
    model_input = ModelInputForGPUWithSamplingMetadata(
        input_tokens=torch.randint(0, 32000, (seqs,)),
        input_positions=seq_lens - 1,
        attn_metadata=attn,
        sampling_metadata=SamplingMetadata(None, torch.arange(seqs)),
    )
    worker_input = WorkerInput(
        num_seq_groups=seqs,
        blocks_to_swap_in=torch.empty(0, 2, dtype=torch.int64),
        blocks_to_swap_out=torch.empty(0, 2, dtype=torch.int64),
        blocks_to_copy=torch.empty(0, 2, dtype=torch.int64),
    )
    return worker_input.as_broadcastable_tensor_dict(), model_input.as_broadcastable_tensor_dict()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _broadcast_rank(rank: int, port: int, steps: int, blocks: int, queue: Any) -> None:
    import torch.distributed as dist

    from runnercheck.broadcast import CollectiveCounter, broadcast_tensor_dict

    os.environ.update(MASTER_ADDR="127.0.0.1", MASTER_PORT=str(port), GLOO_SOCKET_IFNAME="lo")
    torch.manual_seed(0)
    dist.init_process_group("gloo", rank=rank, world_size=2)
    worker, runner = step_dicts()
    merged = {**worker, **runner}

    def legacy_step() -> None:
        broadcast_tensor_dict(worker if rank == 0 else None, src=0)
        broadcast_tensor_dict(runner if rank == 0 else None, src=0)

    def merged_step() -> None:
        broadcast_tensor_dict(merged if rank == 0 else None, src=0)

    shapes = {"legacy": legacy_step, "merged": merged_step}
    counts = {}
    for name, step in shapes.items():  # warm-up, and the collectives per step
        with CollectiveCounter() as counter:
            step()
            counter.step()
        counts[name] = {
            "broadcasts": counter.broadcasts_per_step[0],
            "collectives": counter.collectives_per_step[0],
            "bytes_sent": counter.bytes_per_step[0],
        }
    times: dict[str, list[float]] = {"legacy": [], "merged": []}
    for block in range(blocks):
        order = ("legacy", "merged") if block % 2 == 0 else ("merged", "legacy")
        for name in order:
            dist.barrier()
            start = time.perf_counter()
            for _ in range(steps):
                shapes[name]()
            dist.barrier()
            times[name].append((time.perf_counter() - start) / steps)
    if rank == 0:
        queue.put({"times": times, "counts": counts})
    dist.destroy_process_group()


def bench_merged_vs_legacy(steps: int, blocks: int) -> dict[str, Any]:
    import torch.multiprocessing as mp

    ctx = mp.get_context("spawn")
    queue = ctx.Queue()
    port = _free_port()
    procs = [
        ctx.Process(target=_broadcast_rank, args=(r, port, steps, blocks, queue)) for r in range(2)
    ]
    for proc in procs:
        proc.start()
    try:
        data = queue.get(timeout=600)
    finally:
        for proc in procs:
            proc.join(timeout=30)
            if proc.is_alive():
                proc.kill()
    legacy, merged = data["times"]["legacy"], data["times"]["merged"]
    ratios = [lg / mg for lg, mg in zip(legacy, merged, strict=True)]
    return {
        "steps_per_block": steps,
        "blocks": blocks,
        "per_step": data["counts"],
        "legacy_ms_per_step": spread([1000 * t for t in legacy]),
        "merged_ms_per_step": spread([1000 * t for t in merged]),
        "legacy_over_merged": spread(ratios),
    }


ONE_EXAMPLE = [
    "fuzz",
    "runnercheck.demo.engine.merged.model_runner:ModelInputForGPUWithSamplingMetadata",
    "--examples",
    "1",
    "--attn-backend",
    "runnercheck.demo.engine.attention:TinyAttentionBackend",
]


#: The floor of any run: a Python that imports torch and ends.
IMPORT_TORCH = [sys.executable, "-c", "import torch"]


def bench_one_example(runs: int, ref: str, device: str) -> dict[str, Any]:
    """``runnercheck fuzz CLASS --examples 1``: before and after, and ``python -c
    "import torch"`` beside them, in rotating order. CPU is what the command's
    descendants that it waited for spent (a fork server it leaves to exit alone is not
    counted: the before side's torch import in its fork server is missing there)."""
    args = [*ONE_EXAMPLE, "--device", device]
    names = ("before", "after", "import_torch")
    wall: dict[str, list[float]] = {name: [] for name in names}
    cpu: dict[str, list[float]] = {name: [] for name in names}
    with baseline.temporary() as tmp:
        trees = baseline.before_and_after(ref, tmp)
        for run in range(runs):
            for name in names[run % 3 :] + names[: run % 3]:
                if name == "import_torch":
                    cmd, env = IMPORT_TORCH, None
                else:
                    cmd, env = baseline.runnercheck_command(trees[name], args)
                spent, seconds, code = baseline.timed_command(cmd, Path(tmp), env)
                if code != 0:
                    raise SystemExit(f"bench_fuzz: the one-example run ({name}) exited {code}")
                wall[name].append(seconds)
                cpu[name].append(spent)
    median = {name: statistics.median(samples) for name, samples in wall.items()}
    return {
        "baseline": baseline.short(ref),
        "device": device,
        "wall_s": {name: spread(samples) for name, samples in wall.items()},
        "cpu_s": {name: spread(samples) for name, samples in cpu.items()},
        "after_over_before_wall": median["after"] / median["before"],
        "after_over_import_torch_wall": median["after"] / median["import_torch"],
        "before_over_import_torch_wall": median["before"] / median["import_torch"],
        "target_met": median["after"] <= 2.5,
    }


def report_round_trips(examples: int, reps: int, device: str) -> dict[str, Any]:
    round_trips = bench_round_trips(examples, reps, device)
    rt = round_trips["round_trips_per_s"]
    split = round_trips["split"]
    print(f"fuzz round trips ({round_trips['class']}, world size 2, {device}, gloo):")
    print(
        f"  {rt['median']:.0f} round trips/s (min {rt['min']:.0f}, max {rt['max']:.0f}; "
        f"{reps} runs of {examples} examples)"
    )
    print(
        f"  {split['ms_per_example']:.2f} ms per example: generation {split['generation']:.0%}, "
        f"round trip {split['round_trip']:.0%} (broadcast itself {split['broadcast']:.0%}), "
        f"comparison {split['comparison']:.0%} of the wall time (the first two overlap)"
    )
    return round_trips


def report_merged_vs_legacy(steps: int, blocks: int) -> dict[str, Any]:
    versus = bench_merged_vs_legacy(steps, blocks)
    ratio = versus["legacy_over_merged"]
    counts = versus["per_step"]
    print("one merged broadcast vs two legacy broadcasts per step (decode step, 16 sequences):")
    print(
        f"  per step on rank 0: legacy {counts['legacy']['broadcasts']} broadcasts, "
        f"{counts['legacy']['collectives']} collectives, {counts['legacy']['bytes_sent']} B; "
        f"merged {counts['merged']['broadcasts']} broadcast, "
        f"{counts['merged']['collectives']} collectives, {counts['merged']['bytes_sent']} B"
    )
    print(
        f"  legacy {versus['legacy_ms_per_step']['median']:.3f} ms/step, merged "
        f"{versus['merged_ms_per_step']['median']:.3f} ms/step: legacy/merged "
        f"{ratio['median']:.2f}x (min {ratio['min']:.2f}, max {ratio['max']:.2f}; "
        f"{blocks} interleaved block pairs of {steps} steps)"
    )
    return versus


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--examples", type=int, default=300, help="examples per repetition")
    parser.add_argument("--reps", type=int, default=3, help="fuzz repetitions (default 3; 0: skip)")
    parser.add_argument("--steps", type=int, default=200, help="steps per timed block")
    parser.add_argument("--blocks", type=int, default=10, help="timed blocks per shape (0: skip)")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--one-example-runs", type=int, default=5, help="one-example runs each (0: skip)"
    )
    parser.add_argument("--baseline", default=None, help="the before commit of those runs")
    parser.add_argument(
        "--rate-reps", type=int, default=5, help="marginal-vs-raw repetitions (0: skip)"
    )
    args = parser.parse_args()
    figures: dict[str, Any] = {}
    if args.one_example_runs > 0:
        one = bench_one_example(
            args.one_example_runs, args.baseline or baseline.default_ref(), args.device
        )
        figures["one_example"] = one
        print(
            f"one-example run ({args.device}), wall, medians of {args.one_example_runs}: "
            f"before ({one['baseline']}) {one['wall_s']['before']['median']:.2f}s "
            f"[{one['wall_s']['before']['min']:.2f}-{one['wall_s']['before']['max']:.2f}], "
            f"after {one['wall_s']['after']['median']:.2f}s "
            f"[{one['wall_s']['after']['min']:.2f}-{one['wall_s']['after']['max']:.2f}]: "
            f"{one['after_over_before_wall']:.2f}x; CPU before "
            f"{one['cpu_s']['before']['median']:.2f}s, after {one['cpu_s']['after']['median']:.2f}s"
            f" (target <= 2.5 s wall: {'met' if one['target_met'] else 'NOT met'})"
        )
        torch_wall = one["wall_s"]["import_torch"]
        print(
            f"  beside python -c 'import torch': {torch_wall['median']:.2f}s "
            f"[{torch_wall['min']:.2f}-{torch_wall['max']:.2f}] wall, "
            f"{one['cpu_s']['import_torch']['median']:.2f}s CPU; before "
            f"{one['before_over_import_torch_wall']:.2f}x of it, after "
            f"{one['after_over_import_torch_wall']:.2f}x"
        )
    if args.rate_reps > 0:
        rate = fuzz_rate.marginal_vs_raw(args.device, 2, reps=args.rate_reps)
        figures["marginal_vs_raw"] = rate
        print(fuzz_rate.describe(rate))
    if args.reps > 0:
        figures["round_trips"] = report_round_trips(args.examples, args.reps, args.device)
    if args.device == "cpu" and args.blocks > 0:
        figures["merged_vs_legacy"] = report_merged_vs_legacy(args.steps, args.blocks)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
