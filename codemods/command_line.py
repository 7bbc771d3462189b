"""``runnercheck migrate PATH...``: rewrite paired broadcasts into the merged shape.

The codemods (all by default, choose with --select) are listed by --help
(from :mod:`codemods.framework.registry`).

A worker/runner group is planned as a whole: a shape the planner does not
recognise is refused with a reason code (MIGxxx) and every file of the group
stays byte-identical. New sources must compile and re-analyse clean with
`runnercheck check` before anything is written. Each group is written as one
transaction under a lock on the tree, with a journal that the next run (or
`--recover`) uses to roll back a group an interrupted run left half-written
(see runnercheck.writes.transaction). The code read is never imported or executed.

``runnercheck`` finds this module through its entry point (the group
``runnercheck.commands`` in ``pyproject.toml``; :mod:`runnercheck.commands.registry`).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from codemods.framework import registry

if TYPE_CHECKING:
    from rich.console import Console

    from codemods.framework.pipeline import MigrateResult
    from codemods.framework.run import Mode
    from runnercheck.config import Config

HELP = "rewrite paired broadcasts into the merged prepare/convert/execute shape"
EPILOG = f"""\
codemods:
{registry.help_lines()}

A shape the planner does not recognise is refused (MIG1xx/MIG2xx, with file and
line) and its whole worker/runner group is left byte-identical. Each group is
written as one transaction: a file that changed meanwhile (MIG005) or cannot be
written (MIG006) leaves its group as it was, a read-only file is refused (MIG004)
unless --force, and a group an interrupted run left half-applied is rolled back
by the next run (reported as MIG007 by --check and --diff).

Each file changed (or, with --check, that would change) is named on a line of its
own, as black and ruff do.

