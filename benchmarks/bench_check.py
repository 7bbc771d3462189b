"""Benchmark ``runnercheck check`` on the whole ``vllm/`` package of a real release.

Three measurements on the same files, in the same run:

* the parse floor: read every ``.py`` file and ``ast.parse`` it (in this process);
* ``runnercheck check`` through its in-process API (discovery, prefilter, facts, rules);
  the floor and the check alternate, repetition after repetition, so that both see the
  same machine state;
* cold ``mypy`` on the same tree (a fresh ``--cache-dir``, ``--ignore-missing-imports
  --follow-imports=silent --no-site-packages`` so that it checks vLLM and not torch),
  against ``runnercheck check`` run the same way, as a command.

Usage::

    python benchmarks/bench_check.py [--version 0.6.0] [--reps 9] [--mypy-runs 1] [--json out.json]

The vLLM wheel is downloaded once from the package index and cached (see
``tests/vllm_wheels.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from runnercheck.check import CheckResult, check_paths  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402


def parse_floor(files: list[Path]) -> int:
    """Read and parse every file; the least any ``ast``-based checker must do."""
    nodes = 0
    for path in files:
        nodes += len(ast.parse(path.read_bytes(), filename=str(path)).body)
    return nodes


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def run_command(cmd: list[str], cwd: Path) -> float:
    start = time.perf_counter()
    subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600, check=False)
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", default="0.6.0", help="vLLM release (default 0.6.0)")
    parser.add_argument("--reps", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--mypy-runs", type=int, default=1, help="cold mypy runs (0: skip)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)

    package = vllm_package(args.version)
    files = sorted(package.rglob("*.py"))
    result_holder: list[CheckResult] = []

    def floor() -> None:
        parse_floor(files)

    def check() -> None:
        result_holder.append(check_paths([package], jobs=1))

    floor()
    check()  # warm: imports, page cache
    floor_times: list[float] = []
    check_times: list[float] = []
    for rep in range(args.reps):
        if rep % 2 == 0:
            floor_times.append(timed(floor))
            check_times.append(timed(check))
        else:
            check_times.append(timed(check))
            floor_times.append(timed(floor))
    result = result_holder[-1]
    ratios = [c / f for c, f in zip(check_times, floor_times, strict=True)]

    figures: dict[str, object] = {
        "vllm": args.version,
        "files": len(files),
        "check_summary": result.summary(),
        "parse_floor_s": spread(floor_times),
        "check_in_process_s": spread(check_times),
        "check_over_floor": spread(ratios),
    }

    if args.mypy_runs > 0:
        cli_times: list[float] = []
        mypy_times: list[float] = []
        for _ in range(args.mypy_runs):
            cli_times.append(
                run_command([sys.executable, "-m", "runnercheck", "check", "vllm"], package.parent)
            )
            with tempfile.TemporaryDirectory() as cache:
                mypy_times.append(
                    run_command(
                        [
                            sys.executable,
                            "-m",
                            "mypy",
                            "--cache-dir",
                            cache,
                            "--ignore-missing-imports",
                            "--follow-imports=silent",
                            "--no-site-packages",
                            "--no-error-summary",
                            "vllm",
                        ],
                        package.parent,
                    )
                )
        figures["check_command_s"] = spread(cli_times)
        figures["mypy_cold_s"] = spread(mypy_times)
        figures["mypy_over_check_command"] = statistics.median(mypy_times) / statistics.median(
            cli_times
        )
        figures["mypy_over_check_in_process"] = statistics.median(mypy_times) / statistics.median(
            check_times
        )

    floor_s = figures["parse_floor_s"]
    check_s = figures["check_in_process_s"]
    ratio = figures["check_over_floor"]
    assert isinstance(floor_s, dict) and isinstance(check_s, dict) and isinstance(ratio, dict)
    summary = result.summary()
    print(f"vLLM {args.version}: {len(files)} files under vllm/")
    print(
        f"  check: {summary['files_parsed']} parsed, {summary['files_skipped']} skipped by the "
        f"prefilter, {summary['findings']} findings"
    )
    print(
        f"  parse floor (read + ast.parse, all files): median {floor_s['median']:.3f}s "
        f"[{floor_s['min']:.3f}-{floor_s['max']:.3f}] over {args.reps} reps"
    )
    print(
        f"  runnercheck check (in-process):           median {check_s['median']:.3f}s "
        f"[{check_s['min']:.3f}-{check_s['max']:.3f}]"
    )
    print(
        f"  check / floor: median {ratio['median']:.2f}x "
        f"[{ratio['min']:.2f}-{ratio['max']:.2f}] (target <= 1.5x)"
    )
    if "mypy_cold_s" in figures:
        mypy_s = figures["mypy_cold_s"]
        cli_s = figures["check_command_s"]
        assert isinstance(mypy_s, dict) and isinstance(cli_s, dict)
        print(
            f"  cold mypy: median {mypy_s['median']:.2f}s over {args.mypy_runs} run(s); "
            f"`runnercheck check` command: {cli_s['median']:.2f}s"
        )
        print(
            f"  mypy / check: {figures['mypy_over_check_command']:.1f}x as commands, "
            f"{figures['mypy_over_check_in_process']:.1f}x against the in-process check "
            "(target >= 10x)"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
