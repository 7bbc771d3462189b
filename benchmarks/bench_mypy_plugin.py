"""Benchmark the mypy plugin: mypy with and without it, cold and warm cache, same run.

Cases: ``vllm/worker/`` of every merged-shape public vLLM wheel (0.5.1, 0.5.3.post1,
0.6.0, 0.6.3), and generated worst cases that grow (``benchmarks/plugin_cases.py``):
recursive aliases with 1..5 recursive branches, unions of 10..1000 dataclass members,
dataclasses nested 5..50 deep, 10..1000 input classes (with their runners) in one
module.

Each repetition runs, for each case, mypy with ``plugins = mypy_plugin`` and without,
in alternating order: a cold run with a fresh ``--cache-dir``, then a warm run on that
same cache; then the same two runs with the plugin once more, timed inside. Two
figures per case and cache state:

* side by side: the ratio of the medians of the child's CPU time (user + system),
  with and without the plugin, and the per-repetition ratios as its spread. On a
  shared machine two runs differ by more than the plugin costs, so this spread is
  wide;
* attributed: inside the timed run, the CPU time spent loading the plugin and in
  every call mypy makes into it (``benchmarks/mypy_timed.py``), as a share of the
  rest of the run: ``1 + plugin / (run - plugin)``. The same interruptions slow both
  parts, so this figure is steady; it is the one the target is judged on.

For each generated family, the growth from one size to the next is reported beside
the growth of the size: the plugin's time must grow no faster than the types it
walks. The run also checks that the plugin leaves mypy's own messages unchanged and
that a warm run reports what the cold one did.

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
from dataclasses import dataclass, field
from itertools import pairwise
from pathlib import Path
from typing import Any

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
TIMED = Path(__file__).with_name("mypy_timed.py")
PLUGIN_LINE = re.compile(
    r"\[(runner-input-protocol|from-dict-fixed-return|runner-input-covariance|"
    r"execute-input-mismatch|unbroadcastable-value|runnercheck-internal|runner-input-unbound)\]$"
)
VLLM_FLAGS = ("--no-site-packages", "--ignore-missing-imports", "--follow-imports=silent")
STATES = ((False, "cold"), (True, "warm"))


@dataclass
class Case:
    """One thing to check: a family (``vllm`` or a generated one) at one size."""

    family: str
    size: str
    target: Path
    flags: tuple[str, ...]
    #: (with plugin, warm) -> child CPU seconds, one per repetition.
    cpu: dict[tuple[bool, bool], list[float]] = field(default_factory=dict)
    #: warm -> attributed ratio of each run with the plugin.
    attributed: dict[bool, list[float]] = field(default_factory=dict)
    #: warm -> seconds in the plugin (load and calls) of each run with it.
    plugin_s: dict[bool, list[float]] = field(default_factory=dict)
    plugin_errors: int = 0
    same_messages: bool = True

    @property
    def label(self) -> str:
        return f"{self.family} {self.size}"

    def ratio(self, warm: bool) -> float:
        return statistics.median(self.cpu[True, warm]) / statistics.median(self.cpu[False, warm])

    def ratios(self, warm: bool) -> list[float]:
        return [a / b for a, b in zip(self.cpu[True, warm], self.cpu[False, warm], strict=True)]

    def attributed_ratio(self, warm: bool) -> float:
        return statistics.median(self.attributed[warm])

    def worst(self) -> float:
        return max(self.attributed_ratio(False), self.attributed_ratio(True))


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def child_env(workdir: Path) -> dict[str, str]:
    """The environment of every mypy run: compiled bytecode is kept (in ``workdir``), as
    in an installed package, so that neither side pays for compiling on each run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONDONTWRITEBYTECODE"}
    env["PYTHONPYCACHEPREFIX"] = str(workdir / "pycache")
    return env


def run_mypy(
    case: Case, workdir: Path, with_plugin: bool, cache: Path, timed: bool = False
) -> tuple[float, str, dict[str, Any]]:
    """One mypy run; (CPU seconds, stdout, the timing wrapper's figures)."""
    config = workdir / ("with.ini" if with_plugin else "without.ini")
    if not config.exists():
        config.write_text("[mypy]\n" + ("plugins = mypy_plugin\n" if with_plugin else ""))
    figures = workdir / "timed.json"
    cmd = [sys.executable, str(TIMED), str(figures), "--timed" if timed else "--untimed"]
    cmd += ["--", "--config-file", str(config), "--cache-dir", str(cache)]
    cmd += [*case.flags, str(case.target)]
    before = child_cpu()
    proc = subprocess.run(
        cmd, cwd=workdir, capture_output=True, text=True, timeout=3600, env=child_env(workdir)
    )
    cpu = child_cpu() - before
    if proc.returncode not in (0, 1) or proc.stderr:
        raise SystemExit(f"mypy failed ({proc.returncode}): {proc.stderr.strip()[-500:]}")
    return cpu, proc.stdout, json.loads(figures.read_text(encoding="utf-8"))


def mypy_messages(stdout: str) -> list[str]:
    """mypy's own messages (the plugin's and the summary line left out)."""
    return [
        line
        for line in stdout.splitlines()
        if not PLUGIN_LINE.search(line) and not line.startswith(("Found ", "Success: "))
    ]