exit status: 0 nothing to change, or every change written; 1 with --check or --diff
when something would change, or when something was refused (left for a person);
2 usage or input error, or an interrupted run left files that a person has to put
right (one line says where every version is); --recover: 0 recovered or nothing to
recover, 2 as above"""
CODEMODS = registry.NAMES


def _select(values: list[str]) -> tuple[str, ...]:
    from runnercheck.errors import UsageError

    if not values:
        return CODEMODS
    chosen: list[str] = []
    for value in values:
        for name in (part.strip() for part in value.split(",")):
            if not name:
                continue
            if name not in CODEMODS:
                raise UsageError(
                    f"--select: unknown codemod {name!r} (choose from {', '.join(CODEMODS)})"
                )
            if name not in chosen:
                chosen.append(name)
    if not chosen:
        raise UsageError("--select: no codemod named")
    return tuple(chosen)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("paths", nargs="+", metavar="PATH", help="files or directories")
    parser.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODEMODS",
        help=f"only these codemods (comma-separated: {', '.join(CODEMODS)})",
    )
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--diff", action="store_true", help="print a unified diff and write nothing")
    mode.add_argument(
        "--check",
        action="store_true",
        help="write nothing; exit 1 when something would change",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="rewrite groups in N processes (0: one per CPU; never more than the CPUs or groups)",
    )
    parser.add_argument(
        "--force", action="store_true", help="also rewrite read-only files (their mode is kept)"
    )
    parser.add_argument(
        "--replace-hard-links",
        action="store_true",
        help=(
            "write a file that has other hard links as a new file (the other names keep "
            "the old contents); without it such a file is refused (MIG003)"
        ),
    )
    mode.add_argument(
        "--recover",
        action="store_true",
        help="only roll back what an interrupted run left half-written, then stop",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "github"),
        default="text",
        help="output format (github: workflow annotations for GitHub Actions)",
    )
    parser.add_argument("--config", type=Path, help="read this TOML file instead of pyproject.toml")
    parser.add_argument(
        "--no-callers",
        action="store_true",
        help=(
            "rewrite calls of a removed method only inside the given paths (by default "
            "every caller in the project, tests included, is rewritten with its group)"
        ),
    )
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the facts cache (.runnercheck_cache/ beside pyproject.toml)",
    )
    parser.add_argument(
        "--no-mypy",
        action="store_true",
        help=(
            "do not judge the old and new texts with plain mypy (its new errors are notes; "
            "for a tree that mypy checks next anyway); every other verification still runs"
        ),
    )


def run(args: argparse.Namespace) -> int:
    from codemods.framework.source import collect
    from runnercheck.files import check_arguments
    from runnercheck.jobs import requested

    jobs = requested(args.jobs)
    select = _select(args.select)
    check_arguments(args.paths)
    roots = [Path(os.path.realpath(raw)) for raw in args.paths]
    out = _console()
    if args.recover:
        from runnercheck.writes import recovery

        lines = recovery.recover(roots, collect(args.paths).journals)
        for line in lines or [f"{args.paths[0]}: nothing to recover"]:
            _say(out, line)
        return 0

    from codemods import apply
    from codemods.framework import report
    from runnercheck.config import find_pyproject, load_config

    first = Path(args.paths[0])
    config = load_config(first, args.config)
    source = args.config if args.config is not None else find_pyproject(first)
    # the facts cache lives under the project root; a tree with none gets no cache
    root = source.resolve().parent if source is not None else None
    mode: Mode = "diff" if args.diff else "check" if args.check else "write"
    err = _console(stderr=True)
    with _progress(None if args.quiet else err) as progress:
        result = apply(
            args.paths,
            select,
            config,
            mode=mode,
            force=args.force,
            replace_links=args.replace_hard_links,
            jobs=jobs,
            progress=progress,
            cache_root=None if args.no_cache else root,
            callers=not args.no_callers,
            plain_mypy=not args.no_mypy,
        )
    written, recovered = result.written, result.recovered
    ignored = _hide_ignored(result, config, root)
    if args.format == "json":
        print(json.dumps(report.as_json(result, mode, written, recovered), indent=2))
    elif args.format == "github":
        for line in recovered + ignored:
            _say(None, line, stderr=True)
        for line in report.github_lines(result, mode, written):
            print(line)
    else:
        if mode == "diff":
            sys.stdout.write(report.unified_diff(result))
            sys.stdout.flush()
        info, stderr = (err, True) if mode == "diff" else (out, False)
        lines = recovered + report.refusal_lines(result) + report.detail_lines(result) + ignored
        for line in lines + report.file_lines(result, mode, written):
            _say(info, line, stderr)
        if info is not None:
            report.summary_table(result, info, mode)
        else:
            for line in report.summary_lines(result, mode):
                _say(None, line, stderr)
    return exit_status(result, mode)


def _hide_ignored(result: MigrateResult, config: Config, root: Path | None) -> list[str]:
    """Take out the refusals and notes the project ignores (``ignore``,
    ``per_file_ignores``, a ``# runnercheck: ignore[CODE]`` comment on the line they
    name), as ``check`` does for its findings; one line says how many."""
    from collections import Counter

    from runnercheck.files import ReadError, read_source
    from runnercheck.ignores import PerFileIgnores, codes_of, suppressed, suppressions

    codes = codes_of(config.ignore, "ignore")
    per_file = PerFileIgnores(config.per_file_ignores, root)
    comments: dict[Path, dict[int, frozenset[str] | None]] = {}

    def ignored(code: str, path: Path, line: int) -> bool:
        if not code:
            return False
        if code in codes or per_file.hides(code, path):
            return True
        if path not in comments:  # (a refused path may be a FIFO, a device, too large)
            try:
                text = read_source(path, config.max_file_size, follow=False)
            except ReadError:
                text = b""
            comments[path] = suppressions(text.decode("utf-8", errors="replace"))
        return suppressed(comments[path], line, code)

    hidden: Counter[str] = Counter()
    kept = []
    for refusal in result.refusals:
        if ignored(refusal.code, refusal.path, refusal.line):
            hidden[refusal.code] += 1
        else:
            kept.append(refusal)
    result.refusals = kept
    result.notes = [n for n in result.notes if not ignored(n.code, n.path, n.line)]
    if not hidden:
        return []
    total = sum(hidden.values())
    listed = ", ".join(f"{code} {count}" for code, count in sorted(hidden.items()))
    return [f"{total} refusal{'s' if total != 1 else ''} ignored by the configuration ({listed})"]


def _console(stderr: bool = False) -> Console | None:
    """rich on a colour terminal; None (plain text, rich not imported) otherwise."""
    from runnercheck.console import is_color_terminal, make_console

    stream = sys.stderr if stderr else sys.stdout
    return make_console(stderr=stderr) if is_color_terminal(stream) else None


def _say(console: Console | None, line: str, stderr: bool = False) -> None:
    if console is not None:  # made printable by the console
        console.print(line, markup=False, highlight=False)
    else:
        from runnercheck.console import echo

        echo(line, stderr=stderr)


def exit_status(result: MigrateResult, mode: str) -> int:
    """As black and ruff: a clean write exits 0; ``--check``/``--diff`` exit 1 when
    something would change; anything refused (left for a person) exits 1."""
    if result.refusals:
        return 1
    return 1 if mode != "write" and result.changes else 0


@contextmanager
def _progress(console: Console | None) -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar's update on a terminal (None otherwise)."""
    if console is None or not console.is_terminal:
        yield None
        return
    from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn

    with Progress(
        TextColumn("migrating"),
        BarColumn(),
        MofNCompleteColumn(),
        console=console,
        transient=True,
    ) as progress:
        task = progress.add_task("migrate", total=None)

        def update(done: int, total: int) -> None:
            progress.update(task, completed=done, total=total)

        yield update
