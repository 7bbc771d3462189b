"""A class the ranks cannot load (its module fails to import there, or the class has no
importable name) cannot run: an ERROR row in a sweep, one line and exit 2 alone, never a
finding or a traceback."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = "tests/fuzz/fixtures/unloadable"
MADE = "tests.fuzz.fixtures.unloadable.made_in_a_function:MadeInput"
MAIN_ONLY = "tests.fuzz.fixtures.unloadable.main_process_only:MainOnlyInput"

pytestmark = pytest.mark.slow


def _fuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "fuzz", *args, "--seed", "3", "--examples", "5"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_a_class_the_ranks_cannot_import_by_name_is_one_error_line() -> None:
    done = _fuzz(MADE)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    (line,) = [line for line in done.stderr.splitlines() if line.startswith("runnercheck")]
    assert "cannot send the class to the ranks" in line
    assert "_make.<locals>.MadeInput" in line


def test_a_class_the_ranks_cannot_load_is_not_a_finding() -> None:
    done = _fuzz(MAIN_ONLY)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert "FAIL" not in done.stdout
    assert "RC302" not in done.stdout + done.stderr
    assert "ranks 0, 1 cannot load the class" in done.stderr
    assert "this module imports only in the main process" in done.stderr


def test_a_sweep_shows_it_as_a_class_that_cannot_run() -> None:
    """(The sweep finds the classes a module defines, so not the one made in a
    function.)"""
    done = _fuzz(FIXTURES)
    assert done.returncode == 2, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"ERROR {MAIN_ONLY}: cannot run: ranks 0, 1 cannot load the class" in "\n".join(lines)
    assert lines[-1] == "1 of 1 class could not run"
