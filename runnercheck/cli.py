"""The ``runnercheck`` command line.

Exit codes (all subcommands): 0 clean, 1 findings or files changed, 2 usage or
input errors. Errors are one line on stderr, never a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import sys
from collections.abc import Sequence
from types import ModuleType

from runnercheck import __version__
from runnercheck.errors import EXIT_INTERRUPTED, EXIT_USAGE, RunnerCheckError

#: Subcommands in the order ``--help`` lists them, and the module of each.
COMMANDS = {
    "check": "runnercheck.commands.check",
    "migrate": "runnercheck.commands.migrate",
    "fuzz": "runnercheck.commands.fuzz",
    "trace": "runnercheck.commands.trace",
    "demo": "runnercheck.demo.command",
    "rules": "runnercheck.commands.rules",
    "config": "runnercheck.commands.config",
}

EPILOG = "exit status: 0 clean, 1 findings or files changed, 2 usage or input error"


def _command_modules() -> dict[str, ModuleType]:
    modules: dict[str, ModuleType] = {}
    for name, qualified in COMMANDS.items():
        if importlib.util.find_spec(qualified) is not None:
            modules[name] = importlib.import_module(qualified)
    return modules


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> None:  # type: ignore[override]
        self.print_usage(sys.stderr)
        self.exit(EXIT_USAGE, f"{self.prog}: error: {message}\n")


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="runnercheck",
        description="Check, migrate and fuzz the model-runner broadcast contract "
        "of vLLM-like inference engines.",
        epilog=EPILOG,
    )
    parser.add_argument("--version", action="version", version=f"runnercheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)
    for name, module in _command_modules().items():
        command_parser = sub.add_parser(
            name,
            help=module.HELP,
            description=module.__doc__.strip().splitlines()[0] if module.__doc__ else None,
            epilog=getattr(module, "EPILOG", EPILOG),
            formatter_class=argparse.RawDescriptionHelpFormatter,
        )
        module.configure(command_parser)
        command_parser.set_defaults(_run=module.run)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help()
        return EXIT_USAGE
    try:
        return int(args._run(args))
    except RunnerCheckError as exc:
        print(f"runnercheck: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print("runnercheck: interrupted", file=sys.stderr)
        return EXIT_INTERRUPTED
    except BrokenPipeError:
        return 0


if __name__ == "__main__":  # pragma: no cover
    raise SystemExit(main())
