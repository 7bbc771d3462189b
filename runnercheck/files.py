"""Finding and reading source files: the one walker ``check`` and ``migrate`` share.

The walk never blocks and never reads without bound:

- only regular files are read: a FIFO, socket or device named ``*.py`` is skipped
  with a note (opening is non-blocking and the type is checked on the open
  descriptor, so a file swapped for a FIFO after the walk cannot hang a read);
- a file larger than ``max_file_size`` (``[tool.runnercheck]``, default 32 MiB,
  far above any real source file) is not read and is reported; one read that
  mentions the contract's names but is larger than :data:`MAX_ANALYSED_SIZE` is
  reported instead of parsed;
- a directory that cannot be listed is reported once, as is a symbolic link that
  loops or dangles; nothing is skipped silently;
- directories reached through a symbolic link are never descended into; a linked
  file is read (``check``) or skipped, and reported when it points outside the
  given paths (``migrate``, which never writes through a link).

A problem either *hides source* (an unreadable directory or file, a broken link to
a ``*.py`` file, a file too large, an argument that is not a regular file: ``check``
and ``migrate`` report RC001) or is a note (a FIFO, socket or device, or a
symbolic link loop, met while walking).
"""

from __future__ import annotations

import errno
import operator
import os
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from runnercheck.diagnostics import Diagnostic, Severity
from runnercheck.errors import UsageError
from runnercheck.excludes import Excludes

#: Directories never descended into.
SKIP_DIRS = frozenset(
    {
        ".git",
        ".hg",
        ".svn",
        "__pycache__",
        ".venv",
        "venv",
        ".tox",
        ".nox",
        ".mypy_cache",
        ".runnercheck_cache",
        "node_modules",
    }
)
#: ``max_file_size`` when the configuration does not set it (bytes).
DEFAULT_MAX_FILE_SIZE = 32 * 1024 * 1024
#: The largest file ``check`` and ``migrate`` parse (bytes). Parsing takes memory and
#: time in proportion to a file's size, about 200 times its size in memory with the
#: stdlib ``ast`` (a 30 MB file: 5 GB); the largest source file of vLLM is under
#: 250 kB. A larger file that mentions the contract's names is reported (it may hide
#: source) instead of parsed, so a run's memory stays within a few times the size of
#: the largest file it reads.
MAX_ANALYSED_SIZE = 2 * 1024 * 1024
#: Names of ``migrate``'s journal (see :mod:`runnercheck.writes.journal`): never walked into.
JOURNAL_NAME = ".runnercheck-migrate"

Links = Literal["read", "inside"]
ProblemKind = Literal[
    "special",
    "link-loop",
    "broken-link",
    "link-outside",
    "unreadable-dir",
    "unreadable",
    "too-large",
]


@dataclass(frozen=True)
class Source:
    #: The path as walked (the argument joined with the names below it).
    path: Path
    #: The path as reports show it (relative when the argument was relative).
    display: str
    #: The resolved path (no links).
    real: Path


@dataclass(frozen=True)
class Problem:
    path: Path
    display: str
    kind: ProblemKind
    message: str
    #: True when source may be hidden by it (a finding); False for a note.
    hides_source: bool

    def diagnostic(self, code: str) -> Diagnostic:
        """The problem as ``code`` at the top of the file: an error when it may hide
        source, a note otherwise."""
        severity: Severity = "error" if self.hides_source else "note"
        return Diagnostic(self.display, 1, 1, code, self.message, severity)


@dataclass
class Walk:
    #: The resolved arguments.
    roots: tuple[Path, ...]
    files: list[Source] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    #: Journal directories of an interrupted ``migrate`` met on the way.
    journals: list[Path] = field(default_factory=list)


class ReadError(OSError):
    """A source that was not read; ``str()`` is the reason, ``kind`` what went wrong."""

    def __init__(self, reason: str, kind: ProblemKind, what: str = "") -> None:
        super().__init__(reason)
        self.reason = reason
        self.kind = kind
        #: What a file that is not a regular one is (``a FIFO``), for ``special``.
        self.what = what

    def __str__(self) -> str:
        return self.reason


# ------------------------------------------------------------------ reading


def kind_of(mode: int) -> str:
    """What a non-regular file is, in words."""
    if stat.S_ISFIFO(mode):
        return "a FIFO"
    if stat.S_ISSOCK(mode):
        return "a socket"
    if stat.S_ISCHR(mode):
        return "a character device"
    if stat.S_ISBLK(mode):
        return "a block device"
    if stat.S_ISDIR(mode):
        return "a directory"
    return "not a regular file"


def too_large(size: int, limit: int) -> str:
    return f"{size} bytes, more than max_file_size ({limit}): not read"


def too_large_to_analyse(size: int) -> str:
    return (
        f"{size} bytes, more than runnercheck parses ({MAX_ANALYSED_SIZE}, a bound on "
        "memory and time): not analysed"
    )


