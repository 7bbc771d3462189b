"""fuzz's marginal rate against the raw broadcast, this tree beside an earlier commit.

Each tree (the earlier commit's packages and this checkout's, both copied under one
temporary directory and byte-compiled alike) is measured by a process of its own that
imports runnercheck from its tree and holds :class:`benchmarks.fuzz_rate.MarginalRate` of this tree open: the same
measurement, the same inputs. Both processes start (one after the other) before anything
is measured; then they take turns, one measurement at a time, in the order ABBA
(before, after, after, before, ...), the other side idle while one measures. The rounds
run in two halves, each with two fresh processes, started "before" first in the first
half and "after" first in the second: with the same code on both sides, the side started
second measured the faster raw rate in most rounds. A round is
one turn of each side, back to back, with nothing started or set up between them, so
both see the same load on the machine; the order alternates between rounds, so that
neither side always goes first. On a shared machine the load moves every figure between
rounds, so the figures to read are the per-round ratios (after/before) and the spreads,
not a best figure. ``--baseline HEAD`` measures this tree against itself: the per-round
ratios then show what the harness itself gives (near 1).

Usage::

    python benchmarks/fuzz_rate_baseline.py [--baseline REF] [--rounds 3] [--reps 3]
                                            [--device cpu|cuda] [--json out.json]
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import baseline  # noqa: E402
from benchmarks.common import spread  # noqa: E402

#: What each measuring process runs: this tree's measurement, the tree's runnercheck.
#: It says it is ready once its ranks have started and warmed up, then measures once
#: per "go" on its standard input and prints each measurement's figures.
MEASURE = (
    "import json, sys\n"
    "from benchmarks import fuzz_rate\n"
    "with fuzz_rate.MarginalRate(sys.argv[1], 2) as rate:\n"
    "    print('READY', flush=True)\n"
    "    for line in sys.stdin:\n"
    "        if line.strip() != 'go':\n"
    "            break\n"
    "        print('FIGURES', json.dumps(rate.measure(int(sys.argv[2]))), flush=True)\n"
)


class Side:
    """One tree's measuring process (see the module's docstring)."""

    def __init__(self, tree: Path, device: str, reps: int, cwd: Path) -> None:
        self.tree = tree
        env = dict(os.environ)
        # the tree first: its runnercheck; then this checkout: the benchmarks package
        env["PYTHONPATH"] = os.pathsep.join(
            part for part in (str(tree), str(REPO), env.get("PYTHONPATH", "")) if part
        )
        self._stderr = tempfile.TemporaryFile(mode="w+")
        self._proc = subprocess.Popen(
            [sys.executable, "-c", MEASURE, device, str(reps)],
            cwd=cwd,
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=self._stderr,
            text=True,
        )

    def _line(self, marker: str) -> str:
        assert self._proc.stdout is not None
        for line in self._proc.stdout:
            if line.startswith(marker):
                return line[len(marker) :].strip()
        self._proc.wait()
        self._stderr.seek(0)
        tail = "\n".join(self._stderr.read().strip().splitlines()[-5:])
        raise SystemExit(f"fuzz_rate_baseline: the measurement in {self.tree} failed:\n{tail}")

    def ready(self) -> None:
        self._line("READY")

    def measure(self) -> dict[str, Any]:
        assert self._proc.stdin is not None
        self._proc.stdin.write("go\n")
        self._proc.stdin.flush()
        figures: dict[str, Any] = json.loads(self._line("FIGURES"))
        return figures

    def close(self) -> None:
        if self._proc.stdin is not None and not self._proc.stdin.closed:
            try:
                self._proc.stdin.close()  # the process stops its ranks and ends
            except OSError:
                pass
        try:
            self._proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            self._proc.kill()
            self._proc.wait()
        self._stderr.close()


def side_by_side(ref: str, rounds: int, reps: int, device: str) -> dict[str, Any]:
    names = ("before", "after")
    runs: dict[str, list[dict[str, Any]]] = {name: [] for name in names}
    with baseline.temporary() as tmp:
        trees = baseline.before_and_after(ref, tmp, copy_after=True)
        # two halves, the sides started in opposite orders: the side started second
        # measured faster raw rates in most rounds with the same code on both sides
        for half, starts in enumerate((names, names[::-1])):
            first = half * ((rounds + 1) // 2)
            last = rounds if half else (rounds + 1) // 2
            if first == last:
                continue
            with contextlib.ExitStack() as stack:
                sides: dict[str, Side] = {}
                for name in starts:  # one at a time: a start does not load the other
                    side = sides[name] = Side(trees[name], device, reps, Path(tmp))
                    stack.callback(side.close)
                    side.ready()
                for round_ in range(first, last):
                    for name in names if round_ % 2 == 0 else names[::-1]:
                        figures = sides[name].measure()
                        runs[name].append(figures)
                        print(f"  round {round_ + 1}, {name}: {_line(figures)}", flush=True)
    return {
        "baseline": baseline.short(ref),
        "device": device,
        "rounds": rounds,
        "reps": reps,
        "sides": {name: _summary(runs[name]) for name in names},
        "after_over_before": _per_round(runs),
    }


def _rate(figures: dict[str, Any]) -> float | None:
    rate = figures["fuzz_marginal_per_s"]
    return float(rate) if rate is not None else None


def _cpu(figures: dict[str, Any]) -> float | None:
    cpu = figures.get("cpu") or {}
    value = cpu.get("fuzz_ms_per_example")
    return float(value) if value is not None else None


def _alone(figures: dict[str, Any]) -> float | None:
    alone = figures.get("ranks_alone") or {}
    value = alone.get("over_raw")
    return float(value) if value is not None else None


def _alone_cpu(figures: dict[str, Any]) -> float | None:
    alone = figures.get("ranks_alone") or {}
    value = alone.get("ranks_cpu_ms_per_example")
    return float(value) if value is not None else None


def _line(figures: dict[str, Any]) -> str:
    rate, cpu, alone = _rate(figures), _cpu(figures), _alone(figures)
    alone_cpu = _alone_cpu(figures)
    raw = figures["raw_broadcast"]["per_s"]["median"]
    ratio = figures["marginal_over_raw"]
    return (f"fuzz {rate:.0f}/s" if rate is not None else "fuzz not measurable") + (
        f", raw {raw:.0f}/s"
        + (f", ratio {ratio:.2f}" if ratio is not None else "")
        + (f", CPU {cpu:.2f} ms/example" if cpu is not None else "")
        + (f", ranks alone {alone:.2f} of raw" if alone is not None else "")
        + (f" (ranks' CPU {alone_cpu:.2f} ms/example)" if alone_cpu is not None else "")
    )


def _spread_of(values: list[float | None]) -> dict[str, float] | None:
    known = [v for v in values if v is not None]
    return spread(known) if known else None


def _summary(runs: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        "fuzz_marginal_per_s": _spread_of([_rate(f) for f in runs]),
        "raw_per_s": _spread_of([f["raw_broadcast"]["per_s"]["median"] for f in runs]),
        "marginal_over_raw": _spread_of([f["marginal_over_raw"] for f in runs]),
        "fuzz_cpu_ms_per_example": _spread_of([_cpu(f) for f in runs]),
        "ranks_alone_over_raw": _spread_of([_alone(f) for f in runs]),
        "ranks_alone_cpu_ms_per_example": _spread_of([_alone_cpu(f) for f in runs]),
        "runs": runs,
    }


def _per_round(runs: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """after/before of each round's rate ratio, CPU per example, fuzz rate, raw rate
    and the ranks' CPU per example when they run alone."""
    found: dict[str, list[float]] = {"marginal_over_raw": [], "cpu_per_example": []}
    found.update(fuzz_per_s=[], raw_per_s=[], ranks_alone_cpu_per_example=[])
    for before, after in zip(runs["before"], runs["after"], strict=True):
        for key, value in (
            ("marginal_over_raw", lambda f: f["marginal_over_raw"]),
            ("cpu_per_example", _cpu),
            ("fuzz_per_s", _rate),
            ("raw_per_s", lambda f: f["raw_broadcast"]["per_s"]["median"]),
            ("ranks_alone_cpu_per_example", _alone_cpu),
        ):
            first, second = value(before), value(after)
            if first and second is not None:
                found[key].append(second / first)
    return {key: spread(values) if values else None for key, values in found.items()}


