"""Benchmark the mypy plugin: cold mypy with and without it on a real vLLM ``vllm/``.

Each repetition runs mypy twice on the same tree, once with ``plugins = mypy_plugin``
and once without, each with a fresh ``--cache-dir`` (cold), in alternating order so
that both see the same machine state. Both wall time and the child's CPU time (user +
system) are measured; on a shared machine the CPU time is the steadier figure. mypy reads ``vllm/`` with
``--ignore-missing-imports --follow-imports=silent --no-site-packages`` (vLLM is not
installed, and torch would otherwise dominate the run). The figure is the ratio of
the medians (with / without) of the CPU time, with the wall-time ratio beside it; the
per-repetition ratios give the spread. The run
also checks that the plugin leaves mypy's own messages unchanged.

Usage::

    python benchmarks/bench_mypy_plugin.py [--version 0.5.1] [--reps 7] [--json out.json]

The vLLM wheel is downloaded once from the package index and cached (see
``tests/vllm_wheels.py``).
"""

from __future__ import annotations

import argparse
import json
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402

#: Target: the plugin adds at most this much to a cold run.
TARGET_OVERHEAD = 0.05
PLUGIN_LINE = re.compile(
    r"\[(runner-input-protocol|from-dict-fixed-return|runner-input-covariance|"
    r"execute-input-mismatch|unbroadcastable-value|runnercheck-internal)\]$"
)


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def run_mypy(package: Path, workdir: Path, with_plugin: bool, rep: int) -> tuple[float, float, str]:
    """One cold mypy run; (wall seconds, CPU seconds, stdout)."""
    config = workdir / ("with.ini" if with_plugin else "without.ini")
    if not config.exists():
        config.write_text("[mypy]\n" + ("plugins = mypy_plugin\n" if with_plugin else ""))
    cache = workdir / f"cache-{'with' if with_plugin else 'without'}-{rep}"
    cmd = [
        sys.executable,
        "-m",
        "mypy",
        "--config-file",
        str(config),
        "--cache-dir",
        str(cache),
        "--no-site-packages",
        "--ignore-missing-imports",
        "--follow-imports=silent",
        str(package),
    ]
    cpu_before = child_cpu()
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=workdir, capture_output=True, text=True, timeout=3600)
    elapsed = time.perf_counter() - start
    cpu = child_cpu() - cpu_before
    if proc.returncode not in (0, 1) or proc.stderr:
        raise SystemExit(f"mypy failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return elapsed, cpu, proc.stdout


def mypy_messages(stdout: str) -> list[str]:
    """mypy's own messages (the plugin's and the summary line left out)."""
    return [
        line
        for line in stdout.splitlines()
        if not PLUGIN_LINE.search(line) and not line.startswith(("Found ", "Success: "))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", default="0.5.1", help="vLLM release (default 0.5.1)")
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions (>= 3)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    if args.reps < 3:
        parser.error("--reps must be at least 3")

    package = vllm_package(args.version)
    files = len(list(package.rglob("*.py")))
    wall: dict[bool, list[float]] = {True: [], False: []}
    cpu: dict[bool, list[float]] = {True: [], False: []}
    cpu_ratios: list[float] = []
    wall_ratios: list[float] = []
    plugin_errors: list[str] = []
    same_messages = True
    with tempfile.TemporaryDirectory(prefix="bench-mypy-plugin-") as tmp:
        workdir = Path(tmp)
        for rep in range(args.reps):
            order = (True, False) if rep % 2 == 0 else (False, True)
            outputs: dict[bool, str] = {}
            for with_plugin in order:
                seconds, cpu_seconds, stdout = run_mypy(package, workdir, with_plugin, rep)
                wall[with_plugin].append(seconds)
                cpu[with_plugin].append(cpu_seconds)
                outputs[with_plugin] = stdout
            cpu_ratios.append(cpu[True][-1] / cpu[False][-1])
            wall_ratios.append(wall[True][-1] / wall[False][-1])
            same_messages &= mypy_messages(outputs[True]) == mypy_messages(outputs[False])
            plugin_errors = [
                line for line in outputs[True].splitlines() if PLUGIN_LINE.search(line)
            ]
            print(
                f"rep {rep + 1}/{args.reps}: CPU with {cpu[True][-1]:.2f}s / without "
                f"{cpu[False][-1]:.2f}s = {cpu_ratios[-1]:.3f}; wall with {wall[True][-1]:.2f}s / "
                f"without {wall[False][-1]:.2f}s = {wall_ratios[-1]:.3f}",
                flush=True,
            )

    ratio = statistics.median(cpu[True]) / statistics.median(cpu[False])
    wall_ratio = statistics.median(wall[True]) / statistics.median(wall[False])
    result = {
        "vllm": args.version,
        "files": files,
        "reps": args.reps,
        "cpu_with_plugin_s": spread(cpu[True]),
        "cpu_without_plugin_s": spread(cpu[False]),
        "wall_with_plugin_s": spread(wall[True]),
        "wall_without_plugin_s": spread(wall[False]),
        "cpu_ratio_of_medians": ratio,
        "cpu_ratio_per_rep": spread(cpu_ratios),
        "wall_ratio_of_medians": wall_ratio,
        "wall_ratio_per_rep": spread(wall_ratios),
        "target_overhead": TARGET_OVERHEAD,
        "within_target": ratio <= 1 + TARGET_OVERHEAD,
        "mypy_messages_unchanged": same_messages,
        "plugin_errors": len(plugin_errors),
    }
    print()
    print(f"cold mypy on vllm {args.version} vllm/ ({files} files), {args.reps} interleaved reps")
    for label, times in (("CPU ", cpu), ("wall", wall)):
        print(
            f"  {label} without plugin: median {statistics.median(times[False]):.2f}s "
            f"({min(times[False]):.2f}..{max(times[False]):.2f}); with plugin: median "
            f"{statistics.median(times[True]):.2f}s ({min(times[True]):.2f}..{max(times[True]):.2f})"
        )
    print(
        f"  CPU ratio of medians {ratio:.3f} (overhead {100 * (ratio - 1):+.1f}%; per rep "
        f"{min(cpu_ratios):.3f}..{max(cpu_ratios):.3f}); target <= {1 + TARGET_OVERHEAD:.2f}: "
        f"{'met' if result['within_target'] else 'NOT met'}"
    )
    print(
        f"  wall ratio of medians {wall_ratio:.3f} (per rep "
        f"{min(wall_ratios):.3f}..{max(wall_ratios):.3f})"
    )
    print(
        f"  plugin errors reported: {len(plugin_errors)}; mypy's own messages unchanged: "
        f"{same_messages}"
    )
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if same_messages else 1


if __name__ == "__main__":
    sys.exit(main())
