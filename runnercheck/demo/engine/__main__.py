"""``python -m runnercheck.demo.engine --shape legacy|merged --tp N --steps K [--json]``."""

import argparse
import json
import sys
from typing import List, Optional

from runnercheck.demo.engine import DEVICES, SHAPES, EngineLoadError, run_engine

PROG = "python -m runnercheck.demo.engine"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="Run the tiny tensor-parallel engine on N local processes (gloo).",
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--shape", choices=SHAPES, default=None, help="built-in engine shape")
    where.add_argument(
        "--engine-dir",
        metavar="PATH",
        help="run the engine package in PATH (e.g. a migrated copy of the legacy shape)",
    )
    parser.add_argument("--tp", type=int, default=1, help="tensor-parallel ranks (default 1)")
    parser.add_argument("--steps", type=int, default=16, help="engine steps (default 16)")
    parser.add_argument("--seed", type=int, default=0, help="weights and workload seed")
    parser.add_argument(
        "--worker",
        default="default",
        help="default (worker:Worker), cpu (cpu_worker:CPUWorker) or module:Class",
    )
    parser.add_argument("--embedding", action="store_true", help="run as an embedding model")
    parser.add_argument(
        "--device", choices=DEVICES, default="cpu", help="where the model runs (default cpu)"
    )
    parser.add_argument(
        "--timeout", type=float, default=60.0, help="seconds for rendezvous and each collective"
    )
    parser.add_argument(
        "--warmup-steps",
        type=int,
        default=0,
        help="steps left out of the timing figures (default 0)",
    )
    parser.add_argument(
        "--speculative",
        type=int,
        default=0,
        metavar="K",
        help="speculative decoding with K draft tokens per step (merged shape; default off)",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object")
    return parser


def main(argv: Optional[List[str]] = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.shape is None and args.engine_dir is None:
        args.shape = "legacy"
    if args.tp < 1 or args.steps < 1 or args.timeout <= 0:
        parser.error("--tp and --steps must be >= 1 and --timeout > 0")
    from runnercheck.demo.engine.launcher import EngineRunError

    try:
        result = run_engine(
            args.shape,
            tp=args.tp,
            steps=args.steps,
            seed=args.seed,
            engine_dir=args.engine_dir,
            worker=args.worker,
            embedding=args.embedding,
            timeout_s=args.timeout,
            warmup_steps=args.warmup_steps,
            device=args.device,
            num_speculative_tokens=args.speculative,
        )
    except (EngineLoadError, ValueError) as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 2
    except EngineRunError as exc:
        print(f"{PROG}: error: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps(result, sort_keys=True))
        return 0
    stats = result["scheduler"]
    where = f"tp={result['tp']}, {result['device']}"
    print(f"engine      {result['engine_dir'] or result['shape']} ({where})")
    print(f"steps       {result['steps']}")
    print(f"tokens      {result['num_tokens']}  sha256 {result['tokens_sha256']}")
    if result["embeddings_sha256"]:
        print(f"embeddings  sha256 {result['embeddings_sha256']}")
    print(f"broadcasts  {result['broadcasts_per_step']:.2f} per step")
    if result["num_speculative_tokens"]:
        print(
            f"speculative {result['num_speculative_tokens']} draft tokens per step, "
            f"{result['acceptance_rate']:.0%} accepted"
        )
    print(f"step time   {result['step_time_s'] * 1e3:.3f} ms (median)")
    print(f"throughput  {result['tokens_per_s']:.1f} tokens/s")
    print(
        f"kv cache    {stats['blocks_swapped_out']} blocks swapped out, "
        f"{stats['blocks_swapped_in']} in, {stats['blocks_copied']} copied"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