def measure(case: Case, workdir: Path, reps: int, quiet: bool = False) -> None:
    for key in ((True, False), (True, True), (False, False), (False, True)):
        case.cpu[key] = []
    for warm, _ in STATES:
        case.attributed[warm], case.plugin_s[warm] = [], []
    tag = f"{case.family}-{case.size}"
    for rep in range(reps):
        outputs: dict[bool, str] = {}
        for with_plugin in (True, False) if rep % 2 == 0 else (False, True):
            cache = workdir / f"cache-{tag}-{with_plugin}-{rep}"
            for warm, _ in STATES:
                cpu, stdout, _figures = run_mypy(case, workdir, with_plugin, cache)
                case.cpu[with_plugin, warm].append(cpu)
                cold = outputs.setdefault(with_plugin, stdout)
                if sorted(stdout.splitlines()) != sorted(cold.splitlines()):
                    raise SystemExit(f"{tag}: the warm run reports other messages than the cold")
        # The attribution: the same two runs with the plugin, timed inside.
        cache = workdir / f"cache-{tag}-timed-{rep}"
        for warm, _ in STATES:
            _cpu, stdout, figures = run_mypy(case, workdir, True, cache, timed=True)
            plugin, process = figures["plugin_s"], figures["process_s"]
            case.plugin_s[warm].append(plugin)
            case.attributed[warm].append(1 + plugin / (process - plugin))
            if stdout != outputs[True]:
                raise SystemExit(f"{tag}: the timed run reports other messages")
        case.same_messages &= mypy_messages(outputs[True]) == mypy_messages(outputs[False])
        case.plugin_errors = sum(1 for x in outputs[True].splitlines() if PLUGIN_LINE.search(x))
        if not quiet:
            print(
                f"  {tag} rep {rep + 1}/{reps}: cold {case.cpu[True, False][-1]:.2f}s / "
                f"{case.cpu[False, False][-1]:.2f}s, plugin {case.plugin_s[False][-1]:.3f}s "
                f"(x{case.attributed[False][-1]:.3f}); warm {case.cpu[True, True][-1]:.2f}s / "
                f"{case.cpu[False, True][-1]:.2f}s, plugin {case.plugin_s[True][-1]:.3f}s "
                f"(x{case.attributed[True][-1]:.3f})",
                flush=True,
            )


def growth(cases: list[Case]) -> list[dict[str, float | str]]:
    """From each size of a generated family to the next: the size factor and the
    factors of mypy's cold time and of the plugin's own cold time."""
    out: list[dict[str, float | str]] = []
    for small, large in pairwise(cases):
        out.append(
            {
                "family": small.family,
                "from": small.size,
                "to": large.size,
                "size_factor": int(large.size) / int(small.size),
                "plain_cold_factor": statistics.median(large.cpu[False, False])
                / statistics.median(small.cpu[False, False]),
                "plugin_cold_factor": statistics.median(large.plugin_s[False])
                / statistics.median(small.plugin_s[False]),
            }
        )
    return out


def summary(case: Case) -> dict[str, object]:
    result: dict[str, object] = {"family": case.family, "size": case.size}
    for warm, name in STATES:
        result[name] = {
            "cpu_without_s": spread(case.cpu[False, warm]),
            "cpu_with_s": spread(case.cpu[True, warm]),
            "side_by_side_ratio_of_medians": case.ratio(warm),
            "side_by_side_ratio_per_rep": spread(case.ratios(warm)),
            "plugin_s": spread(case.plugin_s[warm]),
            "attributed_ratio": spread(case.attributed[warm]),
        }
    result["within_target"] = case.worst() <= 1 + TARGET_OVERHEAD
    result["plugin_errors"] = case.plugin_errors
    result["mypy_messages_unchanged"] = case.same_messages
    return result


def print_table(cases: list[Case], growths: list[dict[str, float | str]]) -> None:
    print("\nCPU medians; side by side = with/without (per-rep spread); attributed = in-run share")
    head = f"{'case':<18}"
    for _, name in STATES:
        head += f"| {name}: plain  plugin  side by side (spread)   attributed "
    print(head + "| errors")
    for case in cases:
        line = f"{case.label:<18}"
        for warm, _ in STATES:
            plain = statistics.median(case.cpu[False, warm])
            plugin = statistics.median(case.cpu[True, warm])
            low, high = min(case.ratios(warm)), max(case.ratios(warm))
            line += (
                f"| {plain:>9.2f}s {plugin:>6.2f}s  {case.ratio(warm):>6.3f} "
                f"({low:.2f}..{high:.2f})  {case.attributed_ratio(warm):>10.3f} "
            )
        print(line + f"| {case.plugin_errors}")
    if growths:
        print("\ngrowth, cold: size factor -> mypy's time factor, the plugin's own time factor")
        for row in growths:
            print(
                f"  {row['family']} {row['from']} -> {row['to']}: x{row['size_factor']:g} -> "
                f"mypy x{row['plain_cold_factor']:.2f}, plugin x{row['plugin_cold_factor']:.2f}"
            )
    worst = max(cases, key=Case.worst)
    warm = worst.attributed_ratio(True) > worst.attributed_ratio(False)
    ratio = worst.worst()
    met = all(case.worst() <= 1 + TARGET_OVERHEAD for case in cases)
    print(
        f"\nworst attributed: {worst.label} ({'warm' if warm else 'cold'}) x{ratio:.3f} "
        f"({100 * (ratio - 1):+.1f}%); target <= x{1 + TARGET_OVERHEAD:.2f} everywhere: "
        f"{'met' if met else 'NOT met'}"
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
    versions = args.versions
    if versions is None:
        versions = QUICK_VERSIONS if args.quick else VERSIONS
    families = args.families if args.families is not None else sorted(CASES)

    with tempfile.TemporaryDirectory(prefix="bench-mypy-plugin-") as tmp:
        workdir = Path(tmp)
        cases = [
            Case("vllm", version, vllm_package(version) / "worker", VLLM_FLAGS)
            for version in versions
        ]
        by_family: dict[str, list[Case]] = {}
        for family in families:
            for size in CASES[family][1] if args.quick else CASES[family][2]:
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
