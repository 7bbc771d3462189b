"""``runnercheck demo`` as a newcomer runs it: this tree against an earlier commit.

The whole command (``runnercheck demo --json``), before (``--baseline``, default where
this branch left ``main``, unpacked beside it by ``benchmarks/baseline.py``) and after,
alternating, in wall time, with each stage's seconds from its JSON. The first run of
each side fills what the demo keeps between runs (mypy's cache); ``--cold`` empties
the demo's mypy cache before every run of this tree, to show a first run.

Target: at most 45 s.

Usage::

    python benchmarks/bench_demo.py [--reps 3] [--baseline REF] [--cold] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import baseline  # noqa: E402
from benchmarks.common import spread  # noqa: E402


def demo_cache() -> Path:
    import os

    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "runnercheck" / "demo-mypy"


def one_run(tree: Path, cwd: Path) -> tuple[float, dict[str, float], bool]:
    cmd, env = baseline.runnercheck_command(tree, ["demo", "--json"])
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=cwd, env=env, capture_output=True, text=True, timeout=1800)
    wall = time.perf_counter() - start
    try:
        data = json.loads(proc.stdout)
    except ValueError:
        raise SystemExit(
            f"bench_demo: no JSON from the demo ({tree}): {proc.stderr[-500:]}"
        ) from None
    stages = {stage["name"]: stage["seconds"] for stage in data.get("stages", [])}
    return wall, stages, bool(data.get("ok")) and proc.returncode == 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--reps", type=int, default=3, help="runs of each side")
    parser.add_argument("--baseline", default=None, help="the before commit")
    parser.add_argument("--cold", action="store_true", help="empty the mypy cache each run")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    args = parser.parse_args(argv)
    ref = args.baseline or baseline.default_ref()
    walls: dict[str, list[float]] = {"before": [], "after": []}
    stages: dict[str, list[dict[str, float]]] = {"before": [], "after": []}
    with baseline.temporary() as tmp:
        trees = baseline.before_and_after(ref, tmp)
        for rep in range(args.reps):
            for name in ("before", "after") if rep % 2 == 0 else ("after", "before"):
                if args.cold and name == "after":
                    shutil.rmtree(demo_cache(), ignore_errors=True)
                wall, seconds, ok = one_run(trees[name], Path(tmp))
                if not ok:
                    raise SystemExit(f"bench_demo: the demo ({name}) did not pass")
                walls[name].append(wall)
                stages[name].append(seconds)
    figures: dict[str, Any] = {
        "baseline": baseline.short(ref),
        "cold": args.cold,
        "wall_s": {name: spread(values) for name, values in walls.items()},
        "stage_s": {
            name: {stage: statistics.median(run[stage] for run in runs) for stage in runs[0]}
            for name, runs in stages.items()
        },
        "after_over_before": statistics.median(walls["after"]) / statistics.median(walls["before"]),
        "target_met": statistics.median(walls["after"]) <= 45.0,
    }
    for name in ("before", "after"):
        w = figures["wall_s"][name]
        parts = ", ".join(f"{k} {v:.1f}" for k, v in figures["stage_s"][name].items())
        label = f"{name} ({figures['baseline']})" if name == "before" else name
        print(
            f"demo {label}: {w['median']:.1f} s [{w['min']:.1f}-{w['max']:.1f}] over "
            f"{args.reps} runs; stages (median s): {parts}"
        )
    print(
        f"after / before = {figures['after_over_before']:.2f}x; target <= 45 s: "
        f"{'met' if figures['target_met'] else 'NOT met'}"
        + (" (mypy cache emptied before each run of this tree)" if args.cold else "")
    )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
