"""The ``runnercheck`` command line.

Exit codes (all subcommands): 0 clean, 1 findings or files changed, 2 usage or
input errors. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import atexit
import importlib.util
import os
import re
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import ModuleType

from runnercheck import __version__
from runnercheck.commands import registry
from runnercheck.errors import EXIT_INTERRUPTED, EXIT_USAGE, RunnerCheckError

EPILOG = "exit status: 0 clean, 1 findings or files changed, 2 usage or input error"


def _command_modules(only: str | None = None) -> dict[str, ModuleType | RunnerCheckError]:
    """The command modules (:mod:`runnercheck.commands.registry`), or only ``only``'s:
    each command imports what it needs, so naming one (``check`` in a pre-commit hook)
    never imports the others. A command that is not installed is its one-line error;
    naming it raises that error."""
    if only is not None:
        return {only: registry.load(only)}
    modules: dict[str, ModuleType | RunnerCheckError] = {}
    for name in registry.names():
        try:
            modules[name] = registry.load(name)
        except registry.CommandMissing as missing:
            modules[name] = missing
    return modules


def _named_command(argv: Sequence[str]) -> str | None:
    """The subcommand ``argv`` names before any other positional argument, if any."""
    for arg in argv:
        if arg == "--":
            return None
        if not arg.startswith("-"):
            return arg if arg in registry.NAMES else None
    return None


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        from runnercheck.console import printable

        self.print_usage(sys.stderr)
        message += _did_you_mean(self, message)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {printable(message, newlines=False)}\n")


def _did_you_mean(parser: argparse.ArgumentParser, message: str) -> str:
    """`` (did you mean ...?)`` for a mistyped subcommand or option, or ``""``."""
    import difflib
    import re

    choice = re.match(r"argument COMMAND: invalid choice: '(.*?)'", message)
    if choice:
        wanted, known = [choice.group(1)], list(registry.names())
    elif message.startswith("unrecognized arguments: "):
        wanted = [w.split("=")[0] for w in message.split()[2:] if w.startswith("-")]
        known = [o for a in parser._actions for o in a.option_strings if o.startswith("--")]
    else:
        return ""
    bare = {k.lstrip("-"): k for k in known}  # the dashes alone make any two options alike
    guesses = [
        bare[g] for w in wanted for g in difflib.get_close_matches(w.lstrip("-"), bare, 1, 0.7)
    ]
    return f" (did you mean {' or '.join(repr(g) for g in guesses)}?)" if guesses else ""


def _plain(text: str) -> str:
    """A docstring's line as help text: ````code```` and ``:role:`name``` as plain words."""
    return re.sub(r":\w+:`([^`]*)`", r"\1", text).replace("``", "")


def build_parser(only: str | None = None) -> argparse.ArgumentParser:
    """The parser; with ``only``, the parser of that one command (a command line that
    names it needs no other)."""
    parser = _Parser(
        prog="runnercheck",
        description="Check, migrate and fuzz the model-runner broadcast contract "
        "of vLLM-like inference engines.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"runnercheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    parser.set_defaults(_parser=parser)
    for name, module in _command_modules(only).items():
        if isinstance(module, RunnerCheckError):  # listed, and said when named
            sub.add_parser(name, help="(not installed)", add_help=False).set_defaults(
                _run=_raiser(module), _parser=parser
            )
            continue
        command_parser = sub.add_parser(
            name,
            allow_abbrev=not hasattr(module, "PASS_THROUGH"),
            help=module.HELP,
            description=_plain(module.__doc__.strip().splitlines()[0]) if module.__doc__ else None,
            epilog=getattr(module, "EPILOG", EPILOG),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(command_parser)
        command_parser.add_argument(
            "-q",
            "--quiet",
            action="store_true",
            help="no progress display (shown on a terminal only, never when piped)",
        )
        command_parser.set_defaults(
            _run=module.run,
            _pass_through=getattr(module, "PASS_THROUGH", ""),
            _parser=command_parser,
        )
    return parser


def _raiser(error: RunnerCheckError) -> Callable[[argparse.Namespace], int]:
    def run(args: argparse.Namespace) -> int:
        raise error

    return run


#: The project's other top-level packages, installed beside ``runnercheck``.
SIBLINGS = ("codemods", "mypy_plugin")


def own_siblings() -> None:
    """Make ``codemods`` and ``mypy_plugin`` in this process runnercheck's own, installed
    beside it, where a directory earlier on ``sys.path`` holds packages of those names
    (an engine's root on ``PYTHONPATH``, or the current directory of ``python -m
    runnercheck``). ``sys.path`` is left as it is, so every other module is found as
    before; only the command line does this (the pytest plugin, loaded in an engine's
    own test runs, leaves the engine's packages alone)."""
    home = Path(__file__).resolve().parent.parent
    for name in SIBLINGS:
        if name in sys.modules:
            continue
        spec = importlib.util.find_spec(name)
        if spec is None or spec.origin is None:
            continue
        if Path(spec.origin).resolve().is_relative_to(home / name):
            continue
        init = home / name / "__init__.py"
        own = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(home / name)]
        )
        if own is None or own.loader is None or not init.is_file():
            continue
        module = importlib.util.module_from_spec(own)
        sys.modules[name] = module
        own.loader.exec_module(module)


