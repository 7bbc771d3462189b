"""Benchmark ``runnercheck trace``: what recording every collective costs the engine's step.

The shipped engine runs at ``--tp 2`` (gloo on loopback) with and without tracing (a
:class:`runnercheck.trace.TraceSession` around ``run_engine``: every rank records every
collective, and the monitor reads the files while the run goes on). Repetitions
alternate (plain, traced), (traced, plain), ... and each pair gives one ratio
traced/plain of

* ``step_time_s``: the median time of the driver's ``worker.execute_model`` over the
  timed steps (a step runs the broadcast parts and the model's all-reduces: about 13
  collectives in the merged shape, 53 with ``--speculative 3``), and
* the mean of the fastest tenth of those steps, the figure least disturbed by other load
  on a shared machine.

The traced runs also give the CPU time the driver's recorder itself spent per step (its
``thread_time`` around each call, outside the collective), against the plain step time.

Both runs of a pair must produce the same tokens, and the traced run's broadcasts per
step must equal the engine's own counter. A second figure isolates the recorder: the
time of one ``torch.distributed.broadcast`` of a small tensor on a one-rank gloo group,
recorded and not, 30 frames below a step method (about the engine's depth), and the
CPU time the recorder itself spent per call there (the least noisy figure of its cost).

Usage::

    python benchmarks/bench_trace.py [--reps 6] [--steps 48] [--warmup-steps 4]
                                     [--shape merged] [--speculative 0] [--json out.json]
    python benchmarks/bench_trace.py --recorder-only   # the recorder's figures alone
"""

from __future__ import annotations

import argparse
import json
import socket
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from runnercheck.demo.engine import run_engine  # noqa: E402
from runnercheck.trace import Recorder, TraceOptions, TraceSession  # noqa: E402


def engine_run(
    args: argparse.Namespace, traced: bool
) -> tuple[dict[str, Any], list[int], float | None]:
    kwargs: dict[str, Any] = dict(
        tp=args.tp,
        steps=args.steps,
        seed=args.seed,
        warmup_steps=args.warmup_steps,
        num_speculative_tokens=args.speculative,
    )
    if not traced:
        return run_engine(args.shape, **kwargs), [], None
    with TraceSession(TraceOptions(deadline=60)) as session:
        result = run_engine(args.shape, **kwargs)
    assert session.report is not None
    if not session.report.ok:
        raise SystemExit("error: " + "; ".join(session.report.problems()))
    world = session.report.world()
    steps = world.broadcasts_per_step(0)
    seconds, _ = world.costs.get(0, (0.0, 0))
    return result, steps, seconds / len(steps)


