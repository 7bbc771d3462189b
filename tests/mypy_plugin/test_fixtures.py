"""The plugin on fixture projects: one mypy run each, compared with an expected file.

``cases`` holds one module per situation (same-module and cross-module classes,
forward references, a TYPE_CHECKING import cycle, indirect subclasses, a runner
generic over a protocol-bound type variable, every failure, every way to silence
one); ``pyproject`` names the contract its own way in ``[tool.runnercheck]``.
"""

from __future__ import annotations

from pathlib import Path

from tests.mypy_plugin.mypy_run import copy_fixture, expected, mypy, normalise


def test_cases_match_expected_output(tmp_path: Path) -> None:
    root = copy_fixture("cases", tmp_path)
    proc = mypy(root, "engine", "cases")
    assert proc.stderr == ""
    assert normalise(proc.stdout, root) == expected("cases.txt")
    assert proc.returncode == 1


def test_pyproject_settings_match_expected_output(tmp_path: Path) -> None:
    root = copy_fixture("pyproject", tmp_path)
    proc = mypy(root, "wire")
    assert proc.stderr == ""
    assert normalise(proc.stdout, root) == expected("pyproject.txt")
    assert proc.returncode == 1
