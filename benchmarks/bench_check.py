"""Benchmark ``runnercheck check`` on the whole ``vllm/`` package of a real release.

Measurements on the same tree, in the same run:

* the parse floor of the files ``check`` parses: read and ``ast.parse`` exactly the files
  that ``runnercheck check`` hands to ``ast.parse`` (found by recording its calls in a
  warm-up run: the files that pass the byte prefilter and the imported files it reads
  for context), in this process;
* the parse floor of the whole tree: read and ``ast.parse`` every ``.py`` file;
* ``runnercheck check`` through its in-process API (discovery, prefilter, facts, rules);
  the two floors and the check alternate, repetition after repetition, so that all see
  the same machine state;
* start-up: ``runnercheck check`` on one empty file, as a command, against the bare
  interpreter (``python -c pass``), alternating, in wall time and in CPU time;
* cold ``mypy`` on the same tree (a fresh ``--cache-dir``, ``--ignore-missing-imports
  --follow-imports=silent --no-site-packages`` so that it checks vLLM and not torch),
  against ``runnercheck check`` run the same way, as a command. Both exit codes are
  checked: mypy must exit 0 or 1 (1: it reported type errors; 2 is a crash or a usage
  error and stops the benchmark), and the command must exit as the in-process check.

* commands, before and after (``--speed-reps``, on ``--speed-version``, default 0.6.3):
  this tree against an earlier commit (``--baseline``, default where this branch left
  ``main``, unpacked beside it by ``benchmarks/baseline.py``) and against ruff (its
  default rules, ``--no-cache --isolated``), on a copy of the tree, interleaved, in the
  child processes' CPU time (user + system), medians: one file as a pre-commit hook
  passes it (cold, ``--no-cache``, and with the facts cache warm), the whole tree cold
  (``--no-cache``) and repeated on the unchanged tree (served from the facts cache).
  Targets: one file <= 0.2 s, repeated tree <= 0.3 s, cold tree <= ruff.

Usage::

    python benchmarks/bench_check.py [--version 0.6.0] [--reps 9] [--mypy-runs 1] [--json out.json]
    python benchmarks/bench_check.py --reps 0 --mypy-runs 0 --startup-runs 0 --speed-reps 9

The vLLM wheel is downloaded once from the package index and cached (see
``tests/vllm_wheels.py``).
"""

from __future__ import annotations

import argparse
import ast
import json
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import baseline  # noqa: E402
from benchmarks.common import spread  # noqa: E402
from runnercheck.check import CheckResult, check_paths  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402


def parse_floor(files: list[Path]) -> int:
    """Read and parse every file; the least any ``ast``-based checker must do."""
    nodes = 0
    for path in files:
        nodes += len(ast.parse(path.read_bytes(), filename=str(path)).body)
    return nodes


def files_check_parses(package: Path) -> tuple[list[Path], int]:
    """The files one ``check_paths([package])`` run parses, and its number of parses."""
    calls: list[str] = []
    real_parse = ast.parse

    def recording_parse(source: Any, filename: Any = "<unknown>", *args: Any, **kw: Any) -> Any:
        calls.append(str(filename))
        return real_parse(source, filename, *args, **kw)

    ast.parse = recording_parse  # type: ignore[assignment]
    try:
        check_paths([package], jobs=1)
    finally:
        ast.parse = real_parse
    calls = [name for name in calls if not name.startswith("<")]  # snippets, not files
    files = sorted({Path(name).resolve() for name in calls})
    missing = [f for f in files if not f.is_file()]
    if missing:
        raise SystemExit(f"bench_check: parsed something that is not a file: {missing[0]}")
    return files, len(calls)


def run_mypy(package: Path) -> tuple[float, int, int]:
    """Cold mypy on ``vllm/``: seconds, exit code, error lines. Stops on a crash (exit 2)."""
    with tempfile.TemporaryDirectory() as cache:
        cmd = [
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
        ]
        start = time.perf_counter()
        proc = subprocess.run(
            cmd, cwd=package.parent, capture_output=True, text=True, timeout=3600, check=False
        )
        seconds = time.perf_counter() - start
    if proc.returncode not in (0, 1):
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
        raise SystemExit(f"bench_check: mypy exited {proc.returncode}: {tail[0]}")
    errors = sum(1 for line in proc.stdout.splitlines() if ": error:" in line)
    return seconds, proc.returncode, errors


