"""The fixture files of ``tests/check/fixtures`` that are built at test time instead of
stored as near-copies of another:

* ``<name>.diff``: the file its ``+++`` header names, as an edit of the file its ``---``
  header names, both relative to the diff's directory (the true side of a semantics
  case from its false side, a rule's ``good/`` file from its ``../bad/`` one); every
  hunk must apply exactly, as :mod:`tests.migrate.variants` reads a diff;
* ``wrapper-control-broadcast/{bad,good}/spec.py``: RC110's catalog examples, with the
  inner worker named ``ExtrasWorker`` (the package beside it has a ``Worker`` of its
  own) under a docstring saying what the file shows;
* ``cli/partners/engine/{model_runner,worker}.py``: ``paired-broadcast/bad``'s, the
  worker importing its runner relatively (the package holds them);
* ``half-applied-migration``'s old file and the journal an interrupted ``migrate`` left:
  the old contents are ``tests/migrate/fixtures/engine/before``'s CPU files, the new
  ones those the fixture holds (``bad/`` the file already written, ``good/`` the rest).

Tests run ``check`` on a copy of the fixtures with those files written
(:func:`materialize`), from the copy's root, so that the paths printed are the ones
the ``.expected`` files pin.
"""

from __future__ import annotations

import re
import shutil
from collections.abc import Callable
from pathlib import Path

from runnercheck.rules.wrapper_control_broadcast import RULE as RC110
from tests.migrate.variants import apply_diff

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"
MIGRATE_BEFORE = REPO / "tests" / "migrate" / "fixtures" / "engine" / "before"

_SPEC_BAD = """\
A wrapper whose fold applies: every path runs the proposer's step first after the
control values, the non-driver runs it unconditionally (first in a loop that runs at
least once), and the proposer's step hands the extras of its merged dict back
(``received_extras``). `runnercheck migrate --select fold-control-broadcast` removes
the control broadcast, so RC110 is an error here (the lookahead wrapper beside it,
whose draft worker has no extras channel, is a note)."""
_SPEC_GOOD = """\
The wrapper as `runnercheck migrate --select fold-control-broadcast` leaves it: the
control values travel in the first proposer step's merged dict."""


def _wrapper(doc: str, example: str) -> Callable[[], str]:
    return lambda: f'"""{doc}"""\n\n' + re.sub(r"\bWorker\b", "ExtrasWorker", example)


def _copy(name: str, *edits: tuple[str, str]) -> Callable[[], str]:
    """The stored fixture file ``name``, each ``old`` (present once) made ``new``."""

    def make() -> str:
        text = (FIXTURES / name).read_text()
        for old, new in edits:
            if text.count(old) != 1:
                raise ValueError(f"{name}: {old!r} is not in it exactly once")
            text = text.replace(old, new)
        return text

    return make


def _migrate_before(name: str) -> Callable[[], str]:
    return lambda: (MIGRATE_BEFORE / name).read_text()


_JOURNAL = "half-applied-migration/bad/.runnercheck-migrate"

#: the files built from something other than a diff beside them (relative to FIXTURES)
_MADE: dict[str, Callable[[], str]] = {
    "wrapper-control-broadcast/bad/spec.py": _wrapper(_SPEC_BAD, RC110.bad),
    "wrapper-control-broadcast/good/spec.py": _wrapper(_SPEC_GOOD, RC110.good),
    "cli/partners/engine/model_runner.py": _copy("paired-broadcast/bad/model_runner.py"),
    "cli/partners/engine/worker.py": _copy(
        "paired-broadcast/bad/worker.py",
        ("from engine.model_runner import", "from .model_runner import"),
    ),
    "half-applied-migration/bad/cpu_worker.py": _migrate_before("cpu_worker.py"),
    f"{_JOURNAL}/old/0": _migrate_before("cpu_model_runner.py"),
    f"{_JOURNAL}/old/1": _migrate_before("cpu_worker.py"),
    f"{_JOURNAL}/new/0": _copy("half-applied-migration/bad/cpu_model_runner.py"),
    f"{_JOURNAL}/new/1": _copy("half-applied-migration/good/cpu_worker.py"),
    f"{_JOURNAL}/new/2": _copy("half-applied-migration/good/model_runner_base.py"),
}

_HEADER = re.compile(r"^--- a/(\S+)\n\+\+\+ b/(\S+)\n", re.MULTILINE)


def _from_diff(diff: Path) -> tuple[Path, str]:
    text = diff.read_text()
    header = _HEADER.match(text)
    if header is None:
        raise ValueError(f"{diff}: expected '--- a/<file>' and '+++ b/<file>' headers")
    old, new = header.groups()
    edited = apply_diff({old: (diff.parent / old).read_text()}, text, str(diff))
    return diff.parent / new, edited[new]


def built() -> dict[Path, str]:
    """Every built fixture file (its path under :data:`FIXTURES`) and its text."""
    files = {FIXTURES / name: make() for name, make in _MADE.items()}
    for diff in sorted(FIXTURES.rglob("*.diff")):
        path, text = _from_diff(diff)
        files[path] = text
    return files


def text(path: Path) -> str:
    """A fixture file's text, stored or built."""
    return path.read_text() if path.is_file() else built()[path]


def materialize(root: Path) -> Path:
    """``root`` (made) holding ``tests/check/fixtures`` as the repository has it, with
    every built file written: run ``check`` from ``root`` on the same relative paths."""
    target = root / FIXTURES.relative_to(REPO)
    shutil.copytree(FIXTURES, target, ignore=shutil.ignore_patterns("__pycache__", "*.diff"))
    for path, content in built().items():
        written = target / path.relative_to(FIXTURES)
        written.parent.mkdir(parents=True, exist_ok=True)
        written.write_text(content)
    return root


def sources(directory: Path) -> dict[str, str]:
    """The ``.py`` files of the fixture directory ``directory``, stored or built, by
    path relative to it."""
    found = {
        str(p.relative_to(directory)): p.read_text()
        for p in directory.rglob("*.py")
        if "__pycache__" not in p.parts
    }
    for path, content in _built_in(directory).items():
        if path.suffix == ".py":
            found[str(path)] = content
    return found


def tree(directory: Path, target: Path) -> Path:
    """A copy of the fixture directory ``directory`` at ``target`` (its hidden
    directories left out), its built files written."""
    ignore = shutil.ignore_patterns("__pycache__", "*.diff", ".*")
    shutil.copytree(directory, target, ignore=ignore)
    for path, content in _built_in(directory).items():
        (target / path).write_text(content)
    return target


def _built_in(directory: Path) -> dict[Path, str]:
    """The built files under ``directory`` (not in a hidden directory), relative to it."""
    return {
        path.relative_to(directory): content
        for path, content in built().items()
        if path.is_relative_to(directory)
        and not any(part.startswith(".") for part in path.relative_to(directory).parts)
    }
