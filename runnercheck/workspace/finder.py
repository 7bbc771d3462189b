"""Partner files: modules the checked files import, read from disk for context.

A worker and its runner often live in two files, and a pre-commit hook may pass only
one of them. The facts of the modules a checked file imports (relative imports, and
absolute imports that resolve to a file in one of the file's parent directories) are read
too, transitively, when the prefilter says they can matter; so are the modules of
another package it imports (the engine a vendor plugin builds on), found in the
context directories or among the installed packages, never imported. Their classes, helpers and
abstract bases take part in the analysis; findings located in them are not reported.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Iterable
from typing import TYPE_CHECKING

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.prefilter import might_matter
from runnercheck.contract import Contract
from runnercheck.files import DEFAULT_MAX_FILE_SIZE, MAX_ANALYSED_SIZE, ReadError, read_source

if TYPE_CHECKING:
    from runnercheck.workspace.cache import FactsCache

#: How far up from a file an absolute import's top-level package is looked for.
MAX_LEVELS = 8


def context_roots(given: Iterable[str] = ()) -> tuple[str, ...]:
    """Where an absolute import that no parent directory of the importing file holds is
    looked for: the given context directories, then the installed packages (the
    directories of ``sys.path``; nothing is imported)."""
    out: list[str] = []
    for entry in (*map(_package_parent, given), *sys.path):
        path = os.path.abspath(entry) if entry else ""
        if path and os.path.isdir(path) and path not in out:
            out.append(path)
    return tuple(out)


def _package_parent(entry: str) -> str:
    """A context given as a package itself (``.../site-packages/vllm``) stands for the
    directory holding its top-level package, where imports of it are looked for."""
    path = os.path.abspath(entry) if entry else ""
    while path and os.path.isfile(os.path.join(path, "__init__.py")):
        path = os.path.dirname(path)
    return path


class ModuleFinder:
    """Maps ``(importing directory, dotted origin)`` to a file on disk, with caches.

    Paths are absolute and normalised strings (no symlink resolution: no system calls
    beyond the ``stat`` of each candidate). An absolute import that no parent directory
    holds is looked for in ``roots`` (see :func:`context_roots`), in order."""

    def __init__(self, roots: Iterable[str] = ()) -> None:
        self.roots = tuple(roots)
        self._anchor: dict[tuple[str, str], str | None] = {}
        self._found: dict[tuple[str, str], str | None] = {}

    def _anchor_for(self, directory: str, head: str) -> str | None:
        """The nearest ancestor of ``directory`` holding a module or package ``head``."""
        key = (directory, head)
        if key not in self._anchor:
            found = None
            current = directory
            for _ in range(MAX_LEVELS):
                if os.path.isdir(os.path.join(current, head)) or os.path.isfile(
                    os.path.join(current, head + ".py")
                ):
                    found = current
                    break
                parent = os.path.dirname(current)
                if parent == current:
                    break
                current = parent
            if found is None:
                found = next(
                    (
                        root
                        for root in self.roots
                        if os.path.isdir(os.path.join(root, head))
                        or os.path.isfile(os.path.join(root, head + ".py"))
                    ),
                    None,
                )
            self._anchor[key] = found
        return self._anchor[key]

    def find(self, directory: str, origin: str) -> str | None:
        """The file ``origin`` (``pkg.mod.Name`` or ``.mod.Name``) imported from a file in
        ``directory`` refers to, or None."""
        key = (directory, origin)
        if key in self._found:
            return self._found[key]
        level = len(origin) - len(origin.lstrip("."))
        parts = [p for p in origin.lstrip(".").split(".") if p]
        result: str | None = None
        base: str | None
        if level:
            base = directory
            for _ in range(level - 1):
                base = os.path.dirname(base)
        else:
            base = self._anchor_for(directory, parts[0]) if parts else None
        if base is not None:
            for size in (len(parts), len(parts) - 1):
                if size < 0 or (size == 0 and not level):
                    continue
                stem = os.path.join(base, *parts[:size])
                package = os.path.join(stem, "__init__.py")
                for candidate in (stem + ".py", package) if size else (package,):
                    if os.path.isfile(candidate):
                        result = candidate
                        break
                if result is not None:
                    break
        self._found[key] = result
        return result


def unread_packages(
    modules: Iterable[tuple[str, ModuleFacts]], finder: ModuleFinder
) -> frozenset[str]:
    """Top-level packages that a class of ``modules`` (absolute path, facts) takes a
    base from by an absolute import of a module that ``finder`` does not find: an
    engine a plugin builds on that is neither given nor installed."""
    out: set[str] = set()
    for path, facts in modules:
        directory = os.path.dirname(path)
        for cls in facts.classes.values():
            for base in cls.bases:
                origin = facts.imports.get(base.split(".", 1)[0], "")
                package = origin.split(".", 1)[0]
                if (
                    package
                    and package not in out
                    and package not in sys.builtin_module_names
                    and finder.find(directory, origin) is None
                ):
                    out.add(package)
    return frozenset(out)


def read_partners(
    modules: Iterable[tuple[str, ModuleFacts]],
    known: set[str],
    wanted: tuple[bytes, ...],
    contract: Contract,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    finder: ModuleFinder | None = None,
    cache: FactsCache | None = None,
) -> list[ModuleFacts]:
    """Facts of the files imported (transitively) by ``modules`` (absolute path, facts)
    that are not in ``known`` (absolute normalised paths, updated) and that the
    prefilter keeps (their facts from ``cache`` when one is given)."""
    finder = finder or ModuleFinder()
    queue = list(modules)
    partners: list[ModuleFacts] = []
    cwd = os.getcwd()
    while queue:
        path, facts = queue.pop()
        directory = os.path.dirname(path)
        for origin in set(facts.imports.values()):
            found = finder.find(directory, origin)
            if found is None or found in known:
                continue
            known.add(found)
            try:
                data = read_source(found, limit)
            except ReadError:  # context only: a FIFO, a huge or unreadable file adds nothing
                continue
            if len(data) > MAX_ANALYSED_SIZE or not might_matter(data, wanted):
                continue
            display = os.path.relpath(found, cwd)
            if display.startswith(".."):
                display = found
            try:
                if cache is not None:
                    partner = cache.facts(data, display, contract)
                else:
                    partner = extract_source(data, display, contract)
            except Exception:  # context only: a partner we cannot read adds nothing
                continue
            if partner.syntax_error is None:
                partners.append(partner)
                queue.append((found, partner))
    return partners
