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

Files without the pattern cost a byte search and no parse; the summary says how
many there were. Times are process CPU seconds (``time.process_time``), which
other work on a shared machine disturbs less than wall time; wall times are
reported too.

Usage::

    python benchmarks/bench_migrate.py [--version 0.5.0] [--reps 7] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import libcst as cst  # noqa: E402

from benchmarks.common import spread  # noqa: E402
from codemods.pipeline import MigrateResult, migrate  # noqa: E402
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


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--version", default="0.5.0", help="vLLM release (default 0.5.0)")
    parser.add_argument("--reps", type=int, default=7, help="interleaved repetitions")
    parser.add_argument("--json", type=Path, help="also write the figures here")
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
        "parse_floor": [],
        "rewrite_floor": [],
    }
    runs: dict[str, Callable[[], object]] = {
        "migrate": lambda: migrate([str(package)], config=config),
        "parse_floor": lambda: libcst_floor(prefiltered),
        "rewrite_floor": lambda: libcst_floor(rewritten),
    }
    for _ in range(args.reps):
        for name, run in runs.items():
            samples[name].append(timed(run))

    cpu = {name: spread([s[0] for s in values]) for name, values in samples.items()}
    wall = {name: spread([s[1] for s in values]) for name, values in samples.items()}
    ratio_parse = cpu["migrate"]["median"] / cpu["parse_floor"]["median"]
    ratio_rewrite = cpu["migrate"]["median"] / cpu["rewrite_floor"]["median"]
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
        "target_ratio": 1.5,
    }
    print(
        f"vLLM {args.version}: {len(all_files)} files, {len(prefiltered)} pass the byte prefilter "
        f"(parsed with ast), {first.files_cst} parsed with LibCST, "
        f"{len(first.changes)} changed, {len(first.refusals)} refused"
    )
    print(f"{'':14} {'cpu median':>10} {'min':>7} {'max':>7}   {'wall median':>11}")
    for name in runs:
        c, w = cpu[name], wall[name]
        print(
            f"{name:14} {c['median']:10.3f} {c['min']:7.3f} {c['max']:7.3f}   {w['median']:11.3f}"
        )
    print(f"migrate / parse floor   = {ratio_parse:.2f}x (target <= 1.5x)")
    print(f"migrate / rewrite floor = {ratio_rewrite:.2f}x (LibCST files only)")
    if args.json:
        args.json.write_text(json.dumps(figures, indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
