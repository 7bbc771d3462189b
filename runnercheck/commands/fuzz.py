"""Round-trip input classes through a real multi-process broadcast and compare every field.

Each TARGET is ``module:Class``, a module, or a path (every input class defined there:
a dataclass with as_broadcastable_tensor_dict() and classmethod
from_broadcasted_tensor_dict()), or a composed step ``A+B+extra:NAME``: the inputs
merged into one dict and consumed in that order on the receiving ranks, as a worker
does (:mod:`runnercheck.fuzz.steps`). Hypothesis generates instances from the dataclass
annotations; each goes driver -> as_broadcastable_tensor_dict() -> broadcast ->
from_broadcasted_tensor_dict() on every other rank, and is compared field by field
(type, dtype, shape, values with NaN, device type) with the original. Failures are
shrunk to a minimal example; --seed replays them.

The ranks are spawned on 127.0.0.1 (--world-size); under torchrun (RANK and WORLD_SIZE
set) every process runs the same command, rank 0 reports, and the run may span nodes.
"""

from __future__ import annotations

import argparse
import gc
import importlib
import json
import math
import os
import sys
from pathlib import Path
from typing import Any

from runnercheck.errors import EXIT_CLEAN, EXIT_FINDINGS, UsageError

HELP = "round-trip input classes through a real multi-process broadcast (Hypothesis)"

EPILOG = (
    "exit status: 0 every class round-trips, 1 problems found (RC301-RC306), 2 usage or input error"
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "targets",
        nargs="+",
        metavar="TARGET",
        help="module:Class, module, path, or a composed step mod:A+mod:B[+extra:NAME[=TYPE]]",
    )
    parser.add_argument("--world-size", type=int, default=2, help="ranks to spawn (default 2)")
    parser.add_argument(
        "--device",
        choices=("cpu", "cuda"),
        default="cpu",
        help="where tensors live (cuda: NCCL when each rank has a GPU)",
    )
    parser.add_argument(
        "--examples", type=int, default=100, help="examples per class (default 100)"
    )
    parser.add_argument(
        "--seed", type=int, default=None, help="replay the run that printed this seed"
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=60.0,
        help="seconds one example's round trip may take on any rank (default 60)",
    )
    parser.add_argument(
        "--extra",
        action="append",
        default=[],
        metavar="NAME[=TYPE]",
        help="a key the worker adds to every composed step's dict (TYPE: tensor (default), "
        "int, float, bool, str, bytes or module:attr); popped where a step names it "
        "(+extra:NAME), else after its last part",
    )
    parser.add_argument("--format", choices=("text", "json"), default="text")
    parser.add_argument("--config", type=Path, default=None, help="pyproject.toml to read")
    parser.add_argument(
        "--attn-backend",
        default=None,
        metavar="MODULE:ATTR",
        help="passed as attn_backend to from_broadcasted_tensor_dict",
    )


def load_object(spec: str, what: str) -> Any:
    module_name, colon, attr = spec.partition(":")
    if not module_name or not colon or not attr:
        raise UsageError(f"{what} {spec!r}: expected module:attribute")
    try:
        obj: Any = importlib.import_module(module_name)
        for part in attr.split("."):
            obj = getattr(obj, part)
    except Exception as exc:
        raise UsageError(f"{what} {spec!r}: cannot load it: {type(exc).__name__}: {exc}") from None
    return obj


#: Bounds of the numeric options (inclusive).
WORLD_SIZE = (1, 64)
EXAMPLES = (1, 1_000_000)
DEADLINE = (0.1, 86_400)
SEED = (0, 2**64 - 1)


def _check_numbers(args: argparse.Namespace) -> None:
    """Every numeric option finite and within its bounds (one line naming it otherwise)."""
    checks = (
        ("--world-size", args.world_size, WORLD_SIZE),
        ("--examples", args.examples, EXAMPLES),
        ("--deadline", args.deadline, DEADLINE),
        ("--seed", args.seed, SEED),
    )
    for option, value, (low, high) in checks:
        if value is None:
            continue
        finite = math.isfinite(value) if isinstance(value, float) else True
        if not finite or not low <= value <= high:
            unit = " seconds" if option == "--deadline" else ""
            raise UsageError(f"{option} must be between {low} and {high}{unit}, not {value}")


def start_fork_server(preload: tuple[str, ...] = ("runnercheck.fuzz.ranks",)) -> None:
    """Start the fork server of the local ranks now, before this process imports torch:
    it imports torch (and ``preload``) for the ranks while this process imports torch
    and Hypothesis for the examples, instead of after (the group uses the server that
    is running)."""
    import multiprocessing
    from multiprocessing import forkserver

    multiprocessing.get_context("forkserver").set_forkserver_preload(list(preload))
    try:
        forkserver.ensure_running()
    except OSError:  # the group starts it (and reports what fails) when it needs it
        pass


def run(args: argparse.Namespace) -> int:
    from runnercheck.extras import require_fuzz_extra

    require_fuzz_extra("runnercheck fuzz")
    if not ("RANK" in os.environ and "WORLD_SIZE" in os.environ):  # not under torchrun
        start_fork_server()
    from runnercheck.config import load_config
    from runnercheck.fuzz import FuzzOptions, fuzz
    from runnercheck.fuzz.group import GroupLost, run_receiver, torchrun_rank
    from runnercheck.fuzz.steps import declared_extras, resolve_targets

    _check_numbers(args)
    if args.device == "cuda":
        import torch

        if not torch.cuda.is_available():
            raise UsageError("--device cuda: no CUDA device is available")
    options = FuzzOptions(
        world_size=args.world_size,
        device=args.device,
        examples=args.examples,
        seed=args.seed,
        deadline=args.deadline,
    )
    rank = torchrun_rank()
    if rank is not None and rank != 0:
        return run_receiver(options.settings())
    start = next((Path(t) for t in args.targets if Path(t).exists()), Path.cwd())
    config = load_config(start, args.config)
    extras = declared_extras(args.extra, config.fuzz_extras)
    targets = resolve_targets(list(args.targets), config.contract(), extras)
    if args.attn_backend is not None:
        options = FuzzOptions(
            **{**options.__dict__, "attn_backend": load_object(args.attn_backend, "--attn-backend")}
        )
    # everything imported so far lives to the end: Hypothesis's first run collects
    # garbage once in full, which then skips torch's objects
    gc.freeze()
    try:
        report = fuzz(targets, options, config)
    except GroupLost as lost:  # the ranks could not even start
        print(f"runnercheck: RC306 the ranks could not start: {lost.message}", file=sys.stderr)
        return EXIT_FINDINGS
    if args.format == "json":
        print(json.dumps(report.as_json(), indent=2))
    else:
        print(report.text())
    return EXIT_CLEAN if report.passed else EXIT_FINDINGS
