"""The one reader of TOML files: ``[tool.runnercheck]`` and the settings ``migrate``
reads from a target's ``pyproject.toml`` and ``ruff.toml`` all come through it.

A file is read as source files are (:func:`runnercheck.files.read_source`): a regular
file only, opened without blocking, at most :data:`MAX_CONFIG_SIZE` bytes. Before it is
parsed its nesting is measured: Python's TOML parser recurses once per array or inline
table (a file nested a few hundred deep ends in a ``RecursionError``) and takes time
and memory quadratic in the parts of a dotted key (``a.b.c...`` 100,000 parts long
never ends), so a file nested deeper than :data:`MAX_NESTING` is not parsed. Every
problem is a :class:`~runnercheck.errors.ConfigError` of one line naming the file.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path
from typing import Any

from runnercheck.errors import ConfigError
from runnercheck.files import DEFAULT_MAX_FILE_SIZE, ReadError, read_source

#: The deepest nesting read: arrays, inline tables and table headers inside each other,
#: plus the parts of a dotted key. Real configuration files nest a few levels deep.
MAX_NESTING = 100
#: The largest configuration file read (bytes).
MAX_CONFIG_SIZE = DEFAULT_MAX_FILE_SIZE

#: Strings and comments, whose brackets and dots are text (written so that the engine
#: takes a string's characters in runs: a multi-line string ends at its first three
#: quotes, and two more quotes may end it).
_STRING_OR_COMMENT = (
    r'"(?:""[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"{3,5}'  # multi-line basic
    r'|[^"\\\n]*(?:\\.[^"\\\n]*)*")'  # basic
    r"|'(?:''[^']*(?:'(?!'')[^']*)*'{3,5}"  # multi-line literal
    r"|[^'\n]*')"  # literal
    r"|#[^\n]*"  # comment
)
_STRINGS_AND_COMMENTS = re.compile(_STRING_OR_COMMENT, re.DOTALL)
#: What the scan sees: strings and comments (skipped whole), brackets, and what ends or
#: continues a dotted key.
_TOKENS = re.compile(rf"{_STRING_OR_COMMENT}|[\[\]{{}}.=,\n]", re.DOTALL)


def _shallow(text: str, limit: int) -> bool:
    """True when ``text`` cannot nest deeper than ``limit``: fewer brackets than the
    limit and no line with more dots than the brackets leave room for."""
    brackets = text.count("[") + text.count("{")
    if brackets > limit:
        return False
    dots = limit - brackets + 1
    return re.search(rf"^(?:[^.\n]*\.){{{dots}}}", text, re.MULTILINE) is None


def nesting_line(text: str, limit: int = MAX_NESTING) -> int | None:
    """The line at which ``text`` nests deeper than ``limit`` (brackets and braces open
    around a place, plus the dots of the key being read there), else None."""
    if _shallow(text, limit) or _shallow(_STRINGS_AND_COMMENTS.sub("", text), limit):
        return None  # (brackets and dots in strings, as globs hold them, are text)
    depth = dots = 0
    for match in _TOKENS.finditer(text):
        char = match.group()[0]
        if char in "[{":
            depth += 1
            dots = 0
        elif char in "]}":
            depth = max(depth - 1, 0)
            dots = 0
        elif char == ".":
            dots += 1
        elif char in "=,\n":
            dots = 0
        else:  # a string or a comment
            continue
        if depth + dots > limit:
            return text.count("\n", 0, match.start()) + 1
    return None


def load_toml(
    path: Path, *, max_nesting: int = MAX_NESTING, max_size: int = MAX_CONFIG_SIZE
) -> dict[str, Any]:
    """The TOML document in ``path``; :class:`ConfigError` (one line naming the file)
    when it cannot be read, is not a regular file, is larger than ``max_size`` bytes,
    nests deeper than ``max_nesting`` or is not valid TOML."""
    try:
        text = read_source(path, max_size).decode("utf-8")
    except ReadError as exc:
        if exc.kind == "special":
            raise ConfigError(f"{path}: not a regular file ({exc.what})") from None
        if exc.kind == "too-large":
            raise ConfigError(
                f"{path}: more than {max_size} bytes: not read as a configuration file"
            ) from None
        reason = exc.reason.removeprefix("cannot read: ")
        raise ConfigError(f"{path}: cannot read configuration: {reason}") from None
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: cannot read configuration: {exc}") from None
    line = nesting_line(text, max_nesting)
    if line is not None:
        raise ConfigError(
            f"{path}: TOML nested more than {max_nesting} levels deep "
            f"(arrays, inline tables, dotted keys) at line {line}: not read"
        )
    if sys.version_info >= (3, 11):  # imported here: no TOML file, no TOML parser
        import tomllib
    else:  # pragma: no cover - exercised on 3.10 only
        import tomli as tomllib
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{path}: invalid TOML: {exc}") from None
    except RecursionError:  # only past the scan's bound (``max_nesting`` raised)
        raise ConfigError(f"{path}: TOML nested too deeply to read: not read") from None