def read_source(
    path: str | os.PathLike[str], limit: int = DEFAULT_MAX_FILE_SIZE, *, follow: bool = True
) -> bytes:
    """The bytes of a regular file of at most ``limit`` bytes; else :class:`ReadError`.

    Never blocks on a FIFO and never reads more than ``limit + 1`` bytes. ``follow``
    False: a symbolic link (the last name of ``path``) is not read."""
    flags = os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    if not follow:
        flags |= os.O_NOFOLLOW
    try:
        fd = os.open(path, flags)
    except OSError as exc:
        kind: ProblemKind = "link-loop" if exc.errno == errno.ELOOP else "unreadable"
        raise ReadError(_reason(exc), kind) from None
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            what = kind_of(info.st_mode)
            raise ReadError(f"{what}, not a regular file: not read", "special", what)
        if info.st_size > limit:
            raise ReadError(too_large(info.st_size, limit), "too-large")
        chunks: list[bytes] = []
        total = 0
        while True:
            chunk = os.read(fd, min(1 << 20, limit + 1 - total))
            if not chunk:
                break
            chunks.append(chunk)
            total += len(chunk)
            if total > limit:
                raise ReadError(too_large(total, limit), "too-large")
        return b"".join(chunks)
    except ReadError:
        raise
    except OSError as exc:
        raise ReadError(_reason(exc), "unreadable") from None
    finally:
        os.close(fd)


def _reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop: not read"
    text = exc.strerror or type(exc).__name__
    return f"cannot read: {text}"


# ------------------------------------------------------------------ walking


def excluded(display: str, relative: str, patterns: Sequence[str]) -> bool:
    """True when a path matches one of the ``exclude`` globs (see
    :mod:`runnercheck.excludes`; a walk compiles its globs once)."""
    return Excludes(patterns)(display, relative)


def check_arguments(paths: Iterable[str | os.PathLike[str]]) -> None:
    """:class:`UsageError` naming the first argument that does not exist at all."""
    for raw in paths:
        try:
            os.lstat(raw)
        except FileNotFoundError:
            raise UsageError(f"{os.fspath(raw)}: no such file or directory") from None
        except OSError:
            pass  # reported by the walk (e.g. a parent directory that cannot be searched)


def _join(directory: str, name: str) -> str:
    """``str(Path(directory) / name)`` for ``directory`` as ``str(Path(...))`` writes it
    and a name listed in it (never ``/``, ``.`` or ``..``), without making a ``Path``."""
    if directory == ".":
        return name
    return directory + name if directory.endswith("/") else f"{directory}/{name}"


_NAME = operator.attrgetter("name")


