"""A CI gate over mypy with the plugin: fail on the contract's codes only, or only on
errors that a committed baseline does not hold.

mypy has no ``--disable-error-code`` for "everything else", and an engine's tree gives
mypy hundreds of errors of its own (missing stubs, its own typing debts). This runs
mypy once, as configured (the plugin is added when the configuration lacks it), and
decides the exit status from the errors it reports:

* by default only the plugin's codes (the RC2xx rules: ``runner-input-protocol``,
  ``from-dict-fixed-return``, ...) and any ``--code`` given fail the run;
* with ``--baseline FILE`` every error not in the baseline fails it, whatever its code
  (``--write-baseline`` records the current errors there; lines are compared without
  their line numbers, so an edit above an old error does not make it new).

Run it as ``runnercheck mypy [OPTIONS] [MYPY ARGUMENTS]`` or
``python -m mypy_plugin.gate``. Exit status: 0 nothing gating, 1 gating errors,
2 usage error or a mypy error that stops the run (a syntax error, a bad configuration).
"""

from __future__ import annotations

import argparse
import os
import re
import sys
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from pathlib import Path

from mypy_plugin.rules import RULES
from runnercheck import baseline, diagnostic_formats
from runnercheck.console import echo, working
from runnercheck.diagnostics import Diagnostic, Site
from runnercheck.errors import UsageError

PLUGIN = "mypy_plugin"
PROG = "runnercheck mypy"

#: ``path:line[:col]: error: message  [code]`` as mypy prints it.
_LINE = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+)(?::(?P<col>\d+))?(?::\d+:\d+)?: (?P<severity>error|note): "
    r"(?P<message>.*?)(?:  \[(?P<code>[a-z0-9-]+)\])?$"
)


def contract_codes() -> frozenset[str]:
    """The plugin's mypy error codes (the names of its rules)."""
    return frozenset(rule.name for rule in RULES)


class GateError(Exception):
    """A usage or input error: one line, exit status 2."""


def parse(lines: Sequence[str]) -> tuple[list[Diagnostic], list[list[str]]]:
    """mypy's errors, the notes that follow each as its related sites; and each error's
    lines as mypy printed them (its notes, a continuation), which the text output repeats."""
    heads: list[re.Match[str]] = []
    notes: list[list[Site]] = []
    printed: list[list[str]] = []
    for raw in lines:
        match = _LINE.match(raw)
        if match is None:
            if printed and raw.startswith(" "):  # a note's continuation, a source excerpt
                printed[-1].append(raw)
            continue
        if match["severity"] == "note":
            if heads and _path(heads[-1]) == _path(match):
                printed[-1].append(raw)
                notes[-1].append(
                    Site(_path(match), int(match["line"]), raw.split(": note: ", 1)[1])
                )
            continue
        heads.append(match)
        notes.append([])
        printed.append([raw])
    errors = [
        Diagnostic(
            _path(head),
            int(head["line"]),
            int(head["col"]) if head["col"] else 0,
            head["code"] or "misc",
            head["message"],
            related=tuple(sites),
        )
        for head, sites in zip(heads, notes, strict=True)
    ]
    return errors, printed


def _path(match: re.Match[str]) -> str:
    return match["path"].replace(os.sep, "/")


def key(error: Diagnostic) -> str:
    """The baseline's form (:mod:`runnercheck.baseline`): no line number."""
    return baseline.key(error.path, error.code, error.message)


def gating(
    errors: Sequence[Diagnostic], codes: frozenset[str], accepted: Counter[str] | None
) -> list[Diagnostic]:
    """The errors that fail the run: those of ``codes`` or, with a baseline, those it
    does not hold (each baseline line covers one error)."""
    if accepted is None:
        return [error for error in errors if error.code in codes]
    return [errors[i] for i in baseline.new([key(error) for error in errors], accepted)]


def run_mypy(mypy_args: Sequence[str]) -> tuple[list[str], int]:
    """mypy on ``mypy_args`` with the plugin loaded; (its report lines, 2 if mypy stopped)."""
    from mypy import build
    from mypy.errors import CompileError
    from mypy.fscache import FileSystemCache
    from mypy.main import process_options
    from mypy.version import __version__

    from mypy_plugin.version import UnsupportedMypyError, check_mypy_version

    try:
        check_mypy_version(__version__)
    except UnsupportedMypyError as exc:
        raise GateError(str(exc)) from None
    # mypy before 1.19 validates --disable-error-code and the configuration's codes while
    # it parses them: declared first, the plugin's codes are valid there too
    from mypy_plugin import errors as _errors  # noqa: F401
    from mypy_plugin.compat import RECURSION_LIMIT

    sys.setrecursionlimit(max(sys.getrecursionlimit(), RECURSION_LIMIT))  # as mypy's main
    fscache = FileSystemCache()
    sources, options = process_options(list(mypy_args), program=PROG, fscache=fscache)
    extra = []
    if PLUGIN not in options.plugins or not options.config_file:
        # mypy loads configured plugins only from a configuration file: add it directly
        from mypy_plugin import plugin

        extra.append(plugin(__version__)(options))
    options.hide_error_codes = False
    options.pretty = False
    options.show_absolute_path = False
    try:
        result = build.build(
            sources,
            options,
            fscache=fscache,
            stdout=sys.stdout,
            stderr=sys.stderr,
            extra_plugins=extra,
        )
    except CompileError as exc:
        return list(exc.messages), 2
    return list(result.errors), 0


