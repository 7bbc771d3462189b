"""Run the whole story on the legacy engine runnercheck ships: check, migrate, mypy, fuzz, run.

Works on copies in a temporary directory: checks the legacy two-broadcast engine
(findings), migrates a copy to the merged shape, type-checks it with the mypy
plugin, fuzzes its new input classes on 2 processes, then runs both engines and
compares their tokens, broadcasts per step and step time.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from runnercheck.errors import EXIT_CLEAN, EXIT_FINDINGS, UsageError

HELP = "check, migrate, type-check, fuzz and run the shipped legacy engine"
EPILOG = "exit status: 0 every stage agrees, 1 a stage disagrees, 2 usage error"


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--tp", type=int, default=2, help="tensor-parallel ranks (default 2)")
    parser.add_argument("--steps", type=int, default=48, help="engine steps per run (default 48)")
    parser.add_argument(
        "--repeats", type=int, default=4, help="interleaved runs of each engine (default 4)"
    )
    parser.add_argument(
        "--examples", type=int, default=40, help="fuzz examples per input class (default 40)"
    )
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--keep", type=Path, help="copy the demo's workspace here afterwards")
    parser.add_argument("--json", action="store_true", help="print one JSON object")


def run(args: argparse.Namespace) -> int:
    from runnercheck.extras import require_fuzz_extra

    require_fuzz_extra("runnercheck demo")
    from runnercheck.commands.fuzz import start_fork_server

    # the ranks of the fuzz and engine stages fork from one server: it imports torch
    # now, while the first stages run
    start_fork_server(("runnercheck.fuzz.ranks", "runnercheck.demo.engine.rank"))
    from runnercheck.console import make_console
    from runnercheck.demo.story import DemoOptions, StageResult, run_demo

    for name in ("tp", "steps", "repeats", "examples"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name} must be at least 1")
    if args.steps < 4:
        raise UsageError("--steps must be at least 4 (2 warm-up steps are left out of timing)")
    options = DemoOptions(
        tp=args.tp,
        steps=args.steps,
        repeats=args.repeats,
        fuzz_examples=args.examples,
        seed=args.seed,
        keep=args.keep,
    )
    console = make_console(stderr=args.json)

    def on_stage(title: str, result: StageResult | None) -> None:
        if result is None:
            console.print(f"[bold]>[/bold] {title} ...")
            return
        mark = "[green]ok[/green]" if result.ok else "[red]FAILED[/red]"
        console.print(f"  {mark} {result.summary} ({result.seconds:.1f} s)", highlight=False)

    if console.is_terminal:
        with console.status("runnercheck demo"):
            results = run_demo(options, on_stage)
    else:
        results = run_demo(options, on_stage)
    ok = all(r.ok for r in results)
    if args.json:
        print(json.dumps({"ok": ok, "stages": [r.as_json() for r in results]}, indent=2))
    else:
        from rich.table import Table

        table = Table("stage", "result", "summary", "seconds", title="runnercheck demo")
        for r in results:
            table.add_row(r.name, "ok" if r.ok else "FAILED", r.summary, f"{r.seconds:.1f}")
        console.print(table)
    return EXIT_CLEAN if ok else EXIT_FINDINGS