def timed(func: Callable[[], object]) -> float:
    start = time.perf_counter()
    func()
    return time.perf_counter() - start


def run_command(cmd: list[str], cwd: Path, expected_exit: int) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, capture_output=True, text=True, timeout=3600, check=False)
    seconds = time.perf_counter() - start
    if proc.returncode != expected_exit:
        raise SystemExit(
            f"bench_check: {' '.join(cmd[2:])} exited {proc.returncode}, not {expected_exit}: "
            + (proc.stderr.strip().splitlines() or ["no output"])[-1]
        )
    return seconds


def child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def startup(runs: int) -> dict[str, object]:
    """``runnercheck check EMPTY.py`` against ``python -c pass``, as commands, alternating:
    wall time and CPU time (user + system; less disturbed by other jobs on the machine)."""
    wall: dict[str, list[float]] = {"bare": [], "check": []}
    cpu: dict[str, list[float]] = {"bare": [], "check": []}
    commands = {
        "bare": [sys.executable, "-c", "pass"],
        "check": [sys.executable, "-m", "runnercheck", "check", "empty.py"],
    }
    with tempfile.TemporaryDirectory() as tmp:
        (Path(tmp) / "empty.py").write_text("", encoding="utf-8")
        for _ in range(runs):
            for name, cmd in commands.items():
                before = child_cpu()
                wall[name].append(run_command(cmd, Path(tmp), 0))
                cpu[name].append(child_cpu() - before)
    return {
        "python_c_pass_s": spread(wall["bare"]),
        "check_empty_file_s": spread(wall["check"]),
        "python_c_pass_cpu_s": spread(cpu["bare"]),
        "check_empty_file_cpu_s": spread(cpu["check"]),
        "check_start_up_s": statistics.median(wall["check"]) - statistics.median(wall["bare"]),
        "check_start_up_cpu_s": statistics.median(cpu["check"]) - statistics.median(cpu["bare"]),
    }


PYPROJECT = """[tool.runnercheck]
driver_only = ["ModelInputForGPU.seq_lens", "ModelInputForGPU.query_lens"]
exclude = ["vllm/third_party/*"]
"""

#: The file a pre-commit hook passes (a worker: its runner is read for context).
ONE_FILE = "vllm/worker/worker.py"


def command_speed(version: str, reps: int, ref: str) -> dict[str, Any]:
    """Before/after/ruff as commands on a copy of ``vllm/``, interleaved (CPU seconds)."""
    ruff = str(Path(sys.executable).parent / "ruff")
    with baseline.temporary() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        baseline.baseline_tree(ref, before)
        baseline.compile_tree(REPO)
        work = Path(tmp) / "tree"
        shutil.copytree(vllm_package(version), work / "vllm")
        # a configured project, as a pre-commit user's is (ruff runs --isolated)
        (work / "pyproject.toml").write_text(PYPROJECT, encoding="utf-8")

        def ours(tree: Path, *args: str) -> tuple[list[str], dict[str, str] | None]:
            return baseline.runnercheck_command(tree, ["check", *args])

        cases: dict[str, tuple[list[str], dict[str, str] | None]] = {
            "python -c pass": ([sys.executable, "-c", "pass"], None),
            "before: check FILE": ours(before, ONE_FILE),
            "after: check --no-cache FILE": ours(REPO, "--no-cache", ONE_FILE),
            "after: check FILE, cache warm": ours(REPO, ONE_FILE),
            "before: check TREE": ours(before, "vllm"),
            "before: check --no-cache TREE": ours(before, "--no-cache", "vllm"),
            "after: check --no-cache TREE": ours(REPO, "--no-cache", "vllm"),
            "after: check TREE, cache warm": ours(REPO, "vllm"),
            "ruff check --no-cache --isolated TREE": (
                [ruff, "check", "--no-cache", "--isolated", "vllm"],
                None,
            ),
        }
        exits: dict[str, int] = {}
        for name, (cmd, env) in cases.items():  # warm-up; fills the facts cache
            exits[name] = baseline.timed_command(cmd, work, env)[2]
        for what in ("FILE", "TREE"):  # before and after must agree
            codes = {exits[n] for n in cases if what in n and n.startswith(("before", "after"))}
            if len(codes) != 1:
                raise SystemExit(f"bench_check: exit codes differ on {what}: {exits}")
        cpu: dict[str, list[float]] = {name: [] for name in cases}
        wall: dict[str, list[float]] = {name: [] for name in cases}
        names = list(cases)
        for rep in range(reps):
            for name in names[rep % len(names) :] + names[: rep % len(names)]:
                cmd, env = cases[name]
                spent, seconds, _ = baseline.timed_command(cmd, work, env)
                cpu[name].append(spent)
                wall[name].append(seconds)
    med = {name: statistics.median(samples) for name, samples in cpu.items()}
    ruff_version = subprocess.run([ruff, "--version"], capture_output=True, text=True).stdout
    return {
        "vllm": version,
        "baseline": baseline.short(ref),
        "ruff": ruff_version.strip(),
        "one_file": ONE_FILE,
        "cpu_s": {name: spread(samples) for name, samples in cpu.items()},
        "wall_s": {name: spread(samples) for name, samples in wall.items()},
        "ratios": {
            "one file, after (no cache) / before": med["after: check --no-cache FILE"]
            / med["before: check FILE"],
            "tree, after warm cache / before": med["after: check TREE, cache warm"]
            / med["before: check TREE"],
            "tree cold, before / ruff": med["before: check --no-cache TREE"]
            / med["ruff check --no-cache --isolated TREE"],
            "tree cold, after / ruff": med["after: check --no-cache TREE"]
            / med["ruff check --no-cache --isolated TREE"],
        },
        "targets": {
            "one file <= 0.2 s CPU": med["after: check --no-cache FILE"] <= 0.2,
            "repeated tree <= 0.3 s CPU": med["after: check TREE, cache warm"] <= 0.3,
            "cold tree <= ruff": med["after: check --no-cache TREE"]
            <= med["ruff check --no-cache --isolated TREE"],
        },
    }


