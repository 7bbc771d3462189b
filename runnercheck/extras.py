"""Optional dependencies: which extra a command needs, and the one line that says so."""

from __future__ import annotations

import importlib.util

from runnercheck.errors import RunnerCheckError

#: The packages of the ``fuzz`` extra (``pip install 'runnercheck[fuzz]'``).
FUZZ_PACKAGES = ("torch", "numpy", "hypothesis")


class MissingExtraError(RunnerCheckError):
    """A command needs an optional dependency that is not installed."""


def missing(packages: tuple[str, ...] = FUZZ_PACKAGES) -> list[str]:
    """The packages of ``packages`` that cannot be found (none is imported)."""
    return [name for name in packages if importlib.util.find_spec(name) is None]


def require_fuzz_extra(what: str, packages: tuple[str, ...] = FUZZ_PACKAGES) -> None:
    """Raise one line naming the fuzz extra when one of ``packages`` (by default all of
    the extra's: torch, numpy, hypothesis) is missing."""
    absent = missing(packages)
    if absent:
        raise MissingExtraError(
            f"{what} needs the fuzz extra ({', '.join(absent)} not installed): "
            "pip install 'runnercheck[fuzz]'"
        )
