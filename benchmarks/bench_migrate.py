"""Benchmark ``runnercheck migrate`` on the whole ``vllm/`` package of vLLM 0.5.0.

In the same run, interleaved repetition after repetition (so that all see the
same machine state), three measurements on the same files:

* ``migrate``: the whole pipeline through its in-process API (discovery, the byte
  prefilter, ``ast`` facts, LibCST planning and rewriting, ``compile()`` and the
  ``check`` re-analysis of the result); nothing is written;
* the *parse floor*: LibCST ``parse_module`` + ``.code`` of every file the byte
  prefilter let through (the files migrate had to parse; it reads most of them
  with the stdlib ``ast`` only);
* the *rewrite floor*: LibCST ``parse_module`` + ``.code`` of the files migrate
  actually parsed with LibCST (the worker/runner group files it rewrites).

* ``migrate_cached``: the same call with the facts cache of a repeated run (the facts
  of unchanged files read from ``.runnercheck_cache/``, as ``runnercheck migrate`` does
  unless ``--no-cache``; here under a temporary directory that a first run fills);
  ``migrate`` above uses no cache, as a first run on a tree does;

* ``migrate (before)``: the same ``migrate`` call in a child process running an earlier
  commit of runnercheck (``--baseline``, default where this branch left ``main``;
  ``benchmarks/baseline.py``), timed there the same way, in the same repetitions.

Files without the pattern cost a byte search and no parse; the summary says how
many there were. Times are process CPU seconds (``time.process_time``), which
other work on a shared machine disturbs less than wall time; wall times are
reported too.

Usage::

    python benchmarks/bench_migrate.py [--version 0.5.0] [--reps 7] [--json out.json]
                                       [--baseline REF | --no-baseline]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import libcst as cst  # noqa: E402

from benchmarks import baseline  # noqa: E402
from benchmarks.common import spread  # noqa: E402
from codemods.framework.pipeline import MigrateResult, migrate  # noqa: E402
from runnercheck.analysis.prefilter import select_sources  # noqa: E402
from runnercheck.config import Config  # noqa: E402
from tests.vllm_wheels import vllm_package  # noqa: E402


def libcst_floor(files: list[Path]) -> int:
    """Read, parse and print every file with LibCST: the least a LibCST codemod does."""
    size = 0
    for path in files:
        size += len(cst.parse_module(path.read_bytes()).code)
    return size


def timed(func: Callable[[], object]) -> tuple[float, float]:
    wall, cpu = time.perf_counter(), time.process_time()
    func()
    return time.process_time() - cpu, time.perf_counter() - wall


#: The child that times the baseline's ``migrate``: one line on stdin, one timing out.
CHILD = """
import sys, time
from codemods.framework.pipeline import migrate
from runnercheck.config import Config
package, config = sys.argv[1], Config()
migrate([package], config=config)
print("ready", flush=True)
for _ in sys.stdin:
    wall, cpu = time.perf_counter(), time.process_time()
    migrate([package], config=config)
    print(time.process_time() - cpu, time.perf_counter() - wall, flush=True)
