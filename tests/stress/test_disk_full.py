"""A disk that fills up during ``migrate``'s writes: every file keeps its old contents.

Two real faults, no mock: the file size limit (``RLIMIT_FSIZE``: a write past it fails
with EFBIG after a short write, which any process may set for itself) and a real full
file system (a small tmpfs; skipped where mounting is not allowed). The limit or the
fill takes effect once the journal is complete, so that the in-place write of a file
is cut short; or before the run, so that the journal itself cannot be written."""

from __future__ import annotations

import os
import pickle
import resource
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from runnercheck.files import JOURNAL_NAME
from runnercheck.records import Change
from tests.migrate.conftest import FIXTURES, snapshot
from tests.stress.harness import ROOT, fill

OLD = b"x = 1\n" * 20
GROWN = b"y = 2\n" * 4000  # 24,000 bytes: more than the limit below


def tree_of(root: Path, created: bool) -> list[Change]:
    """``a.py`` rewritten (fits), then ``b.py`` rewritten or created (does not fit)."""
    root.mkdir(parents=True, exist_ok=True)
    (root / "a.py").write_bytes(OLD)
    changes = [Change(root / "a.py", OLD, b"x = 2\n" * 20, "G")]
    if created:
        changes.append(Change(root / "b.py", None, GROWN, "G"))
    else:
        (root / "b.py").write_bytes(OLD)
        changes.append(Change(root / "b.py", OLD, GROWN, "G"))
    return changes


def commit_in_child(root: Path, changes: list[Change], fault: str) -> str:
    spool = root.parent / "plan.pickle"
    spool.write_bytes(pickle.dumps((changes, [root])))
    env = {**os.environ, "RUNNERCHECK_STRESS_AFTER_JOURNAL": fault, "PYTHONDONTWRITEBYTECODE": "1"}
    done = subprocess.run(
        [sys.executable, "-m", "tests.stress.harness", str(spool)],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    spool.unlink()
    assert done.returncode == 0, done.stderr
    assert "Traceback" not in done.stderr
    return done.stdout


def assert_old_and_clean(root: Path, before: dict[str, bytes]) -> None:
    assert snapshot(root) == before  # every file old (a created file gone), nothing added
    assert not [name for name in os.listdir(root) if name.startswith(JOURNAL_NAME)]


@pytest.mark.parametrize("created", [False, True], ids=["rewritten", "created"])
def test_a_write_cut_short_by_the_file_size_limit_is_put_back(
    tmp_path: Path, created: bool
) -> None:
    root = tmp_path / "tree"
    changes = tree_of(root, created)
    before = snapshot(root)
    out = commit_in_child(root, changes, "fsize:8192")
    assert "MIG006 cannot write: File too large: G left as it was" in out, out
    assert_old_and_clean(root, before)


def migrate_cli(root: Path, limit: int | None = None) -> subprocess.CompletedProcess[str]:
    def limited() -> None:
        if limit is not None:
            resource.setrlimit(resource.RLIMIT_FSIZE, (limit, resource.RLIM_INFINITY))

    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "migrate", str(root)],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=300,
        preexec_fn=limited,
    )


def assert_journal_not_written(root: Path, done: subprocess.CompletedProcess[str]) -> None:
    text = done.stdout + done.stderr
    assert done.returncode == 2, text
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if "cannot write the migrate journal" in line]
    assert len(lines) == 1 and lines[0].endswith("nothing was changed"), text


def test_a_journal_that_does_not_fit_under_the_file_size_limit_changes_nothing(
    tmp_path: Path,
) -> None:
    root = tmp_path / "engine"
    shutil.copytree(FIXTURES / "engine" / "before", root)
    before = snapshot(root)
    done = migrate_cli(root, limit=1024)
    assert_journal_not_written(root, done)
    assert_old_and_clean(root, before)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 1 MiB tmpfs, unmounted afterwards."""
    mount = tmp_path / "disk"
    mount.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", str(mount)],
        capture_output=True,
        text=True,
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip() or done.returncode}")
    try:
        yield mount
    finally:
        subprocess.run(["umount", str(mount)], check=False)


@pytest.mark.parametrize("created", [False, True], ids=["rewritten", "created"])
def test_a_write_cut_short_by_a_full_disk_is_put_back(small_disk: Path, created: bool) -> None:
    root = small_disk / "tree"
    changes = tree_of(root, created)
    before = snapshot(root)
    out = commit_in_child(root, changes, f"fill:{small_disk / 'filler'}")
    assert "MIG006 cannot write: No space left on device: G left as it was" in out, out
    assert_old_and_clean(root, before)


def test_a_journal_that_does_not_fit_on_the_disk_changes_nothing(small_disk: Path) -> None:
    root = small_disk / "engine"
    shutil.copytree(FIXTURES / "engine" / "before", root)
    before = snapshot(root)
    fill(small_disk / "filler")
    done = migrate_cli(root)
    assert_journal_not_written(root, done)
    assert_old_and_clean(root, before)
