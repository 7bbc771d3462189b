"""Plain mypy on the rewritten files, before and after, under the target's own mypy
configuration: the errors the rewrite adds, each with its line in the new file.

The configuration is read from the project directory above the files (``mypy.ini``,
``.mypy.ini``, ``setup.cfg [mypy]``, ``pyproject.toml [tool.mypy]``); when there is
none (a plain copy of a tree, or a project that never configured mypy), mypy's
defaults plus ``check_untyped_defs`` judge (:data:`DEFAULT_CONFIG`: engine code is
mostly unannotated, and without it mypy reads no body of an untyped function), from
the project directory or, without one, from the directory above the files' top
package. Its ``plugins`` are left out (``migrate`` never imports the
target's code). The old and the new texts of the changed files are written, at
their paths relative to the project, into two temporary trees checked in one
process each: modules outside the changed files are not there, so the target's
``follow_imports``/``ignore_missing_imports`` decide how they read (vLLM skips
them). An error is new when the old files lack one of the same file, code and
message (:func:`same_message`: the class a called method is defined in aside).

mypy's cache is kept per configuration in the user's cache directory, in files of
its own rather than SQLite (runs side by side never wait on a lock or a disk sync),
and so are the errors of each set of texts judged (:mod:`codemods.framework.typecheck_results`):
the old texts are judged once per tree, and a repeated run judges nothing again.
"""

from __future__ import annotations

import configparser
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

from codemods.framework.typecheck_results import ResultCache
from codemods.toolkit.formatting import project_dir
from runnercheck.errors import ConfigError
from runnercheck.tomlfile import load_toml

_ERROR = re.compile(
    r"^(?P<path>[^:\n]+):(?P<line>\d+): error: (?P<message>.*?)(?:  \[(?P<code>[\w-]+)\])?$"
)


@dataclass(frozen=True)
class MypyError:
    path: Path
    line: int
    code: str
    message: str


#: mypy's codes for an import it cannot follow (a module the environment lacks)
_IMPORT_CODES = frozenset({"import-not-found", "import-untyped", "import"})


def _ini_value(value: object) -> str:
    if isinstance(value, bool):
        return "True" if value else "False"
    if isinstance(value, (list, tuple)):
        return ", ".join(str(v) for v in value)
    return str(value)


#: what judges a tree that configures no mypy: the defaults, and the bodies of
#: unannotated functions read too
DEFAULT_CONFIG = "[mypy]\ncheck_untyped_defs = True\n"


def mypy_settings(start: Path) -> tuple[Path, str]:
    """The project directory and the mypy configuration the rewrite is judged by: the
    tree's own (:func:`mypy_config`), else :data:`DEFAULT_CONFIG` from the project
    directory or, in a plain copy without one, from above the top package."""
    found = mypy_config(start)
    if found is not None:
        return found
    directory = project_dir(start)
    if directory is None:
        directory = (start if start.is_dir() else start.parent).resolve()
        while (directory / "__init__.py").is_file() and directory.parent != directory:
            directory = directory.parent
    return directory, DEFAULT_CONFIG


def mypy_config(start: Path) -> tuple[Path, str] | None:
    """The project directory and its mypy configuration as ini text (no plugins); None
    when the tree configures no mypy."""
    directory = project_dir(start)
    if directory is None:
        return None
    parser = configparser.ConfigParser(interpolation=None)
    for name in ("mypy.ini", ".mypy.ini", "setup.cfg"):
        path = directory / name
        if not path.is_file():
            continue
        try:
            parser.read(path, encoding="utf-8")
        except (OSError, configparser.Error, UnicodeDecodeError):
            return None
        if parser.has_section("mypy"):
            out = configparser.ConfigParser(interpolation=None)
            for section in parser.sections():
                if section == "mypy" or section.startswith("mypy-"):
                    out[section] = {
                        k: v for k, v in parser[section].items() if k not in ("plugins", "files")
                    }
            return directory, _write(out)
        parser = configparser.ConfigParser(interpolation=None)
    pyproject = directory / "pyproject.toml"
    if not pyproject.is_file():
        return None
    try:
        tool = load_toml(pyproject).get("tool", {})
    except ConfigError:  # unreadable, not TOML, nested too deep: no mypy settings
        return None
    table = tool.get("mypy") if isinstance(tool, dict) else None
    if not isinstance(table, dict):
        return None
    out = configparser.ConfigParser(interpolation=None)
    out["mypy"] = {
        k: _ini_value(v)
        for k, v in table.items()
        if k not in ("plugins", "files", "exclude", "overrides")
    }
    for override in table.get("overrides", []) or []:
        if not isinstance(override, dict):
            continue
        modules = override.get("module", [])
        names = [modules] if isinstance(modules, str) else list(modules)
        values = {k: _ini_value(v) for k, v in override.items() if k not in ("module", "plugins")}
        for module in names:
            out[f"mypy-{module}"] = values
    return directory, _write(out)


def _write(parser: configparser.ConfigParser) -> str:
    import io

    text = io.StringIO()
    parser.write(text)
    return text.getvalue()


