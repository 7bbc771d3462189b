"""The commands ``runnercheck`` runs, and where each one's module is found.

runnercheck's own commands are modules of this package (``demo``'s is
:mod:`runnercheck.demo.command`), imported by name. The commands of the packages that
build on runnercheck, ``migrate`` (:mod:`codemods.command_line`) and ``mypy``
(:mod:`mypy_plugin.command_line`), are entry points of the group
``runnercheck.commands``, declared in ``pyproject.toml`` and read from the installed
distributions' metadata, as pytest and flake8 find their plugins: runnercheck never
imports the packages that import it. Another distribution may add a command the same
way; it is listed after runnercheck's own.

A command module defines ``HELP`` (one line), ``configure(parser)`` and
``run(args) -> int``, and may define ``EPILOG`` and ``PASS_THROUGH`` (see
:func:`runnercheck.cli.build_parser`). Naming runnercheck's own command reads no
metadata, so ``runnercheck check`` starts as fast as before.
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType
from typing import TYPE_CHECKING

from runnercheck.errors import RunnerCheckError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

#: The entry-point group of the commands that live outside runnercheck.
GROUP = "runnercheck.commands"

#: runnercheck's own commands and their modules.
BUILTIN = {
    "check": "runnercheck.commands.check",
    "fuzz": "runnercheck.commands.fuzz",
    "trace": "runnercheck.commands.trace",
    "demo": "runnercheck.demo.command",
    "rules": "runnercheck.commands.rules",
    "config": "runnercheck.commands.config",
}

#: Every command of a whole install, in the order ``--help`` lists them.
NAMES = ("check", "migrate", "mypy", "fuzz", "trace", "demo", "rules", "config")


class CommandMissing(RunnerCheckError):
    """A command whose module is not installed (no entry point names it, or the
    package the entry point names cannot be imported)."""


@functools.cache
def _entry_points() -> dict[str, EntryPoint]:
    """The group's entry points by name, the first of each name on ``sys.path``. Every
    distribution is read, not only the first of each name: a stale ``*.egg-info`` of
    runnercheck in the current directory does not hide the installed one's."""
    from importlib.metadata import distributions

    found: dict[str, EntryPoint] = {}
    for distribution in distributions():
        for entry in distribution.entry_points.select(group=GROUP):
            found.setdefault(entry.name, entry)
    return found


def names() -> tuple[str, ...]:
    """:data:`NAMES`, then the commands other distributions add, by name."""
    added = sorted(name for name in _entry_points() if name not in NAMES)
    return (*NAMES, *added)


def load(name: str) -> ModuleType:
    """The module of the command ``name``; :class:`CommandMissing` (one line) when it
    is not installed."""
    if name in BUILTIN:
        return importlib.import_module(BUILTIN[name])
    entry = _entry_points().get(name)
    if entry is None:
        raise CommandMissing(
            f"the {name!r} command is not installed: no entry point {name!r} in the "
            f"group {GROUP!r} (reinstall runnercheck)"
        )
    try:
        module = entry.load()
    except ImportError as exc:
        raise CommandMissing(
            f"the {name!r} command is not installed: its entry point names "
            f"{entry.value!r}, which cannot be imported ({exc})"
        ) from None
    if not isinstance(module, ModuleType):
        raise CommandMissing(
            f"the {name!r} command's entry point names {entry.value!r}, not a module"
        )
    return module
