"""What ``report_config_data`` returns: a fingerprint of everything the plugin's results
depend on, computed without parsing anything.

A plugin loaded by a run that finds all of its cache fresh does nothing but this, so
it reads the raw text of the files the settings can come from (the mypy config file,
the ``pyproject.toml`` beside it, the nearest one at or above the working directory)
and of the plugin's own sources, and hashes them. A change in any of them (even one
that leaves the settings as they were) re-checks every module; the settings
themselves are read and validated when the checks first need them, which any run
that checks a module does before mypy writes that module's cache.
"""

from __future__ import annotations

import hashlib
from pathlib import Path

import runnercheck

#: The modules of ``runnercheck`` whose meaning the plugin's results depend on.
_CORE_MODULES = ("catalog.py", "config.py", "contract.py", "errors.py")


def settings_sources(config_file: str | None, cwd: Path) -> list[Path]:
    """The files the settings may be read from (see :mod:`mypy_plugin.config`)."""
    candidates: list[Path] = []
    if config_file:
        path = Path(config_file)
        candidates += [path, path.parent / "pyproject.toml"]
    here = cwd.resolve()
    for directory in (here, *here.parents):
        found = directory / "pyproject.toml"
        if found.is_file():
            candidates.append(found)
            break
    return candidates


def source_digest() -> str:
    """A digest of the plugin's own source files and of the core modules it uses (name,
    size and modification time, as mypy judges its own sources), so that a changed
    plugin invalidates mypy's cache (mypy itself only fingerprints the plugin's
    top-level module)."""
    digest = hashlib.sha256()
    core = Path(runnercheck.__file__).parent
    paths = sorted(Path(__file__).parent.glob("*.py")) + [core / name for name in _CORE_MODULES]
    for path in paths:
        stat = path.stat()
        digest.update(f"{path.name}\0{stat.st_size}\0{stat.st_mtime_ns}\0".encode())
    return digest.hexdigest()[:16]


def config_fingerprint(version: str, sources: str, settings_files: list[Path]) -> str:
    """Short (mypy's cache metadata stays small), and different whenever the plugin's
    version or sources, or the path or text of a settings file, differ."""
    digest = hashlib.sha256(f"{version}\0{sources}".encode())
    for path in settings_files:
        digest.update(f"\0{path.resolve()}\0".encode())
        try:
            digest.update(path.read_bytes())
        except OSError:
            digest.update(b"\0missing")
    return f"runnercheck {version} {digest.hexdigest()[:16]}"
