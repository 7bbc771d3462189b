"""What Hypothesis itself costs ``runnercheck fuzz`` per example: its cost per test case,
what one more draw of each kind adds, and what the engine input costs when several
examples share one test case.

Each figure is CPU per test case (or per example) in this process, under the settings a
search generates with (``Phase.generate``, no database, no deadline, the collector's
threshold raised as the search raises it), with torch imported (so numpy is, and
Hypothesis manages its global random state), inside :func:`runnercheck.fuzz.prng.seeded_once`
as a search runs and, for the test case alone, also outside it:

* one draw of 12 bytes: Hypothesis's cost per test case;
* ``--draws`` draws of one kind in a composite: (that - one draw) / (draws - 1), from
  the medians, is what one more draw of that kind adds (the kinds fuzz draws: bytes, bounded integers
  as a field's pick, unbounded integers, booleans, sampled values);
* the engine input (``bench_fuzz_generation.py``'s) as one example per test case and as
  ``--batch`` examples per test case: what the cost per test case weighs in an example.

Usage::

    python benchmarks/bench_hypothesis_cost.py [--examples 300] [--reps 3] [--draws 24]
                                               [--batch 8] [--json out.json]
"""

from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from benchmarks.fuzz_rate import engine_input, generation_run  # noqa: E402


def per_test_case(strategy: Any, examples: int, seed: int) -> float:
    """CPU seconds per test case of a search over ``strategy`` that does nothing."""
    calls: list[int] = []
    run = generation_run(strategy, examples, seed, lambda value: calls.append(1))
    start = time.process_time()
    run()
    return (time.process_time() - start) / len(calls)


def repeated(kind: Any, count: int) -> Any:
    from hypothesis import strategies as st

    @st.composite
    def draws(draw: Any) -> list[Any]:
        return [draw(kind) for _ in range(count)]

    return draws()


def measure(make: Callable[[], Any], examples: int, reps: int, per: int = 1) -> dict[str, float]:
    strategy = make()
    per_test_case(strategy, 20, 0)  # warm-up
    return spread([per_test_case(strategy, examples, rep + 1) / per for rep in range(reps)])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--examples", type=int, default=300, help="test cases per repetition")
    parser.add_argument("--reps", type=int, default=3, help="repetitions per figure")
    parser.add_argument("--draws", type=int, default=24, help="draws per composite")
    parser.add_argument("--batch", type=int, default=8, help="engine inputs per test case")
    parser.add_argument("--json", type=Path, help="also write the figures to this file")
    args = parser.parse_args()

    import torch
    from hypothesis import strategies as st

    from runnercheck.fuzz.prng import seeded_once
    from runnercheck.fuzz.strategies import ALL_DTYPES, StrategyBuilder, TensorOptions

    gc.set_threshold(max(gc.get_threshold()[0], 20_000), *gc.get_threshold()[1:])
    n, reps = args.examples, args.reps
    one = lambda: st.binary(min_size=12, max_size=12)  # noqa: E731
    figures: dict[str, Any] = {"test case, Hypothesis alone": measure(one, n, reps)}
    kinds = {
        "bytes (12)": st.binary(min_size=12, max_size=12),
        "integer 0-2 (a pick)": st.integers(0, 2),
        "integer, unbounded": st.integers(),
        "boolean": st.booleans(),
        "sampled from 3": st.sampled_from((0, 1, 2)),
    }
    carried = tuple(d for d in ALL_DTYPES if d != torch.int16)  # gloo's, as fuzz asks
    builder = StrategyBuilder({}, TensorOptions(dtypes=carried, pickled_dtypes=ALL_DTYPES))
    engine = builder.for_class(engine_input()[0])
    with seeded_once():
        figures["test case"] = measure(one, n, reps)
        base = figures["test case"]["median"]
        for name, kind in kinds.items():
            many = measure(lambda k=kind: repeated(k, args.draws), n, reps)  # type: ignore[misc]
            # from the medians: what each draw after the first adds
            extra = (many["median"] - base) / (args.draws - 1)
            figures[f"one more draw: {name}"] = {"median": extra, "min": extra, "max": extra}
        figures["engine input"] = measure(lambda: engine, n, reps)
        batch = args.batch
        figures[f"engine input, {batch} per test case"] = measure(
            lambda: st.lists(engine, min_size=batch, max_size=batch), n, reps, per=batch
        )
    for name, figure in figures.items():
        low, high = figure["min"] * 1e3, figure["max"] * 1e3
        shown = f" [{low:.3f}-{high:.3f}]" if high > low else ""
        print(f"{name}: {figure['median'] * 1e3:.3f} ms{shown}")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2))


if __name__ == "__main__":
    main()
