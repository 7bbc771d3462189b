"""Record every rank's collectives of a live run, per engine step and contract method.

Runs COMMAND (after --) with every Python process it starts recording its
torch.distributed calls: broadcast, broadcast_object_list, all_reduce, all_gather,
barrier, send/recv, ...; a broadcast_tensor_dict counts as one broadcast with its parts.
Each call is attributed to its engine step (a worker's execute_model, or the step
methods given with --step-method), the contract method on the stack (prepare, convert,
execute, worker), its source line and its bytes. Works with torchrun and with any
launcher that starts its ranks as Python processes.

Prints broadcasts, collectives and bytes per step (median, max) and per method. When
the ranks' sequences of collectives differ, it names the first mismatch with each
rank's call site and stops the run at once; a rank stuck at a collective its peers
have not reached stops the run after --deadline seconds. Whatever the command leaves
running when it ends (in its session or escaped from it) is ended and named; a process
that cannot be ended is reported with its pid, and fails the run. --deadline and
--timeout hold even when the command stops this process (kill -STOP $PPID): a watchdog
process ends the run then. --timeline FILE writes the run as a trace-event file (one
track per rank: steps, broadcasts and collectives as spans, the divergence marked) for
Perfetto or chrome://tracing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from runnercheck.commands.options import (
    check_number,
    check_output_file,
    prepare_output_dir,
    write_output_file,
)
from runnercheck.errors import EXIT_CLEAN, EXIT_FINDINGS, UsageError

HELP = "record every rank's collectives of a live run, per step; budget and divergence"
EPILOG = (
    "exit status: 0 the run succeeded, the ranks agree and every step is within the budget; "
    "1 a divergence, a hang, a step over the budget or a failed command; 2 usage error\n\n"
    "example: runnercheck trace --max-broadcasts-per-step 1 -- "
    "python -m runnercheck.demo.engine --shape merged --tp 2"
)

#: Bounds of the numeric options (inclusive).
SECONDS = (0.001, 7 * 86_400.0)
BROADCASTS = (0, 1_000_000)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--max-broadcasts-per-step",
        type=int,
        default=None,
        metavar="N",
        help="fail (exit 1) if a step runs more than N broadcasts, naming the extra call site",
    )
    parser.add_argument(
        "--deadline",
        type=float,
        default=60.0,
        help="seconds a rank may wait at a collective its peers have not reached (default 60; "
        "at most a week)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds the whole run may take (default: no limit; at most a week)",
    )
    parser.add_argument(
        "--step-method",
        action="append",
        default=None,
        metavar="NAME",
        help="a method whose outermost call is one engine step (repeatable; default: "
        "execute_model, _execute_model_non_driver, _run_non_driver_rank)",
    )
    parser.add_argument("--steps", action="store_true", help="also print every step")
    parser.add_argument(
        "--json",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write the report as JSON to FILE (its directory must exist; checked "
        "before the command runs; written whole or not at all)",
    )
    parser.add_argument(
        "--timeline",
        type=Path,
        default=None,
        metavar="FILE",
        help="also write every rank's steps and collectives to FILE as trace-event JSON, "
        "for Perfetto or chrome://tracing (checked before the command runs; written whole "
        "or not at all)",
    )
    parser.add_argument(
        "--keep",
        type=Path,
        default=None,
        metavar="DIR",
        help="keep the raw trace files in DIR (created if missing; it must not hold another "
        "run's trace files)",
    )
    parser.add_argument("--config", type=Path, default=None, help="pyproject.toml to read")
    parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")


def run(args: argparse.Namespace) -> int:
    from runnercheck.extras import require_fuzz_extra

    require_fuzz_extra("runnercheck trace", ("torch",))
    from runnercheck.config import load_config
    from runnercheck.console import make_console
    from runnercheck.trace import RecorderOptions, TraceOptions, trace_command
    from runnercheck.trace.render import render

    command = list(args.command)
    if command and command[0] == "--":
        command = command[1:]
    if not command:
        raise UsageError("no command to trace: runnercheck trace [OPTIONS] -- COMMAND [ARGS...]")
    check_number("--max-broadcasts-per-step", args.max_broadcasts_per_step, *BROADCASTS)
    check_number("--deadline", args.deadline, *SECONDS, unit="seconds")
    check_number("--timeout", args.timeout, *SECONDS, unit="seconds")
    for name in args.step_method or []:
        if not name.isidentifier():
            raise UsageError(f"--step-method {name!r}: not a method name")
    contract = load_config(Path.cwd(), args.config).contract()
    check_output_file("--json", args.json)
    check_output_file("--timeline", args.timeline)
    prepare_output_dir("--keep", args.keep, holds="*.trace")
    step_methods = tuple(args.step_method) if args.step_method else None
    options = TraceOptions(
        recorder=RecorderOptions.from_contract(contract, step_methods),
        deadline=args.deadline,
        timeout=args.timeout,
        max_broadcasts_per_step=args.max_broadcasts_per_step,
        keep=args.keep,
    )
    try:
        report = trace_command(command, options, last_resort=getattr(args, "_command_line", False))
    except FileNotFoundError as exc:
        raise UsageError(f"cannot run {command[0]!r}: {exc.strerror}") from None
    except PermissionError as exc:
        raise UsageError(f"cannot run {command[0]!r}: {exc.strerror}") from None
    console = make_console()
    console.print(f"runnercheck trace: {' '.join(command)}", markup=False, highlight=False)
    render(report, console, per_step=args.steps)
    if args.json is not None:
        write_output_file("--json", args.json, json.dumps(report.as_json(), indent=2) + "\n")
    if args.timeline is not None:
        from runnercheck.trace.timeline import dumps, timeline

        write_output_file("--timeline", args.timeline, dumps(timeline(report)))
    return EXIT_CLEAN if report.ok else EXIT_FINDINGS
