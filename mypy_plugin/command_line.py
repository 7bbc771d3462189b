"""``runnercheck mypy [OPTIONS] [MYPY ARGUMENTS]``: mypy with the plugin, as a CI gate.

It fails only on the contract's codes (the RC2xx rules), or, with ``--baseline``, only
on errors that the committed baseline does not hold; see :mod:`mypy_plugin.gate`.
``runnercheck`` finds this module through its entry point (the group
``runnercheck.commands`` in ``pyproject.toml``; :mod:`runnercheck.commands.registry`).
"""

from __future__ import annotations

import argparse

#: The arguments runnercheck does not know go to mypy, in their order.
PASS_THROUGH = "mypy_args"
HELP = "mypy with the plugin, failing only on the contract's codes (or new errors)"
EPILOG = """\
Give runnercheck's options first; everything after them goes to mypy (targets,
--config-file, ...). The mypy configuration is read as mypy reads it, and the plugin
is added when it does not load it.

  runnercheck mypy vllm/worker/                 # fail on the contract's codes only
  runnercheck mypy --code override vllm/        # ... and on mypy's [override]
  runnercheck mypy --baseline mypy-baseline.txt --write-baseline vllm/
  runnercheck mypy --baseline mypy-baseline.txt vllm/   # fail on new errors only

exit status: 0 nothing gating, 1 gating errors (printed as mypy prints them),
2 usage error, or mypy stopped (a syntax error, a bad configuration)"""


def configure(parser: argparse.ArgumentParser) -> None:
    from mypy_plugin.gate import add_arguments

    add_arguments(parser)
    parser.add_argument("mypy_args", nargs=argparse.REMAINDER, metavar="MYPY ARGUMENTS")


def run(args: argparse.Namespace) -> int:
    from mypy_plugin.gate import GateError, gate
    from runnercheck.errors import UsageError

    try:
        # the command line's own process ends at once (see mypy_plugin.gate.gate)
        return gate(args, args.mypy_args, fast_exit=args._command_line)
    except GateError as exc:
        raise UsageError(str(exc)) from None
    except SystemExit as exc:  # mypy's own usage errors (it printed them)
        return exc.code if isinstance(exc.code, int) else 2