def fast_steps(result: dict[str, Any]) -> float:
    """Mean time of the fastest tenth of a run's timed steps."""
    times = sorted(result["step_times_s"])
    fastest = times[: max(1, len(times) // 10)]
    return sum(fastest) / len(fastest)


def recorder_cost(calls: int, depth: int) -> dict[str, float]:
    """Microseconds per ``broadcast`` call, plain and recorded, ``depth`` frames below a
    step method (best of 5 runs of ``calls`` each)."""
    import torch
    import torch.distributed as dist

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    dist.init_process_group("gloo", init_method=f"tcp://127.0.0.1:{port}", rank=0, world_size=1)
    tensor = torch.zeros(16, dtype=torch.int64)

    def forward(level: int) -> float:
        if level:
            return forward(level - 1)
        started = time.perf_counter()
        for _ in range(calls):
            dist.broadcast(tensor, src=0)
        return (time.perf_counter() - started) / calls

    def execute_model() -> float:
        """A step method, with ``depth`` frames between it and the collective."""
        return forward(depth)

    plain: list[float] = []
    recorded: list[float] = []
    recording: list[float] = []
    try:
        for _ in range(5):
            plain.append(execute_model())
            with Recorder() as recorder:
                recorded.append(execute_model())
            recording.append(recorder.seconds / recorder.calls)
    finally:
        dist.destroy_process_group()
    return {
        "plain_us": min(plain) * 1e6,
        "recorded_us": min(recorded) * 1e6,
        "added_us": (min(recorded) - min(plain)) * 1e6,
        "recorder_cpu_us": min(recording) * 1e6,
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=6, help="runs of each kind (default 6)")
    parser.add_argument("--steps", type=int, default=48, help="engine steps per run")
    parser.add_argument("--warmup-steps", type=int, default=4, help="untimed steps per run")
    parser.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (default 2)")
    parser.add_argument("--shape", choices=("legacy", "merged"), default="merged")
    parser.add_argument("--speculative", type=int, default=0, metavar="K")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--recorder-only",
        action="store_true",
        help="only the recorder's figures: one broadcast 30 frames deep (no engine runs)",
    )
    args = parser.parse_args(argv)
    if args.recorder_only:
        cost = recorder_cost(calls=2000, depth=30)
        print(
            f"one broadcast, 30 frames deep: {cost['plain_us']:.1f} us plain, "
            f"{cost['recorded_us']:.1f} us recorded, "
            f"{cost['recorder_cpu_us']:.2f} us of it the recorder's CPU time"
        )
        if args.json:
            args.json.write_text(json.dumps(cost, indent=2) + "\n")
        return 0
    if args.reps < 1 or args.steps <= args.warmup_steps or args.tp < 2:
        parser.error("need --reps >= 1, --steps > --warmup-steps and --tp >= 2")

    started = time.perf_counter()
    runs: dict[bool, list[dict[str, Any]]] = {False: [], True: []}
    recording: list[float] = []
    for rep in range(args.reps):
        for traced in (False, True) if rep % 2 == 0 else (True, False):
            result, traced_counts, recorder_seconds = engine_run(args, traced)
            if recorder_seconds is not None:
                recording.append(recorder_seconds)
            if traced and traced_counts[: args.steps] != result["broadcasts_per_step_list"]:
                print("error: trace and the engine's counter disagree", file=sys.stderr)
                return 1
            runs[traced].append(result)
            print(
                f"rep {rep + 1}/{args.reps} {'traced' if traced else 'plain ':6s} "
                f"step {result['step_time_s'] * 1e3:7.3f} ms",
                flush=True,
            )
    if len({run["tokens_sha256"] for kind in runs.values() for run in kind}) != 1:
        print("error: tracing changed the tokens", file=sys.stderr)
        return 1
    ratios = [
        traced["step_time_s"] / plain["step_time_s"]
        for plain, traced in zip(runs[False], runs[True], strict=True)
    ]
    # The fastest decile of a run's steps: the steps the machine's other load spared.
    fast_ratios = [
        fast_steps(traced) / fast_steps(plain)
        for plain, traced in zip(runs[False], runs[True], strict=True)
    ]
    cost = recorder_cost(calls=2000, depth=30)
    figures = {
        "shape": args.shape,
        "speculative": args.speculative,
        "tp": args.tp,
        "steps": args.steps,
        "reps": args.reps,
        "broadcasts_per_step": runs[False][0]["broadcasts_per_step"],
        "collectives_per_step": runs[False][0]["collectives_per_step"],
        "plain_step_ms": spread([r["step_time_s"] * 1e3 for r in runs[False]]),
        "traced_step_ms": spread([r["step_time_s"] * 1e3 for r in runs[True]]),
        "traced_over_plain": spread(ratios),
        "fast_steps_traced_over_plain": spread(fast_ratios),
        "recorder_per_call": cost,
        "recording_ms_per_step_rank0": spread([c * 1e3 for c in recording]),
        "seconds": time.perf_counter() - started,
    }
    ratio = figures["traced_over_plain"]
    print(
        f"\n{args.shape}{f' --speculative {args.speculative}' if args.speculative else ''}, "
        f"tp {args.tp}, {args.steps} steps, {args.reps} runs each; "
        f"{figures['collectives_per_step']:.1f} collectives per step"
    )
    print(
        f"step time traced/plain: {ratio['median']:.3f}x "
        f"(per pair {ratio['min']:.3f}-{ratio['max']:.3f}); "
        f"plain {figures['plain_step_ms']['median']:.2f} ms, "
        f"traced {figures['traced_step_ms']['median']:.2f} ms"
    )
    per_step = figures["recording_ms_per_step_rank0"]["median"]
    print(
        f"the driver's recorder: {per_step:.3f} ms of CPU per step, "
        f"{per_step / figures['plain_step_ms']['median']:.1%} of a plain step"
    )
    fast = figures["fast_steps_traced_over_plain"]
    print(
        f"fastest 10% of steps traced/plain: {fast['median']:.3f}x "
        f"(per pair {fast['min']:.3f}-{fast['max']:.3f})"
    )
    print(
        f"one broadcast, 30 frames deep: {cost['plain_us']:.1f} us plain, "
        f"{cost['recorded_us']:.1f} us recorded (+{cost['added_us']:.1f} us), "
        f"{cost['recorder_cpu_us']:.1f} us of it the recorder's CPU time"
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
