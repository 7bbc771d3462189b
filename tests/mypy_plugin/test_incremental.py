"""Cache correctness: an edit to the input class in another module re-checks the runners.

``final.py`` subclasses the runner of ``mid.py`` and never imports ``inputs.py``, so
only the plugin's dependencies (``get_additional_indirect_deps`` for incremental
runs, wildcard triggers for ``dmypy``) make mypy re-check it after ``inputs.py``
changes. The last step edits a module that has nothing to do with the input and
checks that the plugin's errors survive it.
"""

from __future__ import annotations

import json
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.mypy_plugin.mypy_run import copy_fixture, dmypy, expected, mypy

FILES = ("base.py", "inputs.py", "mid.py", "final.py")
CLEAN = "Success: no issues found in 4 source files\n"


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text(encoding="utf-8")
    assert old in text, f"{old!r} not in {path}"
    path.write_text(text.replace(old, new, 1), encoding="utf-8")


def break_protocol(root: Path) -> None:
    """from_broadcasted_tensor_dict becomes an instance method."""
    edit(
        root / "inputs.py",
        "    @classmethod\n    def from_broadcasted_tensor_dict(cls,",
        "    def from_broadcasted_tensor_dict(self,",
    )
    edit(root / "inputs.py", "return cls(tensor_dict", "return type(self)(tensor_dict")


def restore_and_add_callback(root: Path) -> None:
    """Back to a classmethod; the dict gains a function (through a local variable)."""
    edit(
        root / "inputs.py",
        "    def from_broadcasted_tensor_dict(self,",
        "    @classmethod\n    def from_broadcasted_tensor_dict(cls,",
    )
    edit(root / "inputs.py", "return type(self)(tensor_dict", "return cls(tensor_dict")
    edit(
        root / "inputs.py",
        '        return {"tokens": self.tokens}',
        '        callback = print\n        return {"tokens": self.tokens, "callback": callback}',
    )


def touch_unrelated(root: Path) -> None:
    with (root / "mid.py").open("a", encoding="utf-8") as handle:
        handle.write("\nUNRELATED = 1\n")


def test_incremental_runs_recheck_the_runners(tmp_path: Path) -> None:
    root = copy_fixture("incremental", tmp_path)
    steps = [
        (None, CLEAN),
        (break_protocol, expected("incremental_protocol.txt")),
        (restore_and_add_callback, expected("incremental_values.txt")),
        (touch_unrelated, expected("incremental_values.txt")),
    ]
    for change, want in steps:
        if change is not None:
            change(root)
        proc = mypy(root, *FILES)
        assert (proc.stdout, proc.stderr) == (want, ""), change


@pytest.fixture
def daemon(tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A fixture copy and the status file of a dmypy daemon that is always stopped."""
    root = copy_fixture("incremental", tmp_path)
    status = tmp_path / "dmypy-status.json"
    try:
        yield root, status
    finally:
        if status.exists():
            try:
                dmypy(root, status, "stop", timeout=30)
            finally:
                if status.exists():  # the daemon did not stop: end it by its pid
                    pid = json.loads(status.read_text()).get("pid")
                    if isinstance(pid, int):
                        try:
                            os.kill(pid, signal.SIGKILL)
                        except ProcessLookupError:
                            pass


def test_dmypy_rechecks_the_runners(daemon: tuple[Path, Path]) -> None:
    root, status = daemon
    run = ("run", "--timeout", "120", "--", "--cache-dir", str(root / ".mypy_cache"), *FILES)
    steps = [
        (None, CLEAN),
        (break_protocol, expected("dmypy_protocol.txt")),
        (restore_and_add_callback, expected("incremental_values.txt")),
        (touch_unrelated, expected("incremental_values.txt")),
    ]
    for change, want in steps:
        if change is not None:
            change(root)
        proc = dmypy(root, status, *run, timeout=120)
        assert proc.stdout.replace("Daemon started\n", "") == want, (change, proc.stderr)
