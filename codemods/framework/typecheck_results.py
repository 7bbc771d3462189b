"""The results of plain-mypy runs, kept between runs.

``migrate`` judges the same old texts on every run over a tree, and the same new ones
when a run is repeated (``migrate --diff``, then ``migrate``). One mypy run costs about
a second even with mypy's own cache warm, and several on a tree mypy has not seen yet.

An entry is the list of errors mypy reported for a set of texts (paths relative to the
project) under one configuration. It is keyed by everything that can change them:
- the texts and the configuration;
- mypy's and Python's versions, and ``MYPYPATH``;
- the import path, each entry with its modification time (installing or removing a
  package changes its directory's), and the current directory's modules and packages
  by content (mypy looks there too);
- the Python files of the packages the texts belong to, by relative path and content
  (an engine installed in development mode is read through the import path); content,
  not modification times, so that a copy of a tree reads what was kept for the tree.

Entries live beside mypy's cache (:func:`codemods.framework.typecheck.cache_dir`). An entry that
cannot be read or written is a miss, never an error.
"""

from __future__ import annotations

import hashlib
import json
import os
import sys
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING

from runnercheck.files import ReadError, read_source

if TYPE_CHECKING:
    from codemods.framework.typecheck import MypyError

#: directories never read for the project's fingerprint: tools' caches, environments
#: (a directory holding ``pyvenv.cfg``), builds
_SKIPPED = frozenset({"__pycache__", "node_modules", "site-packages", "build", "dist"})


class ResultCache:
    """The kept results for one project directory and configuration: :meth:`get` the
    errors of a set of texts, :meth:`put` them after a run."""

    def __init__(
        self, config: str, directory: Path, packages: Iterable[str], root: Path | None
    ) -> None:
        self._root = root
        self._setting = b""
        if root is None:
            return
        from mypy.version import __version__

        digest = hashlib.sha256()
        for part in (__version__, sys.version, os.environ.get("MYPYPATH", ""), config):
            digest.update(part.encode() + b"\0")
        # the import path as mypy takes it: the process's, its first entry (the
        # script's or the current directory) left out, and the current directory's
        # modules and packages, by content (not by where it is: runs from other
        # directories over the same files read the same results)
        for entry in sys.path[1:]:
            digest.update(f"{entry}\0{_mtime(Path(entry or '.'))}\0".encode())
        read = {(directory, p) for p in packages}
        for line in _importable(Path.cwd(), read):
            digest.update(line.encode() + b"\0")
        for package in sorted(set(packages)):
            for line in _package_files(directory, package):
                digest.update(line.encode() + b"\0")
        self._setting = digest.digest()

    def _path(self, texts: Mapping[Path, bytes]) -> Path | None:
        if self._root is None:
            return None
        digest = hashlib.sha256(self._setting)
        for relative in sorted(texts):
            data = texts[relative]
            digest.update(f"{relative.as_posix()}\0{len(data)}\0".encode() + data)
        return self._root / f"{digest.hexdigest()}.json"

    def get(self, texts: Mapping[Path, bytes]) -> list[MypyError] | None:
        from codemods.framework.typecheck import MypyError

        path = self._path(texts)
        if path is None:
            return None
        try:
            rows = json.loads(path.read_text(encoding="utf-8"))
            return [MypyError(Path(p), int(line), str(c), str(m)) for p, line, c, m in rows]
        except (OSError, ValueError, TypeError):  # absent, unreadable, not ours
            return None

    def put(self, texts: Mapping[Path, bytes], errors: list[MypyError]) -> None:
        path = self._path(texts)
        if path is None:
            return
        rows = [[e.path.as_posix(), e.line, e.code, e.message] for e in errors]
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".tmp-", suffix=".json")
            with os.fdopen(fd, "w", encoding="utf-8") as out:
                json.dump(rows, out)
            os.replace(tmp, path)  # whole or absent, also with runs side by side
        except OSError:
            return


def _mtime(path: Path) -> int:
    try:
        return path.stat().st_mtime_ns
    except OSError:
        return 0


def _importable(directory: Path, read: set[tuple[Path, str]]) -> Iterator[str]:
    """The modules and packages ``directory`` holds at its top, by content (a package
    in ``read`` only by name: it is fingerprinted with the project)."""
    try:
        names = sorted(os.listdir(directory))
    except OSError:
        return
    for name in names:
        if name.endswith((".py", ".pyi")):
            yield f"{name}\0{_content(directory / name)}"
        elif any((directory / name / f"__init__{s}").is_file() for s in (".py", ".pyi")):
            yield f"{name}/"
            if (directory, name) not in read:
                yield from _package_files(directory, name)


def _package_files(directory: Path, package: str) -> Iterator[str]:
    """Each Python file of the package ``package`` of the project directory, in a fixed
    order, as its relative path and the digest of its content."""
    if not (directory / package).is_dir():
        return
    for parent, dirs, files in os.walk(directory / package):
        dirs[:] = sorted(
            d
            for d in dirs
            if not d.startswith(".")
            and d not in _SKIPPED
            and not os.path.exists(os.path.join(parent, d, "pyvenv.cfg"))
        )
        for name in sorted(files):
            if not name.endswith((".py", ".pyi")):
                continue
            full = os.path.join(parent, name)
            yield f"{os.path.relpath(full, directory)}\0{_content(Path(full))}"


def _content(path: Path) -> str:
    """The digest of a file's bytes, or what kept it from being read (mypy cannot read
    it either). Never blocks on a FIFO, never reads past the size limit."""
    try:
        return hashlib.sha1(read_source(path)).hexdigest()
    except ReadError as exc:
        return exc.kind
