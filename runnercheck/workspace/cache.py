"""The facts cache of ``check`` and ``migrate``: a file's facts, read once per content.

A repeated ``runnercheck check`` on a tree that did not change reads each file's facts
from ``.runnercheck_cache/`` under the project root instead of parsing it again. An
entry is keyed by everything the facts depend on: the file's bytes and displayed path,
the tool's version (with a stamp of the analysis code, so that an editable install that
changed does not serve stale facts), the Python version and the contract names of the
configuration. Anything else, a changed byte included, is a different key.

Concurrent runs are safe: an entry is written to a temporary file in the same directory
and renamed over its name, so a reader sees a whole entry or none. An entry that cannot
be read (truncated, corrupt, from another version, not ours) is a miss, never an error;
a cache directory that cannot be written only costs the speed. ``--no-cache`` bypasses
the cache entirely.

A repository can ship the cache directory, so it is opened as ``migrate`` opens the
tree it writes (:mod:`runnercheck.writes.beneath`): from a descriptor of the project
root, never through a symbolic link, and every entry without following a link or
blocking. A cache directory that is a link, or that holds anything but regular files
(a FIFO, a device, a link), is not used at all: :attr:`FactsCache.unused` says why in
one line, and the run goes on without it.

Entries are pickles read by an unpickler that builds only the fact classes of
:mod:`runnercheck.analysis` (and the builtin containers): a file planted in the cache
directory cannot make ``check`` run anything.
"""

from __future__ import annotations

import errno
import hashlib
import io
import os
import pickle
import stat
import sys
from pathlib import Path
from typing import Any

from runnercheck import __version__
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ModuleFacts
from runnercheck.contract import Contract
from runnercheck.files import kind_of
from runnercheck.writes.beneath import DIRECTORY, READ, read_all, replace_file

#: The cache directory, under the project root (add it to ``.gitignore``).
CACHE_DIR = ".runnercheck_cache"
#: Where the facts live inside it (one file per entry); a new format of the facts is a
#: new directory (v2: functions no longer carry the value facts only migrate reads).
FACTS_DIR = "facts-v2"
#: The first bytes of every entry.
MAGIC = b"runnercheck-facts\n"
_GITIGNORE = "# created by runnercheck check\n*\n"
#: The most bytes of one entry (the facts of the largest file ``check`` reads are far
#: smaller).
ENTRY_LIMIT = 64 * 1024 * 1024
_NEW_FILE = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
_ANALYSIS_PREFIX = "runnercheck.analysis."
_BUILTINS = frozenset({"set", "frozenset", "slice", "complex", "bytearray"})


class _FactsUnpickler(pickle.Unpickler):
    """Builds only the classes the facts are made of."""

    def find_class(self, module: str, name: str) -> Any:
        if module == "builtins" and name in _BUILTINS:
            return super().find_class(module, name)
        if module.startswith(_ANALYSIS_PREFIX) and "." not in name:
            found = super().find_class(module, name)
            if isinstance(found, type) and found.__module__ == module:
                return found
        raise pickle.UnpicklingError(f"not a fact class: {module}.{name}")


def code_stamp() -> str:
    """The tool's version and a stamp of the analysis code (names, sizes, modification
    times of its modules): a changed analysis never reads the facts of another."""
    import runnercheck.analysis as analysis

    parts = [__version__, sys.version]
    directory = os.path.dirname(analysis.__file__ or "")
    try:
        with os.scandir(directory) as entries:
            for entry in sorted(entries, key=lambda e: e.name):
                if entry.name.endswith(".py"):
                    info = entry.stat()
                    parts.append(f"{entry.name}:{info.st_size}:{info.st_mtime_ns}")
    except OSError:
        parts.append("unstamped")
    return "\n".join(parts)