def summary(errors: Sequence[Diagnostic], gated: Sequence[Diagnostic], baseline: bool) -> str:
    failing = {id(error) for error in gated}
    others = Counter(error.code for error in errors if id(error) not in failing)
    files = len({error.path for error in gated})
    what = "new mypy error" if baseline else "contract error"
    head = (
        f"{len(gated)} {what}{'s' if len(gated) != 1 else ''} in {files} "
        f"file{'s' if files != 1 else ''}"
        if gated
        else f"no {what}s"
    )
    if not others:
        return head
    listed = ", ".join(f"{code} {count}" for code, count in others.most_common(5))
    rest = "" if len(others) <= 5 else ", ..."
    kind = "in the baseline" if baseline else "not gating"
    return f"{head}; {sum(others.values())} other mypy errors {kind} ({listed}{rest})"


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog=PROG,
        description="mypy with the runnercheck plugin, failing only on the contract's "
        "codes, or only on errors a committed baseline does not hold.",
        epilog="Other arguments go to mypy (targets, --config-file, ...). Exit status: "
        "0 nothing gating, 1 gating errors, 2 usage error or mypy stopped.",
    )
    add_arguments(parser)
    parser.add_argument(
        "-q", "--quiet", action="store_true", help="no progress display (terminal only)"
    )
    return parser


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--baseline",
        type=Path,
        metavar="FILE",
        help="fail only on errors (any code) this file does not hold",
    )
    parser.add_argument(
        "--write-baseline",
        action="store_true",
        help="record the current errors in --baseline FILE and exit 0",
    )
    parser.add_argument(
        "--code",
        action="append",
        default=[],
        metavar="CODE",
        help="also fail on this mypy error code (e.g. override, type-var); repeatable",
    )
    parser.add_argument("--all", action="store_true", help="print every error, not only gating")
    parser.add_argument(
        "--format",
        choices=("text", "github"),
        default="text",
        help="output format (github: workflow annotations for GitHub Actions)",
    )


def gate(options: argparse.Namespace, mypy_args: Sequence[str], fast_exit: bool = False) -> int:
    """Run mypy and decide; ``fast_exit`` ends the process at once when done, without
    freeing mypy's graph (as mypy's own command does: that teardown costs about as much
    CPU as checking a small package), so only a command line's process should ask it."""
    status = _gate(options, mypy_args)
    if fast_exit:
        from mypy.util import hard_exit

        hard_exit(status)
    return status


def _gate(options: argparse.Namespace, mypy_args: Sequence[str]) -> int:
    if options.write_baseline and options.baseline is None:
        raise GateError("--write-baseline needs --baseline FILE")
    accepted = None
    if options.baseline is not None and not options.write_baseline:
        accepted = baseline.read(options.baseline, PROG)
    with working("running mypy with the runnercheck plugin", getattr(options, "quiet", False)):
        lines, stopped = run_mypy(mypy_args)
    if stopped:
        for line in lines:
            echo(line, stderr=True)
        return 2
    errors, printed = parse(lines)
    if options.write_baseline:
        baseline.write(options.baseline, [key(error) for error in errors], PROG)
        echo(f"{PROG}: {len(errors)} errors recorded in {options.baseline}")
        return 0
    gated = gating(errors, contract_codes() | frozenset(options.code), accepted)
    shown = errors if options.all else gated
    if getattr(options, "format", "text") == "github":
        failing = {id(error) for error in gated}
        for error in shown:
            echo(_annotation(error, id(error) in failing))
    else:
        lines_of = {id(error): text for error, text in zip(errors, printed, strict=True)}
        for error in shown:
            echo("\n".join(lines_of[id(error)]))
    echo(f"{PROG}: {summary(errors, gated, accepted is not None)}")
    return 1 if gated else 0


def _annotation(error: Diagnostic, failing: bool) -> str:
    """One workflow command: an error for what fails the run, a warning for the rest
    (``--all``); mypy's notes on the error follow its message."""
    shown = error if failing else replace(error, severity="warning")
    return diagnostic_formats.github(shown, f"mypy [{error.code}]")


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    options, mypy_args = parser.parse_known_args(argv)
    try:
        return gate(options, mypy_args, fast_exit=argv is None)
    except (GateError, UsageError) as exc:
        echo(f"{PROG}: error: {exc}", stderr=True, newlines=False)
        return 2
    except SystemExit as exc:  # mypy's own usage errors (it printed them)
        return exc.code if isinstance(exc.code, int) else 2


if __name__ == "__main__":
    raise SystemExit(main())
