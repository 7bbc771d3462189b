"""What ``migrate``'s plain-mypy check costs, first and repeated, this tree against an
earlier commit in the same run.

``migrate`` (not ``--check``) judges the old and the new texts of the files it changes
with plain mypy. Each side gets a user cache of its own (``XDG_CACHE_HOME``), warmed by
one run first, so mypy's own cache holds typeshed and torch on both. Then, in rounds,
interleaved (before, after, after, before, ...), on fresh copies of the demo's legacy
engine (or of a release's ``vllm/worker/`` with ``--vllm VERSION``), ``migrate
--no-cache`` as a command:
- *new tree*: a copy with a module of its own in the package (a unique constant), so
  that no run has judged these texts in this setting;
- *repeated*: a copy of the same tree again, as when ``migrate --diff`` is followed by
  ``migrate``, or a test migrates the same fixture once more.

Wall and child CPU seconds, medians with min-max, and after/before.

Usage::

    python benchmarks/bench_migrate_mypy.py [--rounds 5] [--baseline REF] [--vllm 0.5.0]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import uuid
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks.baseline import (  # noqa: E402
    before_and_after,
    default_ref,
    runnercheck_command,
    short,
    temporary,
    timed_command,
)

KINDS = ("new tree", "repeated")


def source_tree(vllm: str | None) -> Path:
    """The tree copied for each run."""
    if vllm is None:
        from runnercheck.demo.engine import engine_source_dir

        return engine_source_dir("legacy")
    from tests.vllm_wheels import vllm_source

    return vllm_source(vllm) / "vllm" / "worker"


def fresh_copy(source: Path, into: Path, stamp: bool) -> Path:
    tree = into / source.name
    shutil.copytree(source, tree, ignore=shutil.ignore_patterns("__pycache__"))
    if stamp:  # a module no run has seen: the texts' setting is new
        (tree / "_bench_stamp.py").write_text(f"STAMP = {str(uuid.uuid4())!r}\n")
    return tree


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--baseline", default=None, help="the commit measured beside this tree")
    parser.add_argument("--vllm", default=None, help="a release's vllm/worker/ instead")
    args = parser.parse_args(argv)
    ref = args.baseline or default_ref()
    source = source_tree(args.vllm)
    samples: dict[tuple[str, str], list[tuple[float, float]]] = {}
    with temporary() as tmp:
        trees = before_and_after(ref, tmp)
        caches = {side: Path(tmp) / f"cache-{side}" for side in trees}

        def run(side: str, kind: str, n: int) -> tuple[float, float]:
            where = Path(tempfile.mkdtemp(dir=tmp, prefix=f"{side}-{n}-"))
            tree = fresh_copy(source, where, stamp=kind == "new tree")
            cmd, env = runnercheck_command(trees[side], ["migrate", "--no-cache", str(tree)])
            env["XDG_CACHE_HOME"] = str(caches[side])
            cpu, wall, code = timed_command(cmd, where, env)
            if code not in (0, 1):
                raise SystemExit(f"{side}: migrate exited {code} on {tree}")
            shutil.rmtree(where, ignore_errors=True)
            return cpu, wall

        for side in trees:  # mypy's own cache warm on both sides, the tree seen once
            for kind in KINDS:
                run(side, kind, -1)
        order = list(trees)
        for n in range(args.rounds):
            for side in order if n % 2 == 0 else order[::-1]:
                for kind in KINDS:
                    samples.setdefault((side, kind), []).append(run(side, kind, n))
    what = f"vLLM {args.vllm} vllm/worker/" if args.vllm else "the demo's legacy engine"
    print(f"migrate --no-cache on {what}, medians of {args.rounds} (wall, child CPU):")
    for kind in KINDS:
        row = {}
        for side in ("before", "after"):
            walls = [w for _c, w in samples[(side, kind)]]
            cpus = [c for c, _w in samples[(side, kind)]]
            row[side] = (statistics.median(walls), min(walls), max(walls), statistics.median(cpus))
        (bw, blo, bhi, bc), (aw, alo, ahi, ac) = row["before"], row["after"]
        print(
            f"  {kind}: before ({short(ref)}) {bw:.2f} s [{blo:.2f}-{bhi:.2f}] wall, "
            f"{bc:.2f} s CPU; after {aw:.2f} s [{alo:.2f}-{ahi:.2f}] wall, {ac:.2f} s CPU; "
            f"after/before {aw / bw:.2f}x wall, {ac / bc:.2f}x CPU"
        )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
