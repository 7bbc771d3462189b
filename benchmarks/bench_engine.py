"""Benchmark the demo engine: legacy (two broadcasts per step) against one broadcast.

Three engines run the same model, scheduler and seeded workload at ``--tp 2`` (gloo on
loopback): ``legacy``, the hand-written ``merged`` shape, and ``migrated``, what
``runnercheck migrate`` makes of a copy of ``legacy`` in this run. Every repetition runs
all three, the one that goes first rotating, so that all see the same machine state;
every repetition gives one ratio against legacy, for merged and for migrated, of

* ``step_time_s``: the median time of ``worker.execute_model`` over the timed steps
  (what the merge changes: the broadcasts), and
* ``tokens_per_s``: generated tokens over the timed steps' wall time (scheduling and
  output processing included).

The model is tiny (hidden 64, 2 layers), so a step costs about as much as its
collectives, as in a real tensor-parallel engine's small-batch decode.

Usage::

    python benchmarks/bench_engine.py [--reps 6] [--steps 64] [--warmup-steps 4] [--tp 2]
                                      [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from runnercheck.demo.engine import run_engine  # noqa: E402
from runnercheck.demo.story import DemoOptions, prepare_workspace, stage_migrate  # noqa: E402

SHAPES = ("legacy", "merged", "migrated")


def migrated_copy(root: Path) -> Path:
    """``runnercheck migrate`` (the demo's migrate stage) on a copy of the legacy engine."""
    workspace = prepare_workspace(root)
    result = stage_migrate(workspace, DemoOptions())
    if not result.ok:
        raise SystemExit(f"bench_engine: migrate failed: {result.summary}")
    return workspace.migrated


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=6, help="runs of each shape (default 6)")
    parser.add_argument("--steps", type=int, default=64, help="engine steps per run")
    parser.add_argument("--warmup-steps", type=int, default=4, help="untimed steps per run")
    parser.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.steps <= args.warmup_steps or args.tp < 1:
        parser.error("need --reps >= 1, --steps > --warmup-steps and --tp >= 1")

    with tempfile.TemporaryDirectory(prefix="bench-engine-") as tmp:
        return measure(args, migrated_copy(Path(tmp)))


def measure(args: argparse.Namespace, migrated: Path) -> int:
    started = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {shape: [] for shape in SHAPES}
    for rep in range(args.reps):
        first = rep % len(SHAPES)
        for shape in SHAPES[first:] + SHAPES[:first]:
            result = run_engine(
                None if shape == "migrated" else shape,
                tp=args.tp,
                steps=args.steps,
                seed=args.seed,
                warmup_steps=args.warmup_steps,
                engine_dir=str(migrated) if shape == "migrated" else None,
            )
            runs[shape].append(result)
            print(
                f"rep {rep + 1}/{args.reps} {shape:8s} step {result['step_time_s'] * 1e3:7.3f} ms"
                f"  {result['tokens_per_s']:8.1f} tokens/s",
                flush=True,
            )

    hashes = {run["tokens_sha256"] for shape in SHAPES for run in runs[shape]}
    if len(hashes) != 1:
        print("error: the engines generated different tokens", file=sys.stderr)
        return 1

    def ratios(shape: str, key: str) -> dict[str, float]:
        return spread(
            [new[key] / old[key] for old, new in zip(runs["legacy"], runs[shape], strict=True)]
        )

    figures: dict[str, Any] = {
        "benchmark": "engine",
        "tp": args.tp,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "reps": args.reps,
        "seed": args.seed,
        "tokens_sha256": hashes.pop(),
        "wall_s": time.perf_counter() - started,
        "shapes": {
            shape: {
                "broadcasts_per_step": runs[shape][0]["broadcasts_per_step"],
                "collectives_per_step": runs[shape][0]["collectives_per_step"],
                "step_time_s": spread([run["step_time_s"] for run in runs[shape]]),
                "tokens_per_s": spread([run["tokens_per_s"] for run in runs[shape]]),
            }
            for shape in SHAPES
        },
        "ratio_over_legacy": {
            shape: {
                "step_time": ratios(shape, "step_time_s"),
                "tokens_per_s": ratios(shape, "tokens_per_s"),
            }
            for shape in ("merged", "migrated")
        },
    }

    print()
    print(
        f"engine, tp={args.tp}, {args.steps} steps ({args.warmup_steps} untimed), "
        f"{args.reps} interleaved runs per engine, identical tokens"
    )
    for shape in SHAPES:
        s = figures["shapes"][shape]
        print(
            f"  {shape:8s}  {s['broadcasts_per_step']:.2f} broadcasts/step, "
            f"{s['collectives_per_step']:.2f} collectives/step, step "
            f"{s['step_time_s']['median'] * 1e3:.3f} ms "
            f"[{s['step_time_s']['min'] * 1e3:.3f}, {s['step_time_s']['max'] * 1e3:.3f}], "
            f"{s['tokens_per_s']['median']:.1f} tokens/s"
        )
    for shape in ("merged", "migrated"):
        for name, label in (("step_time", "step time"), ("tokens_per_s", "tokens/s")):
            r = figures["ratio_over_legacy"][shape][name]
            print(
                f"  {shape}/legacy {label:9s} median {r['median']:.3f}  "
                f"(min {r['min']:.3f}, max {r['max']:.3f})"
            )
    print(f"  wall time {figures['wall_s']:.1f} s")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
