"""Checks of command-line values shared by the commands, run before any work starts:
numbers finite and in range, output files and directories that can be written.

Each failure is a :class:`~runnercheck.errors.UsageError` (one line, exit 2) naming the
option and the value.
"""

from __future__ import annotations

import math
import os
from pathlib import Path

from runnercheck.errors import UsageError


def check_number(option: str, value: float | None, low: float, high: float, unit: str = "") -> None:
    """``value`` (None: not given) is finite and within ``[low, high]``."""
    if value is None:
        return
    finite = math.isfinite(value) if isinstance(value, float) else True
    if not finite or not low <= value <= high:
        suffix = f" {unit}" if unit else ""
        raise UsageError(
            f"{option} must be between {_show(low)} and {_show(high)}{suffix}, not {value}"
        )


def _show(bound: float) -> str:
    return f"{bound:g}" if isinstance(bound, float) else str(bound)


def _reason(exc: OSError) -> str:
    return exc.strerror or type(exc).__name__


def check_output_file(option: str, path: Path | None) -> None:
    """``path`` can be written as a file: its directory exists and is writable, and it is
    not a directory itself (an existing file is replaced)."""
    if path is None:
        return
    if path.is_dir():
        raise UsageError(f"{option} {path}: is a directory")
    parent = path.parent
    if not parent.exists():
        raise UsageError(f"{option} {path}: no such directory: {parent}")
    if not parent.is_dir():
        raise UsageError(f"{option} {path}: not a directory: {parent}")
    if path.exists() and not path.is_file():
        raise UsageError(f"{option} {path}: not a regular file")
    target = path if path.exists() else parent
    if not os.access(target, os.W_OK) or (target is parent and not os.access(parent, os.X_OK)):
        raise UsageError(f"{option} {path}: permission denied")


def write_output_file(option: str, path: Path, text: str) -> None:
    """Write ``text`` to ``path`` whole or not at all (through a temporary file beside it)."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        try:
            temporary.unlink()
        except OSError:
            pass
        raise UsageError(f"{option} {path}: cannot write it: {_reason(exc)}") from None


def prepare_output_dir(option: str, path: Path | None, holds: str = "") -> None:
    """Create directory ``path`` (with its parents) unless it exists; refuse a path that
    is not a directory, cannot be created, cannot be written, or already holds files
    matching the glob ``holds`` (another run's output, which would be read as this one's)."""
    if path is None:
        return
    if path.exists() or path.is_symlink():
        if not path.is_dir():
            raise UsageError(f"{option} {path}: not a directory")
    else:
        try:
            path.mkdir(parents=True)
        except OSError as exc:
            raise UsageError(f"{option} {path}: cannot create it: {_reason(exc)}") from None
    if not os.access(path, os.W_OK | os.X_OK):
        raise UsageError(f"{option} {path}: permission denied")
    if holds and next(path.glob(holds), None) is not None:
        raise UsageError(
            f"{option} {path}: holds {holds} files of another run (give a new or empty directory)"
        )