def main(argv: Sequence[str] | None = None) -> int:
    own_siblings()
    arguments = sys.argv[1:] if argv is None else list(argv)
    try:
        parser = build_parser(_named_command(arguments))
    except RunnerCheckError as exc:  # the command named is not installed
        return _report(exc)
    args, unknown = parser.parse_known_args(arguments)
    through = getattr(args, "_pass_through", "")
    if unknown and not through:  # said with the usage of the command that got them
        args._parser.error(f"unrecognized arguments: {' '.join(unknown)}")
    if through:  # a command that hands the arguments it does not know to another tool
        setattr(args, through, [*unknown, *getattr(args, through)])
    args._command_line = argv is None  # this process runs the command line, not a caller
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args))
    except RunnerCheckError as exc:
        return _report(exc)
    except KeyboardInterrupt:
        print("runnercheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


def _report(error: RunnerCheckError) -> int:
    """Say ``error`` in one line on stderr; its exit status."""
    from runnercheck.console import echo

    echo(f"runnercheck: error: {error}", stderr=True, newlines=False)
    return error.exit_code


#: Commands whose process may end without Python's teardown (see :func:`finish`).
QUICK_EXIT = frozenset({"check"})
#: Commands whose process ends once its threads and exit handlers are done.
QUICK_EXIT_AFTER_HANDLERS = frozenset({"fuzz"})


def finish(code: int) -> None:
    """End the process with ``code``.

    ``check`` holds every file's facts when it is done; freeing them one by one at
    interpreter shutdown costs a tenth of a small run. It starts no process and leaves
    no file open, so once its output is flushed its process ends at once, as mypy's
    does. ``fuzz`` has imported torch and Hypothesis, whose teardown costs about as
    much as its whole run after the imports: it waits for its threads and runs its exit
    handlers (which end its processes and remove its files), as Python's own exit
    would, and then ends at once. Every other command exits normally (their children
    and journals are cleaned up by their own handlers)."""
    command = _named_command(sys.argv[1:])
    if command in QUICK_EXIT or command in QUICK_EXIT_AFTER_HANDLERS:
        if command in QUICK_EXIT_AFTER_HANDLERS:
            _join_threads()
            atexit._run_exitfuncs()
        try:
            sys.stdout.flush()
            sys.stderr.flush()
        except BrokenPipeError:
            pass
        except OSError:
            raise SystemExit(code) from None
        os._exit(code)
    raise SystemExit(code)


def _join_threads() -> None:
    """Wait for the threads that are not daemons, as the interpreter does at exit."""
    current = threading.current_thread()
    for thread in threading.enumerate():
        if thread is not current and not thread.daemon and thread.is_alive():
            thread.join()


if __name__ == "__main__":  # pragma: no cover
    finish(main())
