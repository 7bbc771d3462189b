"""Benchmark the engine's speculative mode before and after ``fold-control-broadcast``.

Two speculative engines run the same model, draft, scheduler and seeded workload at
``--tp 2`` (gloo on loopback) with ``--k`` draft tokens per step: ``before``, the
wrapper as it was (its own control broadcast, ``tests/migrate/fixtures/
fold-control-broadcast``), and ``after``, the shipped wrapper (the codemod's output:
the control values ride in the first proposer step's broadcast). Every repetition runs
both, the one that goes first alternating, and gives one ratio ``after / before`` of

* ``step_time_s``: the median time of the wrapper's ``execute_model`` over the timed
  steps (prefill and decode steps alike), and
* ``tokens_per_s``: generated tokens over the timed steps' wall time.

Both engines must generate the same tokens (the run fails otherwise); the engine's own
counter gives the broadcasts per decode step (``k + 2`` before, ``k + 1`` after) and per
prefill step (3 and 2).

Usage::

    python benchmarks/bench_spec_decode.py [--reps 6] [--steps 32] [--warmup-steps 4]
                                           [--k 3] [--tp 2] [--json out.json]
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
from tests.spec_decode_fixture import copy_before  # noqa: E402

ENGINES = ("before", "after")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--reps", type=int, default=6, help="runs of each engine (default 6)")
    parser.add_argument("--steps", type=int, default=32, help="engine steps per run")
    parser.add_argument("--warmup-steps", type=int, default=4, help="untimed steps per run")
    parser.add_argument("--k", type=int, default=3, help="draft tokens per step (default 3)")
    parser.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (default 2)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.reps < 1 or args.steps <= args.warmup_steps or args.tp < 2 or not 1 <= args.k <= 8:
        parser.error("need --reps >= 1, --steps > --warmup-steps, --tp >= 2, 1 <= --k <= 8")
    with tempfile.TemporaryDirectory(prefix="bench-spec-decode-") as tmp:
        return measure(args, copy_before(Path(tmp) / "spec_before"))


def measure(args: argparse.Namespace, before_dir: Path) -> int:
    started = time.perf_counter()
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in ENGINES}
    for rep in range(args.reps):
        order = ENGINES if rep % 2 == 0 else ENGINES[::-1]
        for name in order:
            result = run_engine(
                "merged",
                tp=args.tp,
                steps=args.steps,
                seed=args.seed,
                warmup_steps=args.warmup_steps,
                timeout_s=300,
                num_speculative_tokens=args.k,
                spec_decode_dir=str(before_dir) if name == "before" else None,
            )
            runs[name].append(result)
            print(
                f"rep {rep + 1}/{args.reps} {name:6s} step {result['step_time_s'] * 1e3:7.3f} ms"
                f"  {result['tokens_per_s']:8.1f} tokens/s",
                flush=True,
            )

    hashes = {run["tokens_sha256"] for name in ENGINES for run in runs[name]}
    if len(hashes) != 1:
        print("error: the engines generated different tokens", file=sys.stderr)
        return 1

    def ratio(key: str) -> dict[str, float]:
        pairs = zip(runs["before"], runs["after"], strict=True)
        return spread([after[key] / before[key] for before, after in pairs])

    def per_step(name: str) -> dict[str, int]:
        counted = runs[name][0]["broadcasts_per_step_list"]
        return {"prefill": counted[0], "decode": max(counted)}

    figures: dict[str, Any] = {
        "benchmark": "spec_decode",
        "tp": args.tp,
        "k": args.k,
        "steps": args.steps,
        "warmup_steps": args.warmup_steps,
        "reps": args.reps,
        "seed": args.seed,
        "tokens_sha256": hashes.pop(),
        "wall_s": time.perf_counter() - started,
        "engines": {
            name: {
                "broadcasts_per_step": per_step(name),
                "step_time_s": spread([run["step_time_s"] for run in runs[name]]),
                "tokens_per_s": spread([run["tokens_per_s"] for run in runs[name]]),
            }
            for name in ENGINES
        },
        "ratio_after_over_before": {
            "step_time": ratio("step_time_s"),
            "tokens_per_s": ratio("tokens_per_s"),
        },
    }
    print()
    print(
        f"speculative engine, tp={args.tp}, k={args.k}, {args.steps} steps "
        f"({args.warmup_steps} untimed), {args.reps} alternating runs each, identical tokens"
    )
    for name in ENGINES:
        e = figures["engines"][name]
        b = e["broadcasts_per_step"]
        print(
            f"  {name:6s}  {b['decode']} broadcasts per decode step, {b['prefill']} per prefill "
            f"step; step {e['step_time_s']['median'] * 1e3:.3f} ms "
            f"[{e['step_time_s']['min'] * 1e3:.3f}, {e['step_time_s']['max'] * 1e3:.3f}], "
            f"{e['tokens_per_s']['median']:.1f} tokens/s"
        )
    for key, label in (("step_time", "step time"), ("tokens_per_s", "tokens/s")):
        r = figures["ratio_after_over_before"][key]
        print(
            f"  after / before {label}: {r['median']:.3f} (min {r['min']:.3f}, "
            f"max {r['max']:.3f}, n={r['n']})"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
