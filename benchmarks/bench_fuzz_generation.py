"""What generating one example costs ``runnercheck fuzz`` in the process that runs
Hypothesis, this tree against an earlier commit, side by side.

The example is the merged demo engine's ``ModelInputForGPUWithSamplingMetadata`` (the
input ``bench_fuzz.py`` round-trips), from fuzz's own strategy with the gloo
transport's dtypes, under the settings a search generates with (``Phase.generate``,
no database, the collector's threshold raised as the search raises it). Each
measurement is a child process of either tree (the tree first on ``PYTHONPATH``):
``--examples`` examples with a seed per repetition, best and median CPU time per
example over ``--reps``; the trees alternate, so that both see the same load.

* generation: Hypothesis drawing the examples, with a test that does nothing;
* with the hand-over: also the expected side's snapshot of each example and its
  pickling for rank 0, what the command does before an example goes out.

Beside them, what the examples hold (tensors, and fields away from their defaults,
per example, nested ones included): a cheaper example must not be a smaller one.

Usage::

    python benchmarks/bench_fuzz_generation.py [--baseline REF] [--examples 300]
                                               [--reps 5] [--rounds 3] [--json out.json]
"""

from __future__ import annotations

import argparse
import dataclasses
import gc
import json
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


def _content(example: Any, counts: dict[str, int]) -> None:
    import torch

    if isinstance(example, torch.Tensor):
        counts["tensors"] += 1
        counts["elements"] += example.numel()
    elif dataclasses.is_dataclass(example) and not isinstance(example, type):
        for f in dataclasses.fields(example):
            value = getattr(example, f.name)
            if f.default is dataclasses.MISSING or value is not f.default:
                counts["fields set"] += 1
            _content(value, counts)
    elif isinstance(example, (list, tuple, set, frozenset)):
        for item in example:
            _content(item, counts)
    elif isinstance(example, dict):
        for item in example.values():
            _content(item, counts)


def child(examples: int, reps: int) -> dict[str, Any]:
    """The figures of the tree this process runs in (its working directory)."""
    sys.path.insert(0, str(Path.cwd()))  # that tree's runnercheck, not this file's
    import torch

    from benchmarks.fuzz_rate import generated_inputs
    from runnercheck.config import Config
    from runnercheck.fuzz import transfer
    from runnercheck.fuzz.search import driver_only_rule
    from runnercheck.fuzz.snapshot import Snapshotter
    from runnercheck.fuzz.strategies import ALL_DTYPES

    carried = tuple(d for d in ALL_DTYPES if d != torch.int16)  # gloo's, as fuzz asks
    snapshotter = Snapshotter(driver_only_rule(Config()), True, "cpu")
    gc.set_threshold(max(gc.get_threshold()[0], 20_000), *gc.get_threshold()[1:])

    def hand_over(example: Any) -> None:
        snapshotter.take(example)
        transfer.dumps(example)

    def run(count: int, run_seed: int, each: Any = None) -> tuple[float, list[Any]]:
        start = time.process_time()
        made = generated_inputs(count, run_seed, carried, each)
        return (time.process_time() - start) / len(made), made

    run(20, 0, hand_over)  # warm-up
    figures: dict[str, Any] = {}
    for name, each in (("generation", None), ("with the hand-over", hand_over)):
        per_example = [run(examples, rep + 1, each)[0] for rep in range(reps)]
        figures[name] = {"best": min(per_example), "median": statistics.median(per_example)}
    _, made = run(examples, 1)
    counts = {"tensors": 0, "elements": 0, "fields set": 0}
    for example in made:
        _content(example, counts)
    figures["per example"] = {k: v / len(made) for k, v in counts.items()}
    return figures


def measure(tree: Path, examples: int, reps: int) -> dict[str, Any]:
    proc = subprocess.run(
        [sys.executable, str(Path(__file__)), "--child", str(examples), str(reps)],
        cwd=tree,
        env=baseline.environment(tree),
        capture_output=True,
        text=True,
        timeout=900,
    )
    if proc.returncode != 0:
        raise SystemExit(f"generation benchmark in {tree} failed:\n{proc.stderr}")
    figures: dict[str, Any] = json.loads(proc.stdout.splitlines()[-1])
    return figures


def describe(name: str, figures: list[dict[str, Any]]) -> str:
    best = min(f["generation"]["best"] for f in figures) * 1e3
    median = statistics.median(f["generation"]["median"] for f in figures) * 1e3
    handed = min(f["with the hand-over"]["best"] for f in figures) * 1e3
    held = figures[-1]["per example"]
    return (
        f"{name}: generation {best:.3f} ms per example at best (median {median:.3f}), "
        f"with the hand-over {handed:.3f} ms; per example {held['tensors']:.2f} tensors "
        f"({held['elements']:.0f} elements), {held['fields set']:.2f} fields set"
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=None, help="the before commit (default: main's)")
    parser.add_argument("--examples", type=int, default=300, help="examples per repetition")
    parser.add_argument("--reps", type=int, default=5, help="repetitions per measurement")
    parser.add_argument("--rounds", type=int, default=3, help="measurements of each tree")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    parser.add_argument("--child", nargs=2, type=int, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        print(json.dumps(child(*args.child)))
        return
    ref = args.baseline or baseline.default_ref()
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    with baseline.temporary() as tmp:
        before = Path(tmp) / "before"
        before.mkdir()
        baseline.baseline_tree(ref, before)
        trees = {"before": before, "after": REPO}
        for round_ in range(args.rounds):
            for name in ("before", "after") if round_ % 2 == 0 else ("after", "before"):
                results[name].append(measure(trees[name], args.examples, args.reps))
    print(describe(f"before ({baseline.short(ref)})", results["before"]))
    print(describe("after (this tree)", results["after"]))
    ratio = min(f["generation"]["best"] for f in results["after"]) / min(
        f["generation"]["best"] for f in results["before"]
    )
    print(f"generation after/before: {ratio:.2f}")
    if args.json:
        args.json.write_text(json.dumps({"baseline": ref, **results}, indent=2))


if __name__ == "__main__":
    main()
