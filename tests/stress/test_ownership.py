"""``migrate`` rewrites files in place: owner, group, mode and hard links are kept; a
read-only file is refused (its whole group left alone) unless ``--force``."""

from __future__ import annotations

import os
import shutil
import stat
from pathlib import Path

import pytest

from runnercheck.cli import main
from tests.migrate.conftest import FIXTURES, snapshot

BEFORE = FIXTURES / "engine" / "before"
AFTER = FIXTURES / "engine" / "after"


@pytest.fixture
def work(tmp_path: Path) -> Path:
    return Path(shutil.copytree(BEFORE, tmp_path / "engine"))


def identity(path: Path) -> tuple[int, int, int, int, int]:
    info = path.stat()
    return info.st_ino, info.st_uid, info.st_gid, stat.S_IMODE(info.st_mode), info.st_nlink


@pytest.mark.skipif(os.geteuid() != 0, reason="giving files to another user needs root")
def test_owner_group_and_mode_are_kept(work: Path, capsys: pytest.CaptureFixture[str]) -> None:
    runner = work / "model_runner.py"
    os.chown(runner, 1234, 4321)
    runner.chmod(0o640)
    before = identity(runner)
    assert main(["migrate", str(work)]) == 0
    capsys.readouterr()
    assert identity(runner) == before
    assert runner.read_bytes() == (AFTER / "model_runner.py").read_bytes()


def test_hard_links_are_kept(
    work: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    worker = work / "worker.py"
    outside = tmp_path / "worker-link.py"
    os.link(worker, outside)
    before = identity(worker)
    assert main(["migrate", str(work)]) == 0
    capsys.readouterr()
    assert identity(worker) == before and before[4] == 2
    assert outside.read_bytes() == worker.read_bytes() == (AFTER / "worker.py").read_bytes()


def test_a_read_only_file_refuses_its_group_unless_forced(
    work: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    runner = work / "model_runner.py"
    runner.chmod(0o444)
    before = snapshot(work)
    assert main(["migrate", str(work)]) == 1
    out = capsys.readouterr().out
    refusals = [line for line in out.splitlines() if " MIG" in line]
    assert len(refusals) == 1 and refusals[0].startswith(f"{runner}: MIG004 [write] read-only")
    assert "--force" in refusals[0]
    assert snapshot(work) == before  # the whole group (one unit here) left alone
    assert main(["migrate", "--force", str(work)]) == 0
    capsys.readouterr()
    assert stat.S_IMODE(runner.stat().st_mode) == 0o444
    assert snapshot(work) == snapshot(AFTER)
