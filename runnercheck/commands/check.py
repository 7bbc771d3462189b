"""Check sources for broadcast-contract bugs: fast syntactic rules, no mypy, no imports.

Reports, as ``path:line:col: CODE message``: syntax errors (RC001), internal errors
(RC002) and the contract rules RC101-RC108 (see ``runnercheck rules``). Suppress one
finding with ``# runnercheck: ignore[RC102]`` (or a bare ``# runnercheck: ignore``) on
its line.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import TYPE_CHECKING

from runnercheck import collector

if TYPE_CHECKING:
    from collections import Counter

    from runnercheck.check.pipeline import CheckResult
    from runnercheck.config import Config
    from runnercheck.workspace.reading import SourceFile

HELP = "check sources for broadcast-contract bugs (fast, syntactic)"
EPILOG = (
    "exit status: 0 no errors (notes never fail the run), 1 errors (or a file that could "
    "not be analysed), 2 usage or input error"
)


def configure(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "paths",
        nargs="+",
        metavar="PATH",
        help="files or directories; `-` reads one file's source on stdin (--stdin-filename)",
    )
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="fail only on findings this file does not hold (line numbers aside)",
    )
    parser.add_argument(
        "--write-baseline",
        action="store_true",
        help="record the current findings in --baseline FILE and exit 0",
    )
    parser.add_argument(
        "--stdin-filename",
        metavar="PATH",
        help="the file the source on stdin stands for (an editor's unsaved buffer): findings "
        "name it, and the files beside it are read from disk",
    )
    parser.add_argument(
        "--format",
        choices=("text", "json", "sarif", "github"),
        default="text",
        help="output format (github: workflow annotations for GitHub Actions)",
    )
    parser.add_argument(
        "--select",
        action="append",
        default=[],
        metavar="CODES",
        help="only these rules (codes, names or prefixes, comma-separated)",
    )
    parser.add_argument(
        "--ignore", action="append", default=[], metavar="CODES", help="never these rules"
    )
    parser.add_argument(
        "--exclude",
        action="append",
        default=[],
        metavar="GLOB",
        help="skip paths matching this glob (repeatable; adds to `exclude` in the config)",
    )
    parser.add_argument(
        "-j",
        "--jobs",
        type=int,
        default=1,
        metavar="N",
        help="parse files in N processes (0: one per CPU; never more than the CPUs or the files)",
    )
    parser.add_argument(
        "--show-notes",
        action="store_true",
        help="also print notes: findings without a runtime consequence (they never fail the run)",
    )
    parser.add_argument(
        "--context",
        action="append",
        default=[],
        metavar="PATH",
        help="a directory holding packages the checked files import, or such a package "
        "itself (an engine a plugin builds on), read for context only, never imported; repeatable; adds to `context` "
        "in the config; the installed packages are read after it",
    )
    parser.add_argument("--config", type=Path, help="read this TOML file instead of pyproject.toml")
    parser.add_argument(
        "--no-cache",
        action="store_true",
        help="neither read nor write the facts cache (.runnercheck_cache/ under the project root)",
    )


def _apply_baseline(result: CheckResult, path: Path, accepted: Counter[str] | None) -> None:
    """Record the findings in ``path`` (``accepted`` None), or keep only those it does
    not hold."""
    from runnercheck import baseline

    keys = [baseline.key(f.path, f.code, f.message) for f in result.findings]
    if accepted is None:
        baseline.write(path, keys, "runnercheck check")
        print(f"{path}: recorded {len(keys)} finding{'' if len(keys) == 1 else 's'}")
        return
    fresh = baseline.new(keys, accepted)
    result.baselined = len(keys) - len(fresh)
    result.findings = [result.findings[i] for i in fresh]


def _stdin_buffer(args: argparse.Namespace) -> SourceFile | None:
    """The source given on stdin (``-`` with ``--stdin-filename PATH``), as the file it
    stands for; None without ``-``."""
    from runnercheck.errors import UsageError
    from runnercheck.files import DEFAULT_MAX_FILE_SIZE

    if "-" not in args.paths:
        if args.stdin_filename is not None:
            raise UsageError("--stdin-filename: give `-` as the path to read the source on stdin")
        return None
    if args.paths != ["-"]:
        raise UsageError("-: the source on stdin is checked alone; give no other path")
    if args.stdin_filename is None:
        raise UsageError("-: name the file the source on stdin stands for (--stdin-filename PATH)")
    path = Path(args.stdin_filename)
    if not path.parent.is_dir():
        raise UsageError(f"--stdin-filename {path}: its directory does not exist")
    data = sys.stdin.buffer.read(DEFAULT_MAX_FILE_SIZE + 1)
    if len(data) > DEFAULT_MAX_FILE_SIZE:
        raise UsageError(f"-: more than {DEFAULT_MAX_FILE_SIZE} bytes on stdin")
    from runnercheck.workspace.reading import SourceFile

    return SourceFile(path, str(path), data)


def run(args: argparse.Namespace) -> int:
    with collector.at_rest():
        return _run(args)


def _run(args: argparse.Namespace) -> int:
    from runnercheck.check.report import render
    from runnercheck.config import find_pyproject, load_config
    from runnercheck.console import is_color_terminal, make_console, working
    from runnercheck.errors import UsageError
    from runnercheck.files import check_arguments
    from runnercheck.jobs import requested

    jobs = requested(args.jobs)
    if args.write_baseline and args.baseline is None:
        raise UsageError("--write-baseline needs --baseline FILE")
    accepted = None
    if args.baseline is not None and not args.write_baseline:
        from runnercheck import baseline

        accepted = baseline.read(args.baseline, "runnercheck check")
    buffer = _stdin_buffer(args)
    if buffer is not None:
        args.paths = [str(buffer.path)] if buffer.path.exists() else []
    check_arguments(args.paths)
    for path in args.context:
        if not Path(path).is_dir():
            raise UsageError(f"--context {path}: not a directory")
    first = Path(args.paths[0]) if args.paths else buffer.path.parent if buffer else Path()
    config = load_config(first, args.config)
    source = args.config if args.config is not None else find_pyproject(first)
    root = source.resolve().parent if source is not None else Path.cwd()
    with working(f"checking {_shown(args.paths, buffer)}", getattr(args, "quiet", False)):
        result = _check(args, config, jobs, root, buffer)
    if args.baseline is not None:
        _apply_baseline(result, args.baseline, accepted)
        if args.write_baseline:
            return 0
    # rich only for colour on a terminal: plain text, JSON and SARIF never import it
    console = make_console() if args.format == "text" and is_color_terminal(sys.stdout) else None
    render(result, args.format, console, args.show_notes, base=Path.cwd())
    return result.exit_code


def _shown(paths: list[str], buffer: SourceFile | None) -> str:
    if buffer is not None:
        return str(buffer.path)
    return paths[0] if len(paths) == 1 else f"{len(paths)} paths"


def _check(
    args: argparse.Namespace,
    config: Config,
    jobs: int,
    root: Path,
    buffer: SourceFile | None,
) -> CheckResult:
    from runnercheck.check.pipeline import check_paths

    return check_paths(
        args.paths,
        config,
        jobs=jobs,
        select=args.select,
        ignore=args.ignore,
        exclude=args.exclude,
        root=root,
        context=args.context,
        cache_root=None if args.no_cache else root,
        buffer=buffer,
    )
