"""Two runs at once: the second waits for the first to finish writing, then reads the
finished tree; it never judges files the first is in the middle of writing."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runnercheck.files import JOURNAL_NAME
from runnercheck.writes.treelock import LockBusy, TreeLock, reading
from tests.migrate.conftest import FIXTURES, copy_tree, snapshot
from tests.stress.harness import ROOT


def start(*args: str, fault: str = "") -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=ROOT,
        env={**os.environ, "RUNNERCHECK_FAULT": fault, "PYTHONDONTWRITEBYTECODE": "1"},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )


def wait_for_journal(root: Path, proc: subprocess.Popen[str]) -> None:
    deadline = time.monotonic() + 120
    while not (root / JOURNAL_NAME).exists():
        assert proc.poll() is None, proc.communicate()
        assert time.monotonic() < deadline
        time.sleep(0.005)


@pytest.mark.slow
@pytest.mark.parametrize("second", ["migrate", "migrate --check", "check"])
def test_a_second_run_waits_for_the_first_and_reads_the_finished_tree(
    tmp_path: Path, second: str
) -> None:
    root = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    # the first run pauses while writing, between its files, holding the lock
    first = start("migrate", str(root), fault="pause:verified:0.4")
    wait_for_journal(root, first)
    other = start(*second.split(), str(root))
    out, err = first.communicate(timeout=300)
    assert first.returncode == 0 and "7 changed (2 new)" in out, out + err
    migrated = snapshot(root)
    out, err = other.communicate(timeout=300)
    text = out + err
    assert "Traceback" not in text
    assert "MIG108" not in text and "RC003" not in text and "MIG007" not in text, text
    assert "migrate journal" not in text, text
    assert other.returncode == 0, text  # the finished tree: nothing to change, clean
    assert snapshot(root) == migrated


def test_a_reader_waits_for_a_writer_and_says_when_it_is_held(tmp_path: Path) -> None:
    tree = tmp_path / "tree"
    (tree / "sub").mkdir(parents=True)
    with TreeLock(tree):
        child = subprocess.run(  # another process: the lock is held, not ours to share
            [
                sys.executable,
                "-c",
                "from runnercheck.writes.treelock import reading\n"
                f"with reading([{str(tree)!r}], timeout=0.2): pass",
            ],
            cwd=ROOT,
            capture_output=True,
            text=True,
            timeout=60,
        )
        assert child.returncode != 0 and "another `runnercheck migrate` is writing" in child.stderr
    with reading([tree]), reading([tree / "sub"]):  # readers share
        with pytest.raises(LockBusy):
            TreeLock(tmp_path, timeout=0.2).acquire()  # a writer of a tree around them waits
    with TreeLock(tree), TreeLock(tree, timeout=0.2):  # the same process and tree: held
        pass