def print_speed(figures: dict[str, Any], reps: int) -> None:
    print(
        f"commands on vLLM {figures['vllm']} vllm/ (copy), CPU seconds, medians of {reps}, "
        f"before = {figures['baseline']}, {figures['ruff']}:"
    )
    for name, samples in figures["cpu_s"].items():
        label = name.replace("FILE", figures["one_file"])
        print(
            f"  {label + ':':<52} {samples['median']:.3f}s "
            f"[{samples['min']:.3f}-{samples['max']:.3f}] "
            f"(wall {figures['wall_s'][name]['median']:.3f}s)"
        )
    for name, ratio in figures["ratios"].items():
        print(f"  {name}: {ratio:.2f}x")
    for name, met in figures["targets"].items():
        print(f"  target {name}: {'met' if met else 'NOT met'}")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--version", default="0.6.0", help="vLLM release (default 0.6.0)")
    parser.add_argument("--reps", type=int, default=9, help="interleaved repetitions")
    parser.add_argument("--mypy-runs", type=int, default=1, help="cold mypy runs (0: skip)")
    parser.add_argument("--startup-runs", type=int, default=15, help="start-up runs (0: skip)")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument(
        "--speed-reps", type=int, default=0, help="before/after/ruff command runs (0: skip)"
    )
    parser.add_argument("--speed-version", default="0.6.3", help="vLLM release of those runs")
    parser.add_argument(
        "--baseline", default=None, help="the before commit (default: where HEAD left main)"
    )
    args = parser.parse_args(argv)
    if args.reps <= 0:
        if args.speed_reps <= 0:
            raise SystemExit("bench_check: nothing to measure (--reps 0 and --speed-reps 0)")
        figures = command_speed(
            args.speed_version, args.speed_reps, args.baseline or baseline.default_ref()
        )
        print_speed(figures, args.speed_reps)
        if args.json:
            args.json.write_text(json.dumps({"speed": figures}, indent=2) + "\n")
        return 0

    package = vllm_package(args.version)
    files = sorted(package.rglob("*.py"))
    parsed, parse_calls = files_check_parses(package)
    result_holder: list[CheckResult] = []

    def floor_all() -> None:
        parse_floor(files)

    def floor_parsed() -> None:
        parse_floor(parsed)

    def check() -> None:
        result_holder.append(check_paths([package], jobs=1))

    floor_all()
    floor_parsed()
    check()  # warm: imports, page cache
    times: dict[str, list[float]] = {"parsed": [], "check": [], "all": []}
    order = [("parsed", floor_parsed), ("check", check), ("all", floor_all)]
    for rep in range(args.reps):
        for name, func in order[rep % 3 :] + order[: rep % 3]:  # rotate who goes first
            times[name].append(timed(func))
    result = result_holder[-1]
    check_times = times["check"]
    over_parsed = [c / f for c, f in zip(check_times, times["parsed"], strict=True)]
    over_all = [c / f for c, f in zip(check_times, times["all"], strict=True)]

    figures: dict[str, object] = {
        "vllm": args.version,
        "files": len(files),
        "files_check_parses": len(parsed),
        "check_parse_calls": parse_calls,
        "check_summary": result.summary(),
        "parse_floor_parsed_files_s": spread(times["parsed"]),
        "parse_floor_all_files_s": spread(times["all"]),
        "check_in_process_s": spread(check_times),
        "check_over_floor_parsed_files": spread(over_parsed),
        "check_over_floor_all_files": spread(over_all),
    }

    if args.startup_runs > 0:
        figures["startup"] = startup(args.startup_runs)

    if args.mypy_runs > 0:
        cli_times: list[float] = []
        mypy_times: list[float] = []
        mypy_exits: list[int] = []
        mypy_errors: list[int] = []
        for _ in range(args.mypy_runs):
            cli_times.append(
                run_command(
                    [sys.executable, "-m", "runnercheck", "check", "vllm"],
                    package.parent,
                    result.exit_code,
                )
            )
            seconds, code, errors = run_mypy(package)
            mypy_times.append(seconds)
            mypy_exits.append(code)
            mypy_errors.append(errors)
        figures["check_command_s"] = spread(cli_times)
        figures["mypy_cold_s"] = spread(mypy_times)
        figures["mypy_exit_codes"] = mypy_exits
        figures["mypy_error_lines"] = mypy_errors
        figures["mypy_over_check_command"] = statistics.median(mypy_times) / statistics.median(
            cli_times
        )
        figures["mypy_over_check_in_process"] = statistics.median(mypy_times) / statistics.median(
            check_times
        )

    summary = result.summary()
    print(f"vLLM {args.version}: {len(files)} files under vllm/")
    print(
        f"  check: {summary['files_parsed']} parsed, {summary['files_skipped']} skipped by the "
        f"prefilter, {summary['partner_files']} read for context, {summary['findings']} findings;"
        f" ast.parse called {parse_calls} times on {len(parsed)} files"
    )
    rows = [
        (f"parse floor, the {len(parsed)} files check parses", times["parsed"]),
        (f"parse floor, all {len(files)} files", times["all"]),
        ("runnercheck check (in-process)", check_times),
    ]
    for label, samples in rows:
        print(
            f"  {label + ':':<42} median {statistics.median(samples):.3f}s "
            f"[{min(samples):.3f}-{max(samples):.3f}] over {args.reps} reps"
        )
    for label, ratios in (("files it parses", over_parsed), ("whole tree", over_all)):
        print(
            f"  check / floor ({label}): median {statistics.median(ratios):.2f}x "
            f"[{min(ratios):.2f}-{max(ratios):.2f}]"
        )
    if "startup" in figures:
        up = figures["startup"]
        assert isinstance(up, dict)
        for kind, suffix in (("wall", ""), ("CPU", "_cpu")):
            print(
                f"  start-up ({kind}): `runnercheck check empty.py` "
                f"{up['check_empty_file' + suffix + '_s']['median']:.3f}s, `python -c pass` "
                f"{up['python_c_pass' + suffix + '_s']['median']:.3f}s: runnercheck's own "
                f"{up['check_start_up' + suffix + '_s']:.3f}s (medians of {args.startup_runs})"
            )
    if "mypy_cold_s" in figures:
        mypy_s = figures["mypy_cold_s"]
        cli_s = figures["check_command_s"]
        assert isinstance(mypy_s, dict) and isinstance(cli_s, dict)
        print(
            f"  cold mypy: median {mypy_s['median']:.2f}s over {args.mypy_runs} run(s), exit "
            f"{mypy_exits} with {mypy_errors} error lines; `runnercheck check` command: "
            f"{cli_s['median']:.2f}s"
        )
        print(
            f"  mypy / check: {figures['mypy_over_check_command']:.1f}x as commands, "
            f"{figures['mypy_over_check_in_process']:.1f}x against the in-process check "
            "(target >= 10x)"
        )
    if args.speed_reps > 0:
        speed = command_speed(
            args.speed_version, args.speed_reps, args.baseline or baseline.default_ref()
        )
        figures["speed"] = speed
        print_speed(speed, args.speed_reps)
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
