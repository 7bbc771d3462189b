"""Run mypy and measure, inside the same process, the time the runnercheck plugin takes.

Usage: ``python benchmarks/mypy_timed.py OUT.json [--plugin] -- MYPY_ARGS...``

On a shared machine two separate mypy runs differ by more than the plugin costs, so
the benchmark also attributes time within one run: loading the plugin (importing it
and reading its settings) and every call mypy makes into it (each hook, each lookup of
a hook, including the lookups ``Plugin`` answers with None for it) are timed with
``perf_counter``, outermost calls only. The timer's own cost per call is measured
first and subtracted. The plugin's share is then ``plugin / (process - plugin)``: the
same interruptions slow both, so the share is steady where the totals are not.

OUT.json gets ``{"process_s", "plugin_s", "load_s", "calls"}``; without ``--plugin``
only ``process_s`` (the same wrapper runs both sides).
"""

from __future__ import annotations

import functools
import json
import os
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

START = time.perf_counter()


class _Timer:
    def __init__(self) -> None:
        self.spent = 0.0
        self.calls = 0
        self.depth = 0
        #: name -> [seconds, calls], for the breakdown.
        self.by_name: dict[str, list[float]] = {}

    def wrap(self, fn: Callable[..., Any], name: str = "") -> Callable[..., Any]:
        entry = self.by_name.setdefault(name, [0.0, 0])

        @functools.wraps(fn)
        def timed(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return fn(*args, **kwargs)
            self.depth = 1
            start = time.perf_counter()
            try:
                return fn(*args, **kwargs)
            finally:
                spent = time.perf_counter() - start
                self.spent += spent
                self.calls += 1
                entry[0] += spent
                entry[1] += 1
                self.depth = 0

        return timed


def _cost_per_call() -> float:
    """What the timer adds to one call, measured on a function that does nothing."""
    timer = _Timer()

    def nothing() -> None:
        return None

    timed = timer.wrap(nothing)
    rounds = 20000
    start = time.perf_counter()
    for _ in range(rounds):
        nothing()
    bare = time.perf_counter() - start
    start = time.perf_counter()
    for _ in range(rounds):
        timed()
    return max(0.0, (time.perf_counter() - start - bare) / rounds)


def main() -> None:
    out = Path(sys.argv[1])
    with_plugin = sys.argv[2] == "--plugin"
    args = sys.argv[sys.argv.index("--") + 1 :]
    sys.path = [p for p in sys.path if p not in ("", ".")]  # like the installed script
    import mypy.build
    import mypy.main

    figures: dict[str, Any] = {}
    timer = _Timer()
    if with_plugin:
        overhead = _cost_per_call()
        start = time.perf_counter()
        import mypy_plugin.hooks as hooks

        figures["load_s"] = time.perf_counter() - start
        cls = hooks.RunnercheckPlugin
        for name in dir(cls):
            value = getattr(cls, name)
            wanted = name.startswith(("get_", "report_", "set_")) or name in (
                "__init__",
                "_class_checked",
                "_runner_analyzed",
                "_input_analyzed",
            )
            if wanted and callable(value):
                setattr(cls, name, timer.wrap(value, name))

    code: int | str | None = 0
    try:
        mypy.main.main(args=args, clean_exit=True)
    except SystemExit as exc:
        code = exc.code
    figures["process_s"] = time.perf_counter() - START
    if with_plugin:
        hook_time = max(0.0, timer.spent - timer.calls * overhead)
        figures["plugin_s"] = figures["load_s"] + hook_time
        figures["calls"] = timer.calls
        figures["by_hook"] = {
            name: [seconds - calls * overhead, calls]
            for name, (seconds, calls) in timer.by_name.items()
            if calls
        }
    out.write_text(json.dumps(figures), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 1)  # as mypy does: no teardown


if __name__ == "__main__":
    main()
