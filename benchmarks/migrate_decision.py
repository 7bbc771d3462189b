"""``migrate --check`` with and without the analysis's decision of which files a codemod
may change (:mod:`codemods.framework.decision`), and with and without the files it settles
without LibCST (:mod:`codemods.framework.replay`): the result must be the same, only cheaper.

Per tree (each cached vLLM release's ``vllm/`` from 0.3.0 to 0.11.0 and every fixture
tree of the tests, copied out of this repository), ``codemods.apply(mode="check")`` runs
three times in this process:

* ``decide=False``: every file through every single-class codemod with LibCST;
* ``decide=True, exact=False``: only the files the decision names, with LibCST;
* ``decide=True`` (``--check`` as the command runs it): the files whose rewrites the
  analysis replays are settled without LibCST.

The first two must give the same exit code, JSON report and new bytes of every file
that would change; the third the same exit code, JSON report and printed lines as the
second (it makes no new bytes for the files it settles). Each run's count of files
parsed with LibCST is reported. Plain mypy on the changes (:mod:`codemods.framework.typecheck`)
is left out: its notes are a function of the changes' old and new bytes, which are
compared (and a project with a mypy configuration is never settled without LibCST).

With ``--against REF`` it compares this tree's code with the code of an earlier commit
(unpacked by ``benchmarks/baseline.py``, run in a child process) instead: the same
result from both, for a change that should only make ``migrate`` faster.

Usage::

    python benchmarks/migrate_decision.py [--versions 0.5.0 ...] [--no-fixtures | --no-releases]
        [--against REF] [--json out.json]

Exits 1 when a tree differs.
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import hashlib
import inspect
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from benchmarks import baseline  # noqa: E402
from codemods.framework import report, typecheck  # noqa: E402
from codemods.framework.run import apply  # noqa: E402
from tests.vllm_wheels import cache_root  # noqa: E402

FIRST, LAST = (0, 3, 0), (0, 11, 0)


def release_key(name: str) -> tuple[int, ...]:
    """``0.5.0.post1`` -> (0, 5, 0, 1); a name that is no release sorts last."""
    parts = name.replace("post", "").split(".")
    try:
        return tuple(int(p) for p in parts if p)
    except ValueError:
        return (10**6,)


def cached_releases() -> list[str]:
    """The releases from 0.3.0 to 0.11.0 whose ``vllm/`` is cached."""
    cache = cache_root()
    names = [p.name for p in cache.iterdir() if (p / "vllm").is_dir()] if cache.is_dir() else []
    return sorted((n for n in names if FIRST <= release_key(n)[:3] <= LAST), key=release_key)


def fixture_trees() -> list[Path]:
    """Every fixture tree of the tests, and the demo engine's two shapes; the trees the
    tests build from diffs (the refused trees, the speculative wrappers) are written
    under a temporary directory."""
    from tests.check import built as check_built
    from tests.migrate import refusals
    from tests.spec_decode_fixture import write_wrappers

    built = Path(tempfile.mkdtemp(prefix="runnercheck-fixtures-"))
    atexit.register(shutil.rmtree, built, ignore_errors=True)
    trees = [REPO / "runnercheck" / "demo" / "engine" / "legacy"]
    trees.append(REPO / "runnercheck" / "demo" / "engine" / "merged")
    for fixtures in (
        REPO / "tests" / "migrate" / "fixtures",
        check_built.materialize(built / "check") / "tests" / "check" / "fixtures",
    ):
        trees += sorted(p for p in fixtures.iterdir() if p.is_dir() and any(p.rglob("*.py")))
    trees += [
        refusals.write_all(built / "refusals"),
        write_wrappers(built / "fold-control-broadcast"),
    ]
    return trees


def outcome(tree: Path, decide: bool, exact: bool = False) -> dict[str, Any]:
    """What ``migrate --check`` reports on ``tree``: exit code, JSON, the lines it prints
    (not a terminal), new bytes (none for a file settled without LibCST)."""
    result = apply([tree], mode="check", decide=decide, exact=exact)
    lines = report.refusal_lines(result) + report.detail_lines(result)
    lines += report.file_lines(result, "check", []) + report.summary_lines(result, "check")
    return {
        "exit": result.exit_code,
        "json": report.as_json(result, "check", []),
        "lines": lines,
        "new": {str(p): c.new for p, c in result.changes.items()},
        "cst_files": result.files_cst,
    }


def digest(result: Any) -> dict[str, str]:
    """What ``migrate --check`` reports (exit code, each key of the JSON, the new bytes),
    each part hashed. ``files_parsed`` is left out: it counts the files read, which a
    faster prefilter lowers."""
    from codemods.framework import report

    report_json = report.as_json(result, "check", [])
    report_json.pop("files_parsed", None)
    parts = {f"json.{key}": value for key, value in report_json.items()}
    parts["exit"] = result.exit_code
    parts["new"] = {str(p): c.new.hex() for p, c in result.changes.items()}
    return {
        key: hashlib.sha256(json.dumps(value, sort_keys=True).encode()).hexdigest()
        for key, value in parts.items()
    }


#: Run by the earlier commit's code (its packages first on the path): one line per tree.
CHILD = """
import hashlib, inspect, json, sys
if sys.path[0] == "":  # the working directory (this repository) would come first
    del sys.path[0]
