"""runnercheck's mypy plugin: type-aware checks of the model-runner broadcast contract.

Enable it in ``mypy.ini`` / ``setup.cfg``::

    [mypy]
    plugins = mypy_plugin

or in ``pyproject.toml``::

    [tool.mypy]
    plugins = ["mypy_plugin"]

Settings come from ``[tool.runnercheck]`` (the same keys as the ``runnercheck``
CLI) or a ``[runnercheck]`` section of the mypy ini file; see
:mod:`mypy_plugin.config`. The error codes are the names of the RC2xx rules of
:mod:`mypy_plugin.rules` (``runnercheck rules RC201`` explains one).
"""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, NoReturn

from mypy_plugin.version import SUPPORTED, UnsupportedMypyError, check_mypy_version

if TYPE_CHECKING:
    from mypy.plugin import Plugin

__all__ = ["SUPPORTED", "plugin"]

#: Prefix of the one-line messages the plugin prints before making mypy exit with 2.
MESSAGE_PREFIX = "runnercheck mypy plugin: error: "


def fatal(message: str) -> NoReturn:
    """Print one line and end mypy with exit status 2 (a usage error, never a traceback)."""
    from runnercheck.console import printable

    print(MESSAGE_PREFIX + printable(message, newlines=False), file=sys.stderr, flush=True)
    raise SystemExit(2)


def plugin(version: str) -> type[Plugin]:
    """mypy's entry point: ``version`` is the running mypy's version."""
    try:
        check_mypy_version(version)
    except UnsupportedMypyError as exc:
        fatal(str(exc))
    from mypy_plugin.hooks import RunnercheckPlugin

    return RunnercheckPlugin
