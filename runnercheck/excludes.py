"""``exclude``: a run's globs compiled once into one matcher.

A path is excluded when one of the globs (its trailing ``/`` removed) matches, as
:func:`fnmatch.fnmatch` matches (``*`` crosses ``/``; case as the OS compares it):

- the path as shown, or relative to the project root;
- a directory above it: either path up to one of its ``/`` (``tests`` excludes
  ``tests/a.py``);
- for a glob without ``/``, one of the parts of the path as shown (``__pycache__``).

Matching each glob in turn costs a path one regular expression per glob (20,000 globs
took about 50 s on 10 files, 200,000 did not end). Here a glob without wildcards is looked up in a set, and every
other glob is filed under its longest literal run, at its start, at its end or inside
it: a path is matched only against the globs whose run it holds, each such group one
regular expression, compiled the first time a path needs it.
"""

from __future__ import annotations

import fnmatch
import os
import re
from collections import defaultdict
from collections.abc import Callable, Collection, Iterable
from pathlib import Path

#: The most ``exclude`` globs a configuration may hold: 200,000 are filed in under a
#: second and matched in microseconds a path; a list far longer than any written or
#: generated for a real tree is a generated file gone wrong.
MAX_EXCLUDE_PATTERNS = 1_000_000

#: ``/`` as :func:`os.path.normcase` writes it (what ``fnmatch`` compares), and whether
#: it changes names at all (Windows: case and separators).
_SEP = os.path.normcase("/")
_FOLDS = os.path.normcase("A/") != "A/"
#: A wildcard as :func:`fnmatch.translate` reads one: ``*``, ``?``, or a ``[`` set
#: (``!`` and a ``]`` first are part of it; a ``[`` with no ``]`` after it is plain
#: text). The lookahead takes ``!`` and ``]`` once, as translate does, never fewer.
_WILDCARD = re.compile(r"[*?]|\[(?=(!?\]?))\1[^\]]*\]")


def literal_runs(pattern: str) -> list[str] | None:
    """The text between the wildcards of a glob, first to last; None for a glob without
    wildcards (``fnmatch`` matches it as plain text)."""
    if "*" not in pattern and "?" not in pattern and "[" not in pattern:
        return None
    if "\0" not in pattern:
        runs = _WILDCARD.sub("\0", pattern).split("\0")
    else:
        runs, start = [], 0
        for wildcard in _WILDCARD.finditer(pattern):
            runs.append(pattern[start : wildcard.start()])
            start = wildcard.end()
        runs.append(pattern[start:])
    return runs if len(runs) > 1 else None


class _Globs:
    """Globs with wildcards, filed by their longest literal run; the globs filed under
    one run are matched by one expression, made the first time a name needs it."""

    def __init__(self) -> None:
        self.starts: defaultdict[str, list[str]] = defaultdict(list)
        self.ends: defaultdict[str, list[str]] = defaultdict(list)
        self.inside: defaultdict[str, list[str]] = defaultdict(list)
        self.anywhere: list[str] = []
        self.start_lengths: tuple[int, ...] = ()
        self.end_lengths: tuple[int, ...] = ()
        self.inside_lengths: tuple[int, ...] = ()
        self._compiled: dict[tuple[str, str], Callable[[str], object]] = {}

    def add(self, glob: str, runs: list[str]) -> None:
        first, last = runs[0], runs[-1]
        inner = max(runs[1:-1], key=len) if len(runs) > 2 else ""
        if len(first) >= len(last) and len(first) >= len(inner):
            if first:
                self.starts[first].append(glob)
            else:
                self.anywhere.append(glob)
        elif len(last) >= len(inner):
            self.ends[last].append(glob)
        else:
            self.inside[inner].append(glob)

    def freeze(self) -> None:
        self.start_lengths = tuple(sorted({len(run) for run in self.starts}))
        self.end_lengths = tuple(sorted({len(run) for run in self.ends}))
        self.inside_lengths = tuple(sorted({len(run) for run in self.inside}))

    def __bool__(self) -> bool:
        return bool(self.starts or self.ends or self.inside or self.anywhere)

    def match(self, name: str) -> bool:
        size = len(name)
        for length in self.start_lengths:
            if length > size:
                break
            run = name[:length]
            if run in self.starts and self._matches("start", run, self.starts[run], name):
                return True
        for length in self.end_lengths:
            if length > size:
                break
            run = name[size - length :]
            if run in self.ends and self._matches("end", run, self.ends[run], name):
                return True
        for run in self._runs_inside(name) if self.inside else ():
            if self._matches("inside", run, self.inside[run], name):
                return True
        return bool(self.anywhere) and self._matches("", "", self.anywhere, name)

    def _matches(self, kind: str, run: str, globs: list[str], name: str) -> bool:
        match = self._compiled.get((kind, run))
        if match is None:
            match = re.compile("|".join(map(fnmatch.translate, globs))).match
            self._compiled[kind, run] = match
        return match(name) is not None

    def _runs_inside(self, name: str) -> Collection[str]:
        """The inner runs that ``name`` holds: each run looked for in it, or each slice
        of it of a run's length looked up, whichever is fewer steps."""
        slices = len(name) * len(self.inside_lengths)
        if len(self.inside) <= slices:
            return [run for run in self.inside if run in name]
        held = {
            name[at : at + length]
            for length in self.inside_lengths
            for at in range(len(name) - length + 1)
        }
        return held & self.inside.keys()


class Excludes:
    """``exclude`` globs, compiled: ``excludes(display, relative)`` says whether a path
    (as shown, and relative to the project root) is excluded."""

    def __init__(self, patterns: Iterable[str]) -> None:
        #: Globs without wildcards, with a ``/`` and without: the path, a directory
        #: above it, and (without ``/``) a part of it.
        self.paths: set[str] = set()
        self.names: set[str] = set()
        #: Globs with wildcards, the same two ways.
        self.path_globs = _Globs()
        self.name_globs = _Globs()
        self._any = False
        for raw in patterns:
            stripped = raw.rstrip("/")
            pattern = os.path.normcase(stripped) if _FOLDS else stripped
            runs = literal_runs(pattern)
            if "/" in stripped:
                if runs is None:
                    self.paths.add(pattern)
                else:
                    self.path_globs.add(pattern, runs)
            elif runs is None:
                self.names.add(pattern)
            else:
                self.name_globs.add(pattern, runs)
            self._any = True
        self.path_globs.freeze()
        self.name_globs.freeze()

    def __bool__(self) -> bool:
        return self._any

    def __call__(self, display: str, relative: str) -> bool:
        if _FOLDS:
            display, relative = os.path.normcase(display), os.path.normcase(relative)
        for name in {display, relative}:
            if self._above(name):
                return True
        if self.names or self.name_globs:
            for part in Path(display).parts:
                part = os.path.normcase(part) if _FOLDS else part
                if part in self.names or (self.name_globs and self.name_globs.match(part)):
                    return True
        return False

    def _above(self, name: str) -> bool:
        """True when ``name``, or ``name`` up to one of its ``/`` (a directory above),
        is a glob without wildcards or matches one with them."""
        if self._is(name):
            return True
        at = name.find(_SEP)
        while at != -1:
            if self._is(name[:at]):
                return True
            at = name.find(_SEP, at + 1)
        return False

    def _is(self, name: str) -> bool:
        return (
            name in self.paths
            or name in self.names
            or bool(self.path_globs and self.path_globs.match(name))
            or bool(self.name_globs and self.name_globs.match(name))
        )