from typing import Any
from codemods.framework import typecheck
from codemods.framework.run import apply
typecheck.new_errors = lambda changes: []
print("codemods from", typecheck.__file__, flush=True)
{digest}
# the new bytes of every change (a commit that settles files without LibCST makes none)
made = {{"exact": False}} if "exact" in inspect.signature(apply).parameters else {{}}
for tree in sys.argv[1:]:
    print(json.dumps([tree, digest(apply([tree], mode="check", **made))]), flush=True)
"""


def against(ref: str, trees: list[Path]) -> int:
    """This tree's ``migrate --check`` against ``ref``'s, tree by tree."""
    with tempfile.TemporaryDirectory() as tmp:
        old = baseline.baseline_tree(ref, Path(tmp))
        code = CHILD.format(digest=inspect.getsource(digest))
        proc = subprocess.Popen(
            [sys.executable, "-c", code, *map(str, trees)],
            env=baseline.environment(old),
            stdout=subprocess.PIPE,
            text=True,
        )
        assert proc.stdout is not None
        different = 0
        for line in proc.stdout:
            if line.startswith("codemods from "):
                print(line.strip(), flush=True)
                continue
            tree, before = json.loads(line)
            now = digest(apply([Path(tree)], mode="check", exact=False))
            differs = sorted(k for k in {*now, *before} if now.get(k) != before.get(k))
            different += bool(differs)
            print(f"{tree:80} {'DIFFERENT: ' + ', '.join(differs) if differs else 'same'}")
        if proc.wait() != 0:
            raise SystemExit(f"the run of {baseline.short(ref)} failed")
    print(f"{len(trees)} trees, {len(trees) - different} identical to {baseline.short(ref)}")
    return 1 if different else 0


@contextlib.contextmanager
def in_copy(tree: Path) -> Iterator[Path]:
    """``tree``, or for a fixture tree a copy of it out of this repository (under it,
    plain mypy would read this project's configuration, so no file of it would be
    settled without LibCST)."""
    if not tree.is_relative_to(REPO):
        yield tree
        return
    with tempfile.TemporaryDirectory() as tmp:
        yield shutil.copytree(tree, Path(tmp) / tree.name, ignore=_PYCACHE)


def compare(tree: Path) -> dict[str, Any]:
    """The three runs on ``tree`` (:func:`in_copy`)."""
    with in_copy(tree) as copy:
        row = _compare(copy)
    row["tree"] = str(tree)
    return row


_PYCACHE = shutil.ignore_patterns("__pycache__")


def _compare(tree: Path) -> dict[str, Any]:
    started = time.perf_counter()
    without = outcome(tree, decide=False)
    middle = time.perf_counter()
    with_ = outcome(tree, decide=True)
    done = time.perf_counter()
    exact = outcome(tree, decide=True, exact=True)
    last = time.perf_counter()
    differs = [key for key in ("exit", "json", "new") if without[key] != with_[key]]
    differs += [f"exact {k}" for k in ("exit", "json", "lines") if exact[k] != with_[k]]
    return {
        "tree": str(tree),
        "same": not differs,
        "differs": differs,
        "exit": with_["exit"],
        "would_change": len(with_["new"]),
        "cst_files_exact": exact["cst_files"],
        "cst_files": with_["cst_files"],
        "cst_files_without": without["cst_files"],
        "seconds_exact": round(last - done, 3),
        "seconds": round(done - middle, 3),
        "seconds_without": round(middle - started, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="*", help="releases (default: 0.3.0..0.11.0 cached)")
    parser.add_argument("--no-fixtures", action="store_true", help="releases only")
    parser.add_argument("--no-releases", action="store_true", help="fixture trees only")
    parser.add_argument("--against", metavar="REF", help="compare with an earlier commit")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    typecheck.new_errors = lambda changes: []  # see the docstring
    cache = cache_root()
    releases = [] if args.no_releases else args.versions or cached_releases()
    trees = [cache / v / "vllm" for v in releases]
    if not args.no_fixtures:
        trees += fixture_trees()
    if args.against:
        return against(args.against, trees)
    rows = []
    print(f"{'tree':60} {'same':>5} {'exit':>4} {'chg':>4} {'exact':>5} {'cst':>4} {'cst w/o':>7}")
    for tree in trees:
        row = compare(tree)
        rows.append(row)
        label = str(tree).replace(str(cache) + "/", "").replace(str(REPO) + "/", "")
        print(
            f"{label:60} {'yes' if row['same'] else 'NO':>5} {row['exit']:>4} "
            f"{row['would_change']:>4} {row['cst_files_exact']:>5} {row['cst_files']:>4} "
            f"{row['cst_files_without']:>7}"
            + (f"  differs: {', '.join(row['differs'])}" if row["differs"] else ""),
            flush=True,
        )
    different = [r for r in rows if not r["same"]]
    print(
        f"{len(rows)} trees, {len(rows) - len(different)} identical with and without the "
        f"decision and the exact answers; LibCST parsed "
        f"{sum(r['cst_files_exact'] for r in rows)} files with both, "
        f"{sum(r['cst_files'] for r in rows)} with the decision alone, "
        f"{sum(r['cst_files_without'] for r in rows)} with neither"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
