"""The facts cache of ``check``: a file's facts, read once per content.

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

Entries are pickles read by an unpickler that builds only the fact classes of
:mod:`runnercheck.analysis` (and the builtin containers): a file planted in the cache
directory cannot make ``check`` run anything.
"""

from __future__ import annotations

import hashlib
import io
import os
import pickle
import sys
import tempfile
from pathlib import Path
from typing import Any

from runnercheck import __version__
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ModuleFacts
from runnercheck.contract import Contract

#: The cache directory, under the project root (add it to ``.gitignore``).
CACHE_DIR = ".runnercheck_cache"
#: Where the facts live inside it (one file per entry); a new format of the facts is a
#: new directory (v2: functions no longer carry the value facts only migrate reads).
FACTS_DIR = "facts-v2"
#: The first bytes of every entry.
MAGIC = b"runnercheck-facts\n"
_GITIGNORE = "# created by runnercheck check\n*\n"
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
        self.directory = Path(root) / CACHE_DIR / FACTS_DIR
        salt = hashlib.sha256()
        salt.update((version if version is not None else code_stamp()).encode())
        salt.update(b"\0")
        salt.update(repr(contract).encode())
        self._salt = salt.digest()
        self._ready = False
        self.hits = 0
        self.misses = 0

    def key(self, data: bytes, display: str) -> str:
        digest = hashlib.sha256(self._salt)
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

    def _load(self, key: str) -> ModuleFacts | None:
        try:
            with open(self.directory / key, "rb") as handle:
                blob = handle.read()
        except OSError:
            return None
        if not blob.startswith(MAGIC):
            return None
        try:
            facts = _FactsUnpickler(io.BytesIO(blob[len(MAGIC) :])).load()
        except Exception:  # truncated, corrupt or not ours: a miss
            return None
        return facts if isinstance(facts, ModuleFacts) else None

    def _prepare(self) -> bool:
        if not self._ready:
            try:
                self.directory.mkdir(parents=True, exist_ok=True)
                ignore = self.directory.parent / ".gitignore"
                if not ignore.exists():
                    _write_atomic(ignore, _GITIGNORE.encode())
            except OSError:
                return False
            self._ready = True
        return True

    def _store(self, key: str, facts: ModuleFacts) -> None:
        if not self._prepare():
            return
        try:
            blob = MAGIC + pickle.dumps(facts, protocol=pickle.HIGHEST_PROTOCOL)
        except Exception:  # facts that cannot be pickled are simply not cached
            return
        try:
            _write_atomic(self.directory / key, blob)
        except OSError:  # a read-only tree, a full disk: only the speed is lost
            pass


def _write_atomic(target: Path, blob: bytes) -> None:
    handle, temporary = tempfile.mkstemp(dir=target.parent, prefix=".tmp-")
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(blob)
        os.replace(temporary, target)
    except BaseException:
        try:
            os.unlink(temporary)
        except OSError:
            pass
        raise
