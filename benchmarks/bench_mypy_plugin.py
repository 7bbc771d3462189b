"""Benchmark the mypy plugin: mypy with and without it, cold and warm cache, same run.

Cases: ``vllm/worker/`` of every merged-shape public vLLM wheel (0.5.1, 0.5.3.post1,
0.6.0, 0.6.3), and generated worst cases that grow (``benchmarks/plugin_cases.py``):
recursive aliases with 1..5 recursive branches, unions of 10..1000 dataclass members,
dataclasses nested 5..50 deep, 10..1000 input classes (with their runners) in one
module.

Each repetition runs, for each case, mypy with ``plugins = mypy_plugin`` and without,
in alternating order: a cold run with a fresh ``--cache-dir``, then a warm run on that
same cache. The child's CPU time (user + system) is measured (steadier than wall time
on a shared machine; wall time is kept in the JSON). Each figure is the ratio of the
medians (with / without), with the per-repetition ratios as its spread. For each
family, the growth from one size to the next is reported beside the growth of the
size: the plugin's time must grow no faster than the types it walks. The run also
checks that the plugin leaves mypy's own messages unchanged.

vLLM is not installed: mypy reads ``vllm/worker/`` with ``--ignore-missing-imports
--follow-imports=silent --no-site-packages`` (torch and friends are ``Any``).

Usage::

    python benchmarks/bench_mypy_plugin.py            # everything, 5 repetitions
    python benchmarks/bench_mypy_plugin.py --quick    # 0.6.3 and two sizes a family, 3 reps
    python benchmarks/bench_mypy_plugin.py --json out.json

The vLLM wheels are downloaded once from the package index and cached (see
``tests/vllm_wheels.py``).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from benchmarks.plugin_cases import CASES, write_case  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402

#: Target: the plugin adds at most this much to any run, cold or warm.
TARGET_OVERHEAD = 0.05
VERSIONS = ("0.5.1", "0.5.3.post1", "0.6.0", "0.6.3")
QUICK_VERSIONS = ("0.6.3",)
PLUGIN_LINE = re.compile(
    r"\[(runner-input-protocol|from-dict-fixed-return|runner-input-covariance|"
    r"execute-input-mismatch|unbroadcastable-value|runnercheck-internal)\]$"
)
VLLM_FLAGS = ("--no-site-packages", "--ignore-missing-imports", "--follow-imports=silent")


@dataclass
class Case:
    """One thing to check: a family (``vllm`` or a generated one) at one size."""

    family: str
    size: str
    target: Path
    flags: tuple[str, ...]
    #: (with plugin, warm) -> CPU seconds and wall seconds, one per repetition.
    cpu: dict[tuple[bool, bool], list[float]] = field(default_factory=dict)
    wall: dict[tuple[bool, bool], list[float]] = field(default_factory=dict)
    plugin_errors: int = 0
    same_messages: bool = True

    def ratio(self, warm: bool) -> float:
        return statistics.median(self.cpu[True, warm]) / statistics.median(self.cpu[False, warm])

    def ratios(self, warm: bool) -> list[float]:
        return [a / b for a, b in zip(self.cpu[True, warm], self.cpu[False, warm], strict=True)]


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_env(workdir: Path) -> dict[str, str]:
    """The environment of every mypy run: compiled bytecode is kept (in ``workdir``), as
    in an installed package, so that neither side pays for compiling on each run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def run_mypy(case: Case, config: Path, cache: Path) -> tuple[float, float, str]:
    """One mypy run; (CPU seconds, wall seconds, stdout)."""
    cmd = [sys.executable, "-m", "mypy", "--config-file", str(config), "--cache-dir", str(cache)]
    cmd += [*case.flags, str(case.target)]
    cpu_before = child_cpu()
    start = time.perf_counter()
    proc = subprocess.run(
        cmd,
        cwd=config.parent,
        capture_output=True,
        text=True,
        timeout=3600,
        env=child_env(config.parent),
    )
    elapsed = time.perf_counter() - start
    cpu = child_cpu() - cpu_before
    if proc.returncode not in (0, 1) or proc.stderr:
        raise SystemExit(f"mypy failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return cpu, elapsed, proc.stdout


def mypy_messages(stdout: str) -> list[str]:
    """mypy's own messages (the plugin's and the summary line left out)."""
    return [
        line
        for line in stdout.splitlines()
        if not PLUGIN_LINE.search(line) and not line.startswith(("Found ", "Success: "))
    ]


def measure(case: Case, workdir: Path, reps: int, quiet: bool = False) -> None:
    configs = {}
    for with_plugin in (True, False):
        config = workdir / ("with.ini" if with_plugin else "without.ini")
        config.write_text("[mypy]\n" + ("plugins = mypy_plugin\n" if with_plugin else ""))
        configs[with_plugin] = config
    for key in ((True, False), (True, True), (False, False), (False, True)):
        case.cpu[key], case.wall[key] = [], []
    tag = f"{case.family}-{case.size}"
    for rep in range(reps):
        outputs: dict[bool, str] = {}
        for with_plugin in (True, False) if rep % 2 == 0 else (False, True):
            cache = workdir / f"cache-{tag}-{with_plugin}-{rep}"
            for warm in (False, True):
                cpu, wall, stdout = run_mypy(case, configs[with_plugin], cache)
                case.cpu[with_plugin, warm].append(cpu)
                case.wall[with_plugin, warm].append(wall)
                cold = outputs.get(with_plugin, stdout)
                if warm and sorted(stdout.splitlines()) != sorted(cold.splitlines()):
                    raise SystemExit(f"{tag}: the warm run reports other messages than the cold")
                outputs[with_plugin] = stdout
        case.same_messages &= mypy_messages(outputs[True]) == mypy_messages(outputs[False])
        case.plugin_errors = sum(1 for x in outputs[True].splitlines() if PLUGIN_LINE.search(x))
        if quiet:
            continue
        print(
            f"  {tag} rep {rep + 1}/{reps}: cold {case.cpu[True, False][-1]:.2f}s / "
            f"{case.cpu[False, False][-1]:.2f}s = {case.ratios(False)[-1]:.3f}; warm "
            f"{case.cpu[True, True][-1]:.2f}s / {case.cpu[False, True][-1]:.2f}s = "
            f"{case.ratios(True)[-1]:.3f}",
            flush=True,
        )


def growth(cases: list[Case]) -> list[dict[str, float | str]]:
    """From each size of a generated family to the next: size factor and time factors."""
    out: list[dict[str, float | str]] = []
    for small, large in pairwise(cases):
        row: dict[str, float | str] = {
            "family": small.family,
            "from": small.size,
            "to": large.size,
            "size_factor": int(large.size) / int(small.size),
        }
        for with_plugin, name in ((False, "plain"), (True, "plugin")):
            row[f"{name}_cold_factor"] = statistics.median(
                large.cpu[with_plugin, False]
            ) / statistics.median(small.cpu[with_plugin, False])
        out.append(row)
    return out


def summary(case: Case) -> dict[str, object]:
    result: dict[str, object] = {"family": case.family, "size": case.size}
    for warm, name in ((False, "cold"), (True, "warm")):
        result[name] = {
            "cpu_without_s": spread(case.cpu[False, warm]),
            "cpu_with_s": spread(case.cpu[True, warm]),
            "wall_without_s": spread(case.wall[False, warm]),
            "wall_with_s": spread(case.wall[True, warm]),
            "ratio_of_medians": case.ratio(warm),
            "ratio_per_rep": spread(case.ratios(warm)),
        }
    result["within_target"] = max(case.ratio(False), case.ratio(True)) <= 1 + TARGET_OVERHEAD
    result["plugin_errors"] = case.plugin_errors
    result["mypy_messages_unchanged"] = case.same_messages
    return result


def print_table(cases: list[Case], growths: list[dict[str, float | str]]) -> None:
    print()
    print(f"{'case':<22}{'cold plain':>11}{'plugin':>9}{'ratio':>8}{'per rep':>15}", end="")
    print(f"{'warm plain':>12}{'plugin':>9}{'ratio':>8}{'errors':>8}")
    for case in cases:
        label = f"{case.family} {case.size}"
        print(f"{label:<22}", end="")
        for warm in (False, True):
            low, high = min(case.ratios(warm)), max(case.ratios(warm))
            plain = statistics.median(case.cpu[False, warm])
            plugin = statistics.median(case.cpu[True, warm])
            width = 11 if not warm else 12
            print(f"{plain:>{width}.2f}s{plugin:>8.2f}s{case.ratio(warm):>8.3f}", end="")
            if not warm:
                print(f"{f'{low:.2f}..{high:.2f}':>15}", end="")
        print(f"{case.plugin_errors:>8}")
    if growths:
        print()
        print("growth (cold CPU, median): size factor -> plain factor, plugin factor")
        for row in growths:
            print(
                f"  {row['family']} {row['from']} -> {row['to']}: x{row['size_factor']:g} -> "
                f"plain x{row['plain_cold_factor']:.2f}, plugin x{row['plugin_cold_factor']:.2f}"
            )
    worst = max(cases, key=lambda c: max(c.ratio(False), c.ratio(True)))
    worst_warm = worst.ratio(True) > worst.ratio(False)
    ratio = worst.ratio(worst_warm)
    print(
        f"\nworst case: {worst.family} {worst.size} ({'warm' if worst_warm else 'cold'}) "
        f"{ratio:.3f} (overhead {100 * (ratio - 1):+.1f}%); target <= "
        f"{1 + TARGET_OVERHEAD:.2f}: "
        f"{'met' if ratio <= 1 + TARGET_OVERHEAD else 'NOT met'} "
        f"everywhere: {all(summary(c)['within_target'] for c in cases)}"
    )
    print(f"mypy's own messages unchanged: {all(c.same_messages for c in cases)}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--quick", action="store_true", help="0.6.3 only, two sizes, 3 reps")
    parser.add_argument("--reps", type=int, help="interleaved repetitions (default 5; 3 quick)")
    parser.add_argument("--versions", nargs="*", help="vLLM releases (default: all merged)")
    parser.add_argument(
        "--families", nargs="*", choices=sorted(CASES), help="generated families (default all)"
    )
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args(argv)
    reps = args.reps if args.reps is not None else (3 if args.quick else 5)
    if reps < 1:
        parser.error("--reps must be at least 1")
    versions = (
        args.versions if args.versions is not None else (QUICK_VERSIONS if args.quick else VERSIONS)
    )
    families = args.families if args.families is not None else sorted(CASES)

    with tempfile.TemporaryDirectory(prefix="bench-mypy-plugin-") as tmp:
        workdir = Path(tmp)
        cases = [
            Case("vllm", version, vllm_package(version) / "worker", VLLM_FLAGS)
            for version in versions
        ]
        by_family: dict[str, list[Case]] = {}
        for family in families:
            sizes = CASES[family][1] if args.quick else CASES[family][2]
            for size in sizes:
                target = write_case(workdir / "projects" / f"{family}-{size}", family, size)
                case = Case(family, str(size), target, ("--no-site-packages",))
                by_family.setdefault(family, []).append(case)
                cases.append(case)
        print(f"{len(cases)} cases, {reps} interleaved repetitions each", flush=True)
        warm_up = Case("warm-up", "0", cases[0].target, cases[0].flags)
        measure(warm_up, workdir, 1, quiet=True)  # compiles the bytecode both sides use
        for case in cases:
            measure(case, workdir, reps)

    growths = [row for family in families for row in growth(by_family.get(family, []))]
    print_table(cases, growths)
    if args.json:
        result = {
            "reps": reps,
            "quick": args.quick,
            "target_overhead": TARGET_OVERHEAD,
            "cases": [summary(case) for case in cases],
            "growth": growths,
        }
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0 if all(case.same_messages for case in cases) else 1


if __name__ == "__main__":
    sys.exit(main())