"""


class Before:
    """``migrate`` of the baseline commit, timed in a child process on request."""

    def __init__(self, tree: Path, package: Path) -> None:
        env = baseline.environment(tree)
        env["PYTHONPATH"] += ":" + str(REPO)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", CHILD, str(package)],
            env=env,
            cwd=tree,  # ``-c`` puts the working directory first on sys.path
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        if self.proc.stdout.readline().strip() != "ready":
            raise SystemExit("bench_migrate: the baseline's migrate did not start")

    def timed(self) -> tuple[float, float]:
        assert self.proc.stdin is not None and self.proc.stdout is not None
        self.proc.stdin.write("go\n")
        self.proc.stdin.flush()
        cpu, wall = self.proc.stdout.readline().split()
        return float(cpu), float(wall)

    def close(self) -> None:
        if self.proc.stdin is not None:
            self.proc.stdin.close()
        self.proc.wait(timeout=60)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.0", help="vLLM release (default 0.5.0)")
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions")
    parser.add_argument("--json", type=Path, help="also write the figures here")
    parser.add_argument("--baseline", default=None, help="the before commit")
    parser.add_argument("--no-baseline", action="store_true", help="measure this tree alone")
    args = parser.parse_args(argv)

    package = vllm_package(args.version)
    config = Config()
    all_files = sorted(package.rglob("*.py"))
    prefiltered = select_sources(
        {p: p.read_bytes() for p in all_files}, config.contract(), runners=True
    )
    first: MigrateResult = migrate([str(package)], config=config)
    rewritten = sorted({p for p in first.changes if first.changes[p].old is not None})

    samples: dict[str, list[tuple[float, float]]] = {
        "migrate": [],
        "migrate_cached": [],
        "parse_floor": [],
        "rewrite_floor": [],
    }
    ref = args.baseline or baseline.default_ref()
    with baseline.temporary() as tmp:
        cache = Path(tmp) / "cache"
        migrate([str(package)], config=config, cache_root=cache)  # fills the facts cache
        runs: dict[str, Callable[[], object]] = {
            "migrate": lambda: migrate([str(package)], config=config),
            "migrate_cached": lambda: migrate([str(package)], config=config, cache_root=cache),
            "parse_floor": lambda: libcst_floor(prefiltered),
            "rewrite_floor": lambda: libcst_floor(rewritten),
        }
        before: Before | None = None
        if not args.no_baseline:
            tree = Path(tmp) / "before"
            tree.mkdir()
            baseline.baseline_tree(ref, tree)
            before = Before(tree, package)
            samples["migrate_before"] = []
        for _ in range(args.reps):
            for name, run in runs.items():
                samples[name].append(timed(run))
            if before is not None:
                samples["migrate_before"].append(before.timed())
        if before is not None:
            before.close()

    cpu = {name: spread([s[0] for s in values]) for name, values in samples.items()}
    wall = {name: spread([s[1] for s in values]) for name, values in samples.items()}
    ratio_parse = cpu["migrate"]["median"] / cpu["parse_floor"]["median"]
    ratio_rewrite = cpu["migrate"]["median"] / cpu["rewrite_floor"]["median"]
    ratio_cached = cpu["migrate_cached"]["median"] / cpu["rewrite_floor"]["median"]
    figures = {
        "version": args.version,
        "files": len(all_files),
        "files_prefiltered": len(prefiltered),
        "files_libcst": first.files_cst,
        "files_changed": len(first.changes),
        "refusals": len(first.refusals),
        "cpu_s": cpu,
        "wall_s": wall,
        "ratio_to_parse_floor": ratio_parse,
        "ratio_to_rewrite_floor": ratio_rewrite,
        "cached_ratio_to_rewrite_floor": ratio_cached,
        "target_ratio_to_rewrite_floor": 2.0,
    }
    if "migrate_before" in cpu:
        figures["baseline"] = baseline.short(ref)
        figures["before_ratio_to_rewrite_floor"] = (
            cpu["migrate_before"]["median"] / cpu["rewrite_floor"]["median"]
        )
        figures["after_over_before"] = cpu["migrate"]["median"] / cpu["migrate_before"]["median"]
    print(
        f"vLLM {args.version}: {len(all_files)} files, {len(prefiltered)} pass the byte prefilter "
        f"(parsed with ast), {first.files_cst} parsed with LibCST, "
        f"{len(first.changes)} changed, {len(first.refusals)} refused"
    )
    print(f"{'':16} {'cpu median':>10} {'min':>7} {'max':>7}   {'wall median':>11}")
    for name in samples:
        c, w = cpu[name], wall[name]
        print(
            f"{name:16} {c['median']:10.3f} {c['min']:7.3f} {c['max']:7.3f}   {w['median']:11.3f}"
        )
    print(f"migrate / parse floor   = {ratio_parse:.2f}x")
    print(
        f"migrate / rewrite floor = {ratio_rewrite:.2f}x (the files it rewrites; target <= 2x, "
        f"{'met' if ratio_rewrite <= 2.0 else 'NOT met'})"
    )
    print(
        f"migrate_cached / rewrite floor = {ratio_cached:.2f}x (facts of a repeated run "
        f"from the cache; {'met' if ratio_cached <= 2.0 else 'NOT met'})"
    )
    if "baseline" in figures:
        print(
            f"before ({figures['baseline']}): migrate / rewrite floor = "
            f"{figures['before_ratio_to_rewrite_floor']:.2f}x; after / before = "
            f"{figures['after_over_before']:.2f}x"
        )
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
