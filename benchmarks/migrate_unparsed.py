"""``migrate`` with and without the function bodies it leaves unparsed
(:mod:`codemods.toolkit.unparsed`): the result must be the same, only cheaper.

Per tree (each cached vLLM release's ``vllm/`` from 0.3.0 to 0.11.0 and every fixture
tree of the tests, copied out of this repository, as ``benchmarks/migrate_decision.py``
lists them), ``codemods.apply(mode="check", exact=False)`` runs in this process twice:
as ``migrate`` runs it, and with every body parsed (:func:`codemods.toolkit.unparsed.parse`
answering that it leaves nothing out). Both must give the same exit code, JSON report,
printed lines and new bytes of every file that would change. Per tree it reports the
bytes of the files LibCST parsed for the groups and the share of them left unparsed,
how many times a group asked for a body it had left unparsed (and was done again with
it parsed), and the CPU time of each (the lower of two runs, in the order ABBA, after
one untimed run of the first tree). A file
parsed again for a group that asked for a body is counted again.

Usage::

    python benchmarks/migrate_unparsed.py [--versions 0.5.0 ...] [--no-fixtures | --no-releases]
        [--json out.json]

Exits 1 when a tree differs.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

import libcst as cst  # noqa: E402

from benchmarks.migrate_decision import cached_releases, fixture_trees, in_copy  # noqa: E402
from codemods.framework import report, tasks, typecheck  # noqa: E402
from codemods.framework.run import apply  # noqa: E402
from codemods.toolkit import unparsed  # noqa: E402
from tests.vllm_wheels import cache_root  # noqa: E402


class _Counts:
    """What the runs of one tree parse, leave unparsed and ask for again."""

    def __init__(self) -> None:
        self.parsed = self.left = self.asked = 0


def _run(tree: Path, whole: bool, counts: _Counts) -> tuple[dict[str, Any], float]:
    real_parse, real_more = unparsed.parse, tasks.Run.parse_more

    def counting(data: bytes, *args: Any) -> cst.Module | None:
        found = None if whole else real_parse(data, *args)
        counts.parsed += len(data)
        counts.left += 0 if found is None else unparsed.left_out(found)
        return found

    def asking(state: Any, names: Any) -> None:
        counts.asked += 1
        real_more(state, names)

    unparsed.parse, tasks.Run.parse_more = counting, asking  # type: ignore[method-assign]
    try:
        started = time.process_time()
        result = apply([tree], mode="check", exact=False)
        seconds = time.process_time() - started
    finally:
        unparsed.parse, tasks.Run.parse_more = real_parse, real_more  # type: ignore[method-assign]
    lines = report.refusal_lines(result) + report.detail_lines(result)
    lines += report.file_lines(result, "check", []) + report.summary_lines(result, "check")
    outcome = {
        "exit": result.exit_code,
        "json": report.as_json(result, "check", []),
        "lines": lines,
        "new": {str(p): c.new for p, c in result.changes.items()},
    }
    return outcome, seconds


def compare(tree: Path) -> dict[str, Any]:
    """Both runs on ``tree``."""
    mine, whole = _Counts(), _Counts()
    with in_copy(tree) as copy:  # each twice, in the order ABBA: the lower CPU time of each
        now, seconds = _run(copy, False, mine)
        before, seconds_whole = _run(copy, True, whole)
        seconds_whole = min(seconds_whole, _run(copy, True, _Counts())[1])
        seconds = min(seconds, _run(copy, False, _Counts())[1])
    differs = [key for key in ("exit", "json", "lines", "new") if now[key] != before[key]]
    return {
        "tree": str(tree),
        "same": not differs,
        "differs": differs,
        "parsed_bytes": mine.parsed,
        "unparsed_bytes": mine.left,
        "asked": mine.asked,
        "seconds": round(seconds, 3),
        "seconds_whole": round(seconds_whole, 3),
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--versions", nargs="*", help="releases (default: 0.3.0..0.11.0 cached)")
    parser.add_argument("--no-fixtures", action="store_true", help="releases only")
    parser.add_argument("--no-releases", action="store_true", help="fixture trees only")
    parser.add_argument("--json", type=Path, help="also write the rows here")
    args = parser.parse_args(argv)
    typecheck.new_errors = lambda changes: []  # plain mypy: a function of the new bytes
    cache = cache_root()
    releases = [] if args.no_releases else args.versions or cached_releases()
    trees = [cache / v / "vllm" for v in releases]
    if not args.no_fixtures:
        trees += fixture_trees()
    with in_copy(trees[0]) as copy:  # (imports and first-use costs out of the figures)
        _run(copy, False, _Counts())
    rows = []
    print(
        f"{'tree':60} {'same':>5} {'bytes':>8} {'left':>5} {'asked':>5} {'cpu s':>6} {'whole':>6}"
    )
    for tree in trees:
        row = compare(tree)
        rows.append(row)
        label = str(tree).replace(str(cache) + "/", "").replace(str(REPO) + "/", "")
        share = row["unparsed_bytes"] / row["parsed_bytes"] if row["parsed_bytes"] else 0.0
        print(
            f"{label:60} {'yes' if row['same'] else 'NO':>5} {row['parsed_bytes']:>8} "
            f"{share:>5.0%} {row['asked']:>5} {row['seconds']:>6.3f} {row['seconds_whole']:>6.3f}"
            + (f"  differs: {', '.join(row['differs'])}" if row["differs"] else ""),
            flush=True,
        )
    different = [r for r in rows if not r["same"]]
    parsed = sum(r["parsed_bytes"] for r in rows)
    left = sum(r["unparsed_bytes"] for r in rows)
    print(
        f"{len(rows)} trees, {len(rows) - len(different)} identical with and without "
        f"unparsed bodies; {left / parsed if parsed else 0:.0%} of the {parsed} bytes of group "
        f"files left unparsed; {sum(1 for r in rows if r['asked'])} trees asked for a body; "
        f"CPU {sum(r['seconds'] for r in rows):.2f} s against "
        f"{sum(r['seconds_whole'] for r in rows):.2f} s with every body parsed"
    )
    if args.json:
        args.json.write_text(json.dumps(rows, indent=2) + "\n")
    return 1 if different else 0


if __name__ == "__main__":
    raise SystemExit(main())
