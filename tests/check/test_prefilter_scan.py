"""The prefilter's ``class`` line scans (byte searches) find exactly what their
line-anchored patterns find, tried at every line."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from runnercheck.analysis import prefilter
from runnercheck.analysis.prefilter import class_bases, names_a_role

ROOT = Path(__file__).resolve().parents[2]

_BASES = re.compile(rb"^[ \t]*class +\w+[ \t]*\(([^)]*)\)", re.MULTILINE)
_ROLE = re.compile(rb"^[ \t]*class[ \t]+[^\s(:]*(?:Runner|Worker)", re.MULTILINE)
_NAMES = re.compile(rb"^[ \t]*class[ \t]+(\w+)", re.MULTILINE)


def expected_bases(data: bytes) -> frozenset[str]:
    """``class X(...)`` lines (``class`` and a space) found by a pattern at every line."""
    return frozenset(
        name.decode() for m in _BASES.finditer(data) for name in re.findall(rb"[A-Za-z_]\w*", m[1])
    )


def expected_role(data: bytes) -> bool:
    return b"unner" in data and _ROLE.search(data) is not None


def expected_names(data: bytes) -> set[str]:
    return {m.decode() for m in _NAMES.findall(data)}


SNIPPETS = [
    b"class A(B):\n    pass\n",
    b"  class A(B, metaclass=M): pass\n\tclass C (D.E[F]) : pass\n",
    b"class\tA(B):\n    pass\n",  # not ``class `` with a space: no bases (the scan's rule)
    b"\x0cclass A(B):\n",
    b"\r\nclass A(B):\n\rclass C(D):\n",
    b"x = 'class A(B)'\n# the class C(D) of\n",
    b"classy A(B):\nsubclass C(D):\n",
    b"  class class A(B):\n",
    b"class",
    b"class ",
    b"\nclass",
    b"class A(\n    B,\n    C,\n):\n",
    b"class ModelRunner(X):  # a runner\n",
    b"class\tGPURunner:\n",
    b"  class TheWorker(Base):\n",
    b"model_runner = 1\nclass Plain: pass\n",
    b"self.model_runner.x\n  # class NotAWorker(A)\nclass A: pass\n",
    b"class Runner",
    b"\t \tclass   X_Worker_y(A):\n",
]


def _files() -> list[Path]:
    found = sorted((ROOT / "runnercheck").rglob("*.py")) + sorted((ROOT / "codemods").rglob("*.py"))
    found += sorted((ROOT / "tests" / "check" / "fixtures").rglob("*.py"))
    return found


@pytest.mark.parametrize("data", SNIPPETS)
def test_snippets(data: bytes) -> None:
    assert class_bases(data) == expected_bases(data)
    assert names_a_role(data) == expected_role(data)
    assert prefilter._class_names(data) == expected_names(data)


def test_every_source_file_of_the_project() -> None:
    files = _files()
    assert len(files) > 200
    runners = bases = 0
    for path in files:
        data = path.read_bytes()
        assert class_bases(data) == expected_bases(data), path
        assert names_a_role(data) == expected_role(data), path
        assert prefilter._class_names(data) == expected_names(data), path
        runners += names_a_role(data)
        bases += bool(class_bases(data))
    assert runners > 5 and bases > 50  # the files hold what is compared
