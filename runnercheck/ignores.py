"""What a project chose not to hear: one mechanism for ``check``'s findings and
``migrate``'s refusals, as ruff has it.

- ``ignore = ["RC106", "MIG204"]`` (and ``--ignore``): a code is never reported;
- ``per_file_ignores = {"tests/*" = ["RC101"], "vllm/spec_decode/*" = ["MIG204"]}``:
  a code is not reported in the files a glob matches (matched as ``exclude`` matches:
  the path as shown or relative to the project root, or a directory above it);
- ``# runnercheck: ignore[RC106, MIG204]`` (or a bare ``# runnercheck: ignore``) on
  the line a finding or a refusal names.

A hidden refusal still leaves its code alone (nothing is rewritten that the refusal
protects); it no longer fails ``migrate --check``. An entry that can hide nothing is
said in one line: a ``per_file_ignores`` glob that matches no file the run saw.
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Mapping
from pathlib import Path

from runnercheck import catalog
from runnercheck.errors import UsageError
from runnercheck.excludes import Excludes

_SUPPRESS = re.compile(r"#\s*runnercheck:\s*ignore(?:\[([^\]]*)\])?", re.IGNORECASE)

#: line -> the codes its comment names (None: a bare comment, every code)
Suppressions = dict[int, frozenset[str] | None]


def suppressions(source: str) -> Suppressions:
    """``# runnercheck: ignore[RC101, RC102]`` (or bare) comments by line."""
    found: Suppressions = {}
    if "runnercheck:" not in source and "RUNNERCHECK:" not in source.upper():
        return found
    for number, text in enumerate(source.splitlines(), start=1):
        if "#" not in text:
            continue
        for match in _SUPPRESS.finditer(text):
            codes = match.group(1)
            if codes is None or not codes.strip():
                found[number] = None
            elif found.get(number, frozenset()) is not None:
                parsed = {c.strip().upper() for c in codes.split(",") if c.strip()}
                found[number] = frozenset(parsed | set(found.get(number) or ()))
    return found


def suppressed(comments: Suppressions, line: int, code: str) -> bool:
    """Whether the comment on ``line`` hides ``code``."""
    if line not in comments:
        return False
    codes = comments[line]
    return codes is None or code in {catalog.canonical(c) for c in codes}


def codes_of(values: Iterable[str], where: str) -> frozenset[str]:
    """The catalog codes ``values`` name (codes, rule names, or code prefixes such as
    ``MIG2``); :class:`UsageError` naming ``where`` for an entry that names none."""
    codes, _ = catalog.rule_words()
    out: set[str] = set()
    for value in values:
        entry = value.strip()
        if not entry:
            continue
        try:
            out.add(catalog.code_of(entry))
            continue
        except KeyError:
            pass
        matching = {catalog.canonical(c) for c in codes if c.startswith(entry.upper())}
        if not matching:
            raise UsageError(f"{where}: unknown rule {entry!r} (see `runnercheck rules`)")
        out |= matching
    return frozenset(out)


class PerFileIgnores:
    """``per_file_ignores``, compiled: ``codes(display)`` are the codes hidden in a
    file (matched once per file); :meth:`unmatched` names the globs that match none of
    the files asked about or seen."""

    def __init__(self, table: Mapping[str, Iterable[str]], root: Path | None) -> None:
        self.root = root
        self._globs = [
            (glob, Excludes([glob]), codes_of(codes, f"per_file_ignores[{glob!r}]"))
            for glob, codes in table.items()
        ]
        self._matched: set[str] = set()
        self._codes: dict[str, frozenset[str]] = {}

    def __bool__(self) -> bool:
        return bool(self._globs)

    def _names(self, display: str | Path) -> tuple[str, str]:
        """The path as shown and relative to the root, as globs match them."""
        shown = str(display).replace(os.sep, "/")
        if self.root is None:
            return shown, shown
        relative = os.path.relpath(os.path.abspath(display), self.root)
        return shown, relative.replace(os.sep, "/")

    def codes(self, display: str | Path) -> frozenset[str]:
        key = str(display)
        found = self._codes.get(key)
        if found is None:
            shown, relative = self._names(display)
            hidden: set[str] = set()
            for glob, matches, codes in self._globs:
                if matches(shown, relative):
                    self._matched.add(glob)
                    hidden |= codes
            found = self._codes[key] = frozenset(hidden)
        return found

    def hides(self, code: str, display: str | Path) -> bool:
        return bool(self._globs) and code in self.codes(display)

    def unmatched(self, source: str, seen: Iterable[str | Path] = ()) -> list[str]:
        """One line per glob that matched none of the files asked about nor of ``seen``
        (each tried against the globs not matched yet, until none is left)."""
        left = [(glob, matches) for glob, matches, _ in self._globs if glob not in self._matched]
        for display in seen:
            if not left:
                break
            if str(display) in self._codes:
                continue  # (asked about: what it matched is known)
            shown, relative = self._names(display)
            left = [(glob, matches) for glob, matches in left if not matches(shown, relative)]
        return [
            f"{source}: note: per_file_ignores[{glob!r}] matches no file of this run"
            for glob, _ in left
        ]