def _kept(name: str) -> Path | None:
    """A directory of the user's cache for these checks, per mypy version; None when
    it cannot be made."""
    import os

    from mypy.version import __version__

    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    path = Path(base) / "runnercheck" / "mypy" / __version__ / name
    try:
        path.mkdir(parents=True, exist_ok=True)
    except OSError:
        return None
    return path


def _cache_dir(config: str) -> Path | None:
    """mypy's cache for these checks, kept between runs per configuration (which
    decides what a cached module holds)."""
    import hashlib

    return _kept(hashlib.sha256(config.encode()).hexdigest()[:16])


def _errors(root: Path, config: str, files: list[Path]) -> list[MypyError]:
    from mypy import api

    (root / "mypy.ini").write_text(config, encoding="utf-8")
    # one cache for both trees and for every run: a run reads what an earlier one made
    # of the modules outside them (typeshed, torch) instead of analysing them again; in
    # files of their own (no SQLite database): runs side by side never wait on a lock,
    # and none waits for the disk to sync a commit
    cache = _cache_dir(config) or root.parent / ".mypy_cache"
    args = [
        "--config-file", str(root / "mypy.ini"), "--cache-dir", str(cache),
        "--show-error-codes", "--no-error-summary", "--hide-error-context",
        "--no-color-output", "--show-absolute-path", "--no-sqlite-cache",
        *[str(root / f) for f in files],
    ]  # fmt: skip
    stdout, _stderr, _status = api.run(args)
    found: list[MypyError] = []
    for line in stdout.splitlines():
        match = _ERROR.match(line)
        if match is None:
            continue
        path = Path(match["path"])
        try:
            relative = path.relative_to(root)
        except ValueError:
            continue
        found.append(MypyError(relative, int(match["line"]), match["code"] or "", match["message"]))
    return found


#: the class mypy names as a method's owner: ``to "execute_model" of "ModelRunner"``
_OWNER = re.compile(r'( to "\w+") of "[\w.]+"')


def same_message(message: str) -> str:
    """The message as compared before and after: the class a called method is defined
    in left out (the migration moves methods into generated bases, so the same call's
    old error names ``ModelRunner`` and its new one ``ModelRunnerBase``)."""
    return _OWNER.sub(r"\1 of a class", message)


def new_errors(changes: Mapping[Path, tuple[bytes | None, bytes]]) -> list[MypyError]:
    """The plain-mypy errors in the new texts that the old ones lack (paths as given)."""
    by_project: dict[Path, tuple[str, dict[Path, tuple[bytes | None, bytes]]]] = {}
    configs: dict[Path, tuple[Path, str]] = {}  # (read once per directory)
    for path, texts in changes.items():
        if path.parent not in configs:
            configs[path.parent] = mypy_settings(path)
        directory, config = configs[path.parent]
        by_project.setdefault(directory, (config, {}))[1][path] = texts
    out: list[MypyError] = []
    for directory, (config, files) in sorted(by_project.items()):
        relative = {p: p.resolve().relative_to(directory) for p in files}
        before = {relative[p]: old for p, (old, _new) in files.items() if old is not None}
        after = {relative[p]: new for p, (_old, new) in files.items()}
        packages = {r.parts[0] for r in relative.values() if len(r.parts) > 1}
        results = ResultCache(config, directory, packages, _kept("results"))
        old_errors = _judged(results, config, before)
        seen = {(e.path, e.code, same_message(e.message)) for e in old_errors}
        # a module the environment lacks is the environment's, not the rewrite's:
        # a created file importing what the old files imported is not a new error
        missing = {(e.code, e.message) for e in old_errors if e.code in _IMPORT_CODES}
        back = {v: k for k, v in relative.items()}
        for error in _judged(results, config, after):
            key = (error.path, error.code, same_message(error.message))
            if key in seen or error.path not in back:
                continue
            if (error.code, error.message) in missing:
                continue
            out.append(MypyError(back[error.path], error.line, error.code, error.message))
    return out


def _judged(results: ResultCache, config: str, texts: Mapping[Path, bytes]) -> list[MypyError]:
    """mypy's errors in these texts (paths relative to the project), from the results
    cache when the same texts were judged in the same setting, else by a run on a
    temporary tree holding them."""
    if not texts:
        return []
    cached = results.get(texts)
    if cached is not None:
        return cached
    with tempfile.TemporaryDirectory(prefix="runnercheck-mypy-") as tmp:
        root = Path(tmp) / "tree"
        for relative, data in texts.items():
            target = root / relative
            target.parent.mkdir(parents=True, exist_ok=True)
            # a last comment of this run's own: mypy's kept cache never takes a checked
            # text for one it has seen, so each run reports its errors (the lines
            # above it are the text's)
            target.write_bytes(data + f"\n# {tmp}\n".encode())
            for parent in relative.parents:  # packages stay packages
                init = root / parent / "__init__.py"
                if parent != Path(".") and not init.exists():
                    init.write_text("")
        found = _errors(root, config, sorted(texts))
    results.put(texts, found)
    return found