def describe(figures: dict[str, Any]) -> str:
    lines = [
        f"fuzz marginal rate vs raw broadcast ({figures['device']}, world size 2), "
        f"before ({figures['baseline']}) and after, {figures['rounds']} alternating rounds "
        f"of {figures['reps']} repetitions (medians [min-max] over rounds):"
    ]
    for name in ("before", "after"):
        side = figures["sides"][name]
        parts = [f"  {name}:"]
        for key, label, fmt, unit in (
            ("fuzz_marginal_per_s", "fuzz", "{:.0f}", "/s"),
            ("raw_per_s", "raw", "{:.0f}", "/s"),
            ("marginal_over_raw", "ratio", "{:.2f}", ""),
            ("fuzz_cpu_ms_per_example", "CPU", "{:.2f}", " ms/example"),
            ("ranks_alone_over_raw", "ranks alone", "{:.2f}", " of raw"),
            ("ranks_alone_cpu_ms_per_example", "ranks alone CPU", "{:.2f}", " ms/example"),
        ):
            value = side[key]
            if value is not None:
                parts.append(
                    f"{label} {fmt.format(value['median'])}{unit} "
                    f"[{fmt.format(value['min'])}-{fmt.format(value['max'])}]"
                )
        lines.append(" ".join(parts[:1]) + " " + ", ".join(parts[1:]))
    per_round = figures["after_over_before"]
    for key, label in (
        ("marginal_over_raw", "rate ratio"),
        ("cpu_per_example", "CPU per example"),
        ("fuzz_per_s", "fuzz rate"),
        ("raw_per_s", "raw rate"),
        ("ranks_alone_cpu_per_example", "the ranks' CPU per example, alone"),
    ):
        value = per_round.get(key)
        if value is not None:
            lines.append(
                f"  after/before per round, {label}: {value['median']:.2f} "
                f"[{value['min']:.2f}-{value['max']:.2f}]"
            )
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--baseline", default=None, help="the before commit (default: merge-base)")
    parser.add_argument("--rounds", type=int, default=3, help="alternating rounds (default 3)")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per measurement")
    parser.add_argument("--device", choices=("cpu", "cuda"), default="cpu")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()
    if args.rounds < 1 or args.reps < 1:
        parser.error("--rounds and --reps must be at least 1")
    figures = side_by_side(
        args.baseline or baseline.default_ref(), args.rounds, args.reps, args.device
    )
    print(describe(figures))
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
