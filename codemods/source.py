"""The files a migration reads: collected under the given paths, read as bytes.

Nothing here imports or executes the code it reads. Symbolic links are never
followed: a link inside the given paths is skipped (its target, when it is
inside them too, is visited on its own); a link pointing outside is reported.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from runnercheck.errors import UsageError

#: Directories never descended into.
SKIP_DIRS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", "venv", ".tox", "node_modules"}
)


@dataclass(frozen=True)
class SkippedPath:
    path: Path
    code: str
    message: str


@dataclass(frozen=True)
class Collected:
    roots: tuple[Path, ...]
    files: tuple[Path, ...]
    skipped: tuple[SkippedPath, ...]


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def collect(paths: Iterable[str | os.PathLike[str]]) -> Collected:
    """Every ``*.py`` file under ``paths`` (files or directories), sorted, no links.

    Raises :class:`UsageError` for a path that does not exist."""
    roots: list[Path] = []
    for raw in paths:
        path = Path(raw)
        if not path.exists():
            raise UsageError(f"{raw}: no such file or directory")
        roots.append(Path(os.path.realpath(path)))
    files: set[Path] = set()
    skipped: list[SkippedPath] = []
    for root in roots:
        if root.is_file():
            files.add(root)
            continue
        for directory, dirnames, filenames in os.walk(root, followlinks=False):
            here = Path(directory)
            keep = []
            for name in sorted(dirnames):
                child = here / name
                if child.is_symlink():
                    _note_link(child, roots, skipped)
                elif name not in SKIP_DIRS and not name.startswith("."):
                    keep.append(name)
            dirnames[:] = keep
            for name in filenames:
                if not name.endswith(".py"):
                    continue
                child = here / name
                if child.is_symlink():
                    _note_link(child, roots, skipped)
                else:
                    files.add(child)
    return Collected(tuple(roots), tuple(sorted(files)), tuple(skipped))


def _note_link(link: Path, roots: list[Path], skipped: list[SkippedPath]) -> None:
    target = Path(os.path.realpath(link))
    if not _inside(target, roots):
        skipped.append(
            SkippedPath(link, "MIG003", f"symbolic link to {target} (outside the given paths)")
        )


def read_all(files: Iterable[Path]) -> Iterator[tuple[Path, bytes | OSError]]:
    for path in files:
        try:
            yield path, path.read_bytes()
        except OSError as exc:
            yield path, exc


def within_roots(path: Path, roots: Iterable[Path]) -> bool:
    """True when ``path`` (not following a final link) lies inside one of ``roots``."""
    parent = Path(os.path.realpath(path.parent))
    return _inside(parent / path.name, roots) and not path.is_symlink()