class _Walker:
    """The walk works on ``str`` paths (as ``str(Path(...))`` writes them) and makes a
    ``Path`` only for what it hands out: most entries of a tree are not read, and
    pathlib's joins cost more than the system calls of the walk."""

    def __init__(
        self,
        suffixes: tuple[str, ...],
        exclude: Sequence[str],
        root: Path,
        links: Links,
        skip_hidden: bool,
    ) -> None:
        self.suffixes = suffixes
        self.exclude = Excludes(exclude)
        self.root = root
        self.links = links
        self.skip_hidden = skip_hidden
        self.walk = Walk(())
        #: Resolved paths of the files taken, as ``os.path.realpath`` writes them.
        self.seen: set[str] = set()

    def relative(self, path: str | Path, display: str) -> str:
        try:
            return Path(os.path.abspath(path)).relative_to(self.root).as_posix()
        except ValueError:
            return display

    def is_excluded(self, path: str | Path, display: str) -> bool:
        return bool(self.exclude) and self.exclude(display, self.relative(path, display))

    def problem(
        self, path: str | Path, display: str, kind: ProblemKind, message: str, hides: bool
    ) -> None:
        if not self.is_excluded(path, display):
            self.walk.problems.append(Problem(Path(path), display, kind, message, hides))

    def add(self, path: str | Path, display: str, real: str) -> None:
        if real in self.seen or self.is_excluded(path, display):
            return
        self.seen.add(real)
        self.walk.files.append(Source(Path(path), display, Path(real)))

    # -- one argument

    def argument(self, raw: str | os.PathLike[str]) -> Path | None:
        path = Path(raw)
        display = os.fspath(raw)
        try:
            info = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ENOENT and not os.path.lexists(path):
                raise UsageError(f"{display}: no such file or directory") from None
            kind: ProblemKind = "link-loop" if exc.errno == errno.ELOOP else "unreadable"
            if exc.errno == errno.ENOENT:
                kind = "broken-link"
            self.problem(path, display, kind, _stat_reason(exc), True)
            return None
        real = os.path.realpath(path)
        if stat.S_ISDIR(info.st_mode):
            self.directory(str(path), display, real)
        elif stat.S_ISREG(info.st_mode):
            self.add(path, display, real)
        else:
            message = f"{kind_of(info.st_mode)}, not a regular file: not read"
            self.problem(path, display, "special", message, True)
        return Path(real)

    # -- a directory tree, iteratively (pre-order, sorted, like os.walk)

    def directory(self, top: str, top_display: str, top_real: str) -> None:
        """``top`` and every directory below it that is not a link; each directory's
        resolved path is its parent's joined with its name (a directory that is not a
        link adds nothing to resolve), so ``realpath`` runs once per tree, not once per
        directory. Below ``top`` a path is shown as walked."""
        stack: list[tuple[str, str, str]] = [(top, top_display, top_real)]
        while stack:
            here, display, real = stack.pop()
            try:
                with os.scandir(here) as listing:
                    entries = sorted(listing, key=_NAME)
            except OSError as exc:
                reason = exc.strerror or type(exc).__name__
                self.problem(
                    here,
                    display,
                    "unreadable-dir",
                    f"cannot read directory: {reason}; files in it were not read",
                    True,
                )
                continue
            below: list[tuple[str, str, str]] = []
            for entry in entries:
                name = entry.name
                child = _join(here, name)
                if name == JOURNAL_NAME or name.startswith(JOURNAL_NAME + "."):
                    if name == JOURNAL_NAME:
                        self.walk.journals.append(Path(child))
                    continue
                try:
                    is_link = entry.is_symlink()
                    is_dir = not is_link and entry.is_dir(follow_symlinks=False)
                except OSError:
                    continue
                if is_link:
                    self.link(entry, child)
                elif is_dir:
                    if self.keep_dir(name):
                        below.append((child, child, _join(real, name)))
                elif name.endswith(self.suffixes):
                    self.entry_file(entry, child, _join(real, name))
            stack.extend(reversed(below))

    def keep_dir(self, name: str) -> bool:
        if name in SKIP_DIRS or name.endswith(".egg-info"):
            return False
        return not (self.skip_hidden and name.startswith("."))

    def entry_file(self, entry: os.DirEntry[str], path: str, real: str) -> None:
        """A listed file that is not a link (``real``: its resolved path). The listing's
        file type says whether it is a regular file, with no system call where the file
        system gives types; the mode is read only to say what else it is."""
        try:
            regular = entry.is_file(follow_symlinks=False)
        except OSError:
            regular = False
        if not regular:
            try:
                mode = entry.stat(follow_symlinks=False).st_mode
            except OSError as exc:
                self.problem(path, path, "unreadable", _stat_reason(exc), True)
                return
            if not stat.S_ISREG(mode):
                message = f"{kind_of(mode)}, not a regular file: skipped"
                self.problem(path, path, "special", message, False)
                return
        self.add(path, path, real)

    def link(self, entry: os.DirEntry[str], path: str) -> None:
        if entry.name in SKIP_DIRS:
            return  # never a source, whatever it points to
        display = path
        wanted = entry.name.endswith(self.suffixes)
        try:
            info = os.stat(path)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self.problem(path, display, "link-loop", "symbolic link loop: skipped", False)
            elif wanted:  # a source file that should be there
                self.problem(path, display, "broken-link", _stat_reason(exc), True)
            return
        is_dir = stat.S_ISDIR(info.st_mode)
        if not wanted and not is_dir:
            return
        resolved = os.path.realpath(path)
        real = Path(resolved)
        if self.links == "inside":
            if not _inside(real, self.walk.roots):
                self.problem(
                    path,
                    display,
                    "link-outside",
                    f"symbolic link to {real} (outside the given paths): skipped",
                    False,
                )
            return  # its target, when inside the given paths, is visited on its own
        if is_dir:
            return  # never descended into (a link may loop back)
        if stat.S_ISREG(info.st_mode):
            self.add(path, display, resolved)
        else:
            message = f"symbolic link to {real}, {kind_of(info.st_mode)}: skipped"
            self.problem(path, display, "special", message, False)


def _stat_reason(exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "symbolic link loop: not read"
    if exc.errno == errno.ENOENT:
        return "broken symbolic link: not read"
    return f"cannot read: {exc.strerror or type(exc).__name__}"


def _inside(path: Path, roots: Iterable[Path]) -> bool:
    return any(path == root or root in path.parents for root in roots)


def within_roots(path: Path, roots: Iterable[Path]) -> bool:
    """True when ``path`` (not following a final link) lies inside one of ``roots``."""
    parent = Path(os.path.realpath(path.parent))
    return _inside(parent / path.name, roots) and not path.is_symlink()


def walk(
    paths: Iterable[str | os.PathLike[str]],
    *,
    suffixes: tuple[str, ...] = (".py",),
    exclude: Sequence[str] = (),
    root: Path | None = None,
    links: Links = "read",
    skip_hidden: bool = False,
) -> Walk:
    """Source files under ``paths`` (files or directories), in a stable order.

    ``exclude``: globs matched against the displayed path and the path relative to
    ``root`` (default: the current directory). ``links``: ``"read"`` reads linked
    files, ``"inside"`` skips every link and reports those pointing outside ``paths``.
    Raises :class:`UsageError` for an argument that does not exist."""
    arguments = list(paths)
    check_arguments(arguments)
    walker = _Walker(suffixes, exclude, (root or Path.cwd()).resolve(), links, skip_hidden)
    walker.walk.roots = tuple(Path(os.path.realpath(p)) for p in arguments)
    for raw in arguments:
        walker.argument(raw)
    return walker.walk