class FactsCache:
    """Facts of file contents under ``root/.runnercheck_cache``.

    ``version`` replaces :func:`code_stamp` (tests use it to play a new release)."""

    def __init__(self, root: Path, contract: Contract, version: str | None = None) -> None:
        self.root = Path(root)
        self.directory = self.root / CACHE_DIR / FACTS_DIR
        salt = hashlib.sha256()
        salt.update((version if version is not None else code_stamp()).encode())
        salt.update(b"\0")
        salt.update(repr(contract).encode())
        self._salt = salt.digest()
        self.hits = 0
        self.misses = 0
        #: Why the cache is not used (one line), or ``""``.
        self.unused = ""
        #: The facts directory's descriptor, and the process that opened it.
        self._fd: tuple[int, int] | None = None
        self._open(create=False, scan=True)  # a cache that may not be used is told now

    def __getstate__(self) -> dict[str, Any]:
        state = self.__dict__.copy()
        state["_fd"] = None  # a descriptor is this process's own
        return state

    def __del__(self) -> None:
        opened = getattr(self, "_fd", None)
        if opened is not None and opened[1] == os.getpid():
            os.close(opened[0])

    def key(self, data: bytes, display: str, variant: str = "") -> str:
        """``variant`` names facts of another extraction of the same file (``migrate``
        reads more of each file than ``check``): never the same key as ``check``'s."""
        digest = hashlib.sha256(self._salt)
        if variant:
            digest.update(variant.encode())
            digest.update(b"\0")
        digest.update(display.encode("utf-8", "surrogateescape"))
        digest.update(b"\0")
        digest.update(data)
        return digest.hexdigest()

    def facts(self, data: bytes, display: str, contract: Contract) -> ModuleFacts:
        """The facts of ``data`` shown as ``display``: from the cache, or extracted and
        stored."""
        key = self.key(data, display)
        found = self._load(key)
        if found is not None and found.path == display:
            self.hits += 1
            return found
        self.misses += 1
        facts = extract_source(data, display, contract)
        self._store(key, facts)
        return facts

    def lookup(self, data: bytes, display: str, variant: str) -> ModuleFacts | None:
        """The stored facts of ``data`` shown as ``display`` (extracted as ``variant``
        names), or None."""
        found = self._load(self.key(data, display, variant))
        if found is not None and found.path == display:
            self.hits += 1
            return found
        self.misses += 1
        return None

    def store(self, data: bytes, display: str, variant: str, facts: ModuleFacts) -> None:
        """Keep ``facts`` of ``data`` shown as ``display`` (extracted as ``variant``
        names) for the next run."""
        self._store(self.key(data, display, variant), facts)

    def _refuse(self, where: Path, why: str) -> None:
        if not self.unused:
            self.unused = f"{where} {why}: the facts cache is not used"

    def _open(self, create: bool, scan: bool = False) -> int | None:
        """The facts directory's descriptor (made with ``create``), or None when there
        is none, or it may not be used (:attr:`unused` then says why)."""
        if self.unused:
            return None
        if self._fd is not None and self._fd[1] == os.getpid():
            return self._fd[0]
        try:
            if create:  # the root itself is the caller's (a project root, made if missing)
                os.makedirs(self.root, exist_ok=True)
            fd = os.open(self.root, os.O_RDONLY | os.O_DIRECTORY | getattr(os, "O_CLOEXEC", 0))
        except OSError:
            return None
        try:
            for name, where in ((CACHE_DIR, self.directory.parent), (FACTS_DIR, self.directory)):
                fd = self._enter(fd, name, where, create)
                if fd < 0:
                    return None
            if scan and not self._regular_only(fd):
                os.close(fd)
                return None
        except OSError:
            return None
        self._fd = (fd, os.getpid())
        return fd

    def _enter(self, parent: int, name: str, where: Path, create: bool) -> int:
        """Open the directory ``name`` of ``parent`` (closed here), made if ``create``;
        -1 when it is missing or may not be used."""
        try:
            try:
                info = os.lstat(name, dir_fd=parent)
            except FileNotFoundError:
                if not create:
                    return -1
                try:
                    os.mkdir(name, dir_fd=parent)
                except FileExistsError:  # another run made it meanwhile
                    pass
                info = os.lstat(name, dir_fd=parent)
            if stat.S_ISLNK(info.st_mode):
                self._refuse(where, "is a symbolic link")
                return -1
            if not stat.S_ISDIR(info.st_mode):
                self._refuse(where, f"is {kind_of(info.st_mode)}, not a directory")
                return -1
            fd = os.open(name, DIRECTORY, dir_fd=parent)
            if name == CACHE_DIR and create:
                _create(fd, ".gitignore", _GITIGNORE.encode())
            return fd
        except OSError:
            return -1
        finally:
            os.close(parent)

    def _regular_only(self, fd: int) -> bool:
        """False (and :attr:`unused` saying why) when the facts directory holds anything
        but regular files."""
        with os.scandir(fd) as entries:
            for entry in entries:
                if not entry.is_file(follow_symlinks=False):
                    what = "a symbolic link" if entry.is_symlink() else _kind(fd, entry.name)
                    self._refuse(self.directory / entry.name, f"is {what}")
                    return False
        return True

    def _load(self, key: str) -> ModuleFacts | None:
        fd = self._open(create=False)
        if fd is None:
            return None
        try:
            entry = os.open(key, READ, dir_fd=fd)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                self._refuse(self.directory / key, "is a symbolic link")
            return None
        try:
            info = os.fstat(entry)
            if not stat.S_ISREG(info.st_mode):
                self._refuse(self.directory / key, f"is {kind_of(info.st_mode)}")
                return None
            if info.st_size > ENTRY_LIMIT:
                return None
            blob = read_all(entry, ENTRY_LIMIT)
        except OSError:
            return None
        finally:
            os.close(entry)
        if not blob.startswith(MAGIC):
            return None
        try:
            facts = _FactsUnpickler(io.BytesIO(blob[len(MAGIC) :])).load()
        except Exception:  # truncated, corrupt or not ours: a miss
            return None
        return facts if isinstance(facts, ModuleFacts) else None

    def _store(self, key: str, facts: ModuleFacts) -> None:
        fd = self._open(create=True)
        if fd is None:
            return
        try:
            blob = MAGIC + pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # facts that cannot be pickled are simply not cached
            return
        try:
            replace_file(fd, key, blob, 0o644, sync=False)
        except OSError:  # a read-only tree, a full disk: only the speed is lost
            pass


def _kind(fd: int, name: str) -> str:
    try:
        return kind_of(os.lstat(name, dir_fd=fd).st_mode)
    except OSError:
        return "gone"


def _create(directory: int, name: str, blob: bytes) -> None:
    """Create ``name`` in ``directory`` with ``blob`` unless it exists; never through a
    link."""
    try:
        fd = os.open(name, _NEW_FILE, 0o666, dir_fd=directory)
    except FileExistsError:
        return
    try:
        _write(fd, blob)
    finally:
        os.close(fd)


def _write(fd: int, blob: bytes) -> None:
    view = memoryview(blob)
    offset = 0
    while offset < len(blob):
        offset += os.write(fd, view[offset:])
