"""Benchmark ``runnercheck check`` on 10 files with 200,000 ``exclude`` globs against
the same check with none.

Two copies of the same 10 files (the demo engine's legacy tree and three of its other
modules), each with a ``pyproject.toml``: one lists ``--patterns`` generated globs of
every shape (literal names and paths, ``dir/*``, ``*_N.py``, ``*/tmpN/*``, sets),
none of which matches a file, so both checks read and report the same; the other
lists none. ``runnercheck check --no-cache`` runs on each as a command, the two
interleaved, ``--reps`` times; the wall times' medians and the ratio of each pair are
reported. In this process, where the time goes: reading and validating the
configuration (the TOML parse), compiling the globs, and the walk of the 10 files
that matches them.

Matched one glob at a time, as before, 20,000 globs took 56 s on these 10 files and
200,000 did not end.

Usage::

    python benchmarks/bench_exclude.py [--patterns 200000] [--reps 5] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.common import spread  # noqa: E402
from runnercheck.config import load_config  # noqa: E402
from runnercheck.excludes import Excludes  # noqa: E402
from runnercheck.files import walk  # noqa: E402

ENGINE = REPO / "runnercheck" / "demo" / "engine"
#: The 10 files checked (paths under the demo engine).
FILES = (
    *(f"legacy/{name}" for name in sorted(os.listdir(ENGINE / "legacy")) if name.endswith(".py")),
    "model.py",
    "sampling.py",
    "sequence.py",
)
SHAPES = ("gen{}/*", "*_{}.py", "pkg/mod{}.py", "*/tmp{}/*", "x{}", "?{}[0-9]*", "*{}*z")


def patterns(count: int) -> list[str]:
    """``count`` globs of the shapes a generated exclude list has; none matches a file."""
    return [SHAPES[i % len(SHAPES)].format(1_000_000 + i) for i in range(count)]


def project(root: Path, globs: list[str]) -> Path:
    """A copy of the 10 files under ``root`` with a ``[tool.runnercheck]`` listing ``globs``."""
    for name in FILES:
        target = root / "src" / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(ENGINE / name, target)
    listed = "".join(f"  {json.dumps(glob)},\n" for glob in globs)
    (root / "pyproject.toml").write_text(
        f"[tool.runnercheck]\nexclude = [\n{listed}]\n", encoding="utf-8"
    )
    return root


def run_check(root: Path) -> tuple[float, int, str]:
    """Wall time, exit status and output of ``runnercheck check --no-cache src``."""
    start = time.perf_counter()
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "check", "--no-cache", "src"],
        cwd=root,
        capture_output=True,
        text=True,
        timeout=600,
    )
    return time.perf_counter() - start, proc.returncode, proc.stdout + proc.stderr


def in_process(root: Path) -> dict[str, float]:
    """Seconds to read the configuration, to compile its globs and to walk the files."""
    start = time.perf_counter()
    config = load_config(root)
    loaded = time.perf_counter()
    Excludes(config.exclude)
    compiled = time.perf_counter()
    found = walk([root / "src"], exclude=config.exclude, root=root).files
    walked = time.perf_counter()
    assert len(found) == len(FILES), found
    return {
        "read_config_s": loaded - start,
        "compile_globs_s": compiled - loaded,
        "walk_s": walked - compiled,
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    parser.add_argument("--patterns", type=int, default=200_000)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--json", type=Path, default=None)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="bench-exclude-") as tmp:
        many = project(Path(tmp) / "many", patterns(args.patterns))
        none = project(Path(tmp) / "none", [])
        size = (many / "pyproject.toml").stat().st_size
        first_many, first_none = run_check(many), run_check(none)  # warm the disk cache
        assert first_many[1] == first_none[1] and first_many[2] == first_none[2], (
            first_many,
            first_none,
        )
        with_globs: list[float] = []
        without: list[float] = []
        for _ in range(args.reps):
            without.append(run_check(none)[0])
            with_globs.append(run_check(many)[0])
        breakdown = in_process(many)
    ratios = [a / b for a, b in zip(with_globs, without, strict=True)]
    result: dict[str, Any] = {
        "patterns": args.patterns,
        "pyproject_bytes": size,
        "files": len(FILES),
        "check_with_globs_s": spread(with_globs),
        "check_without_s": spread(without),
        "ratio": spread(ratios),
        "in_process": breakdown,
        "load": os.getloadavg()[0],
    }
    print(
        f"check on {len(FILES)} files with {args.patterns} exclude globs: "
        f"{statistics.median(with_globs):.3f} s, without: {statistics.median(without):.3f} s, "
        f"ratio {statistics.median(ratios):.2f}x ({min(ratios):.2f}-{max(ratios):.2f}); "
        f"in process: config {breakdown['read_config_s']:.3f} s, globs compiled "
        f"{breakdown['compile_globs_s']:.3f} s, walk {breakdown['walk_s']:.4f} s "
        f"(load {result['load']:.1f})"
    )
    if args.json is not None:
        args.json.write_text(json.dumps(result, indent=2) + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
