"""A baseline: the findings a project accepts today, so that only new ones fail.

One finding a line, tab-separated: path, code, message, with every line number taken
out of the message (``worker.py:129`` is ``worker.py``), so that a finding that moves
with its code still matches. Each line covers one finding: two alike need two lines.
The file is written whole, through a new file renamed over it.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from pathlib import Path

from runnercheck.catalog import canonical
from runnercheck.errors import UsageError

_LINE_NUMBER = re.compile(r"(\.pyi?):\d+(?::\d+)?|\bline \d+")


def key(path: str, code: str, message: str) -> str:
    """A finding's baseline line (without its newline)."""
    steady = _LINE_NUMBER.sub(lambda m: m.group(1) or "line", message)
    return "\t".join(part.replace("\t", " ").replace("\n", " ") for part in (path, code, steady))


def read(path: Path, command: str) -> Counter[str]:
    """The lines of the baseline ``path``; :class:`UsageError` naming the file (and the
    line) when it is missing or not a baseline."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise UsageError(
            f"{path}: no such baseline (make it with `{command} --baseline {path} "
            "--write-baseline`)"
        ) from None
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(f"{path}: cannot read the baseline ({exc})") from None
    entries: Counter[str] = Counter()
    for number, line in enumerate(text.splitlines(), 1):
        if not line or line.startswith("#"):
            continue
        if line.count("\t") != 2:
            raise UsageError(f"{path}:{number}: not a baseline line (path, code, message)")
        shown, code, message = line.split("\t")
        # a line written with its line numbers too, or with a code that is now another
        entries[key(shown, canonical(code), message)] += 1
    return entries


def write(path: Path, keys: Iterable[str], command: str) -> None:
    header = (
        f"# findings accepted by `{command} --baseline` (path, code, message without line "
        "numbers; tab-separated). Regenerate with --write-baseline.\n"
    )
    text = header + "".join(f"{line}\n" for line in sorted(keys))
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    try:
        temporary.write_text(text, encoding="utf-8")
        os.replace(temporary, path)
    except OSError as exc:
        temporary.unlink(missing_ok=True)
        raise UsageError(f"{path}: cannot write the baseline ({exc.strerror or exc})") from None


def new(keys: Sequence[str], accepted: Counter[str]) -> list[int]:
    """The indices of ``keys`` the baseline does not cover (each of its lines covers
    one)."""
    left = Counter(accepted)
    fresh = []
    for index, line in enumerate(keys):
        if left[line] > 0:
            left[line] -= 1
        else:
            fresh.append(index)
    return fresh
