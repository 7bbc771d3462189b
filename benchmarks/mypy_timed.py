"""Run mypy and measure, inside the same process, the CPU time the runnercheck plugin
takes.

Usage: ``python benchmarks/mypy_timed.py OUT.json --timed|--untimed -- MYPY_ARGS...``

On a shared machine two separate mypy runs differ by more than the plugin costs, so
the benchmark also attributes CPU time within one run (``time.process_time``, which
an interrupted process does not accumulate):

* loading the plugin: importing it and making the plugin object;
* every call of a hook (the work), outermost calls only, less the timer's own cost
  per call, measured first;
* the hook lookups the plugin answers (``get_method_hook``...): thousands of calls of
  a microsecond, too short to time one by one, so they are recorded and replayed
  together on the same plugin object after mypy is done;
* the hook lookups that ``Plugin`` answers with None on the plugin's behalf, counted
  and costed at what such a call costs, measured in the same process.

The plugin's share is then ``plugin / (process - plugin)``.

OUT.json gets ``{"process_s", "plugin_s", "load_s", "calls", "by_method"}``; with
``--untimed`` only ``process_s``, and nothing is measured or wrapped: the benchmark's
side-by-side runs (with the plugin and without) are untimed, so that the timer's own
cost is in neither.
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

clock = time.process_time


class _Timer:
    def __init__(self) -> None:
        self.depth = 0
        #: method name -> [seconds, calls].
        self.by_name: dict[str, list[float]] = {}

    def timed(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        entry = self.by_name.setdefault(name, [0.0, 0])

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            if self.depth:
                return fn(*args, **kwargs)
            self.depth = 1
            start = clock()
            try:
                return fn(*args, **kwargs)
            finally:
                entry[0] += clock() - start
                entry[1] += 1
                self.depth = 0

        return wrapper

    def counted(self, fn: Callable[..., Any], name: str) -> Callable[..., Any]:
        entry = self.by_name.setdefault(name, [0.0, 0])

        @functools.wraps(fn)
        def wrapper(*args: Any, **kwargs: Any) -> Any:
            entry[1] += 1
            return fn(*args, **kwargs)

        return wrapper

    def recorded(
        self, fn: Callable[..., Any], name: str, log: list[tuple[Any, ...]]
    ) -> Callable[..., Any]:
        entry = self.by_name.setdefault(name, [0.0, 0])

        @functools.wraps(fn)
        def wrapper(*args: Any) -> Any:
            entry[1] += 1
            log.append(args)
            return fn(*args)

        return wrapper


def _per_call(fn: Callable[[], object], rounds: int = 20000) -> float:
    start = clock()
    for _ in range(rounds):
        fn()
    return (clock() - start) / rounds


def main() -> None:
    out = Path(sys.argv[1])
    with_plugin = sys.argv[2] == "--timed"
    args = sys.argv[sys.argv.index("--") + 1 :]
    sys.path = [p for p in sys.path if p not in ("", ".", str(Path(__file__).parent))]
    import mypy.build
    import mypy.main
    from mypy.plugin import Plugin

    figures: dict[str, Any] = {}
    timer = _Timer()
    own: list[str] = []
    lookups: list[str] = []
    inherited: list[str] = []
    logs: dict[str, list[tuple[Any, ...]]] = {}
    overhead = bare = 0.0
    if with_plugin:
        start = clock()
        import mypy_plugin.hooks as hooks

        figures["load_s"] = clock() - start
        cls = hooks.RunnercheckPlugin
        # What the timer adds to a call, and what a lookup Plugin answers costs.
        timed_nothing = _Timer().timed(lambda: None, "nothing")
        overhead = _per_call(timed_nothing) - _per_call(lambda: None)
        probe = Plugin(mypy.main.Options())
        bare = _per_call(lambda: probe.get_function_hook("m.f"))
        for name in dir(cls):
            value = getattr(cls, name)
            if not callable(value) or (name.startswith("__") and name != "__init__"):
                continue
            if name.startswith(("get_", "report_", "set_")):
                if name not in cls.__dict__:
                    inherited.append(name)
                elif name == "get_additional_indirect_deps":
                    own.append(name)  # the checks at each module's end
                else:
                    lookups.append(name)
            elif name in (
                "__init__",
                "_class_checked",
                "_module_end",
                "_runner_analyzed",
                "_input_analyzed",
            ):
                own.append(name)
        for name in own:
            setattr(cls, name, timer.timed(getattr(cls, name), name))
        for name in inherited:
            setattr(cls, name, timer.counted(getattr(cls, name), name))
        for name in lookups:
            logs[name] = []
            setattr(cls, name, timer.recorded(getattr(cls, name), name, logs[name]))

    code: int | str | None = 0
    try:
        mypy.main.main(args=args, clean_exit=True)
    except SystemExit as exc:
        code = exc.code
    figures["process_s"] = clock()
    if with_plugin:
        for name, log in logs.items():
            method = getattr(cls, name).__wrapped__
            start = clock()
            for args in log:
                method(*args)
            timer.by_name[name][0] = clock() - start
        by_method = {}
        for name, (seconds, calls) in timer.by_name.items():
            if calls:
                if name in own:
                    cost = seconds - calls * overhead
                elif name in logs:
                    cost = seconds
                else:
                    cost = calls * bare
                by_method[name] = [max(0.0, cost), int(calls)]
        figures["by_method"] = by_method
        figures["calls"] = sum(calls for _, calls in by_method.values())
        figures["plugin_s"] = figures["load_s"] + sum(cost for cost, _ in by_method.values())
    out.write_text(json.dumps(figures), encoding="utf-8")
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(code if isinstance(code, int) else 1)  # as mypy does: no teardown


if __name__ == "__main__":
    main()
