"""The mypy versions the plugin supports, and the check made when mypy loads it."""

from __future__ import annotations

import re
from typing import Final

#: Lowest supported mypy version (inclusive) and first unsupported one (exclusive);
#: keep in step with the ``mypy>=1.9,<2.5`` requirement in pyproject.toml and with the
#: versions scripts/mypy_versions.sh runs the plugin's suite under.
MIN_MYPY: Final = (1, 9)
MAX_MYPY: Final = (2, 5)
SUPPORTED: Final = f">={MIN_MYPY[0]}.{MIN_MYPY[1]},<{MAX_MYPY[0]}.{MAX_MYPY[1]}"


class UnsupportedMypyError(Exception):
    """The running mypy is outside :data:`SUPPORTED`."""


def parse_version(version: str) -> tuple[int, int]:
    """``(major, minor)`` of a mypy version string such as ``2.4.1`` or ``2.5.0+dev.abc``."""
    match = re.match(r"\s*(\d+)\.(\d+)", version)
    if match is None:
        raise UnsupportedMypyError(f"cannot read the mypy version {version!r}")
    return int(match.group(1)), int(match.group(2))


def check_mypy_version(version: str) -> None:
    """Raise :class:`UnsupportedMypyError` unless ``version`` is in the supported range."""
    found = parse_version(version)
    if not MIN_MYPY <= found < MAX_MYPY:
        raise UnsupportedMypyError(
            f"mypy {version} is not supported (the runnercheck plugin supports mypy {SUPPORTED})"
        )
