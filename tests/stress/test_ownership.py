"""``migrate`` rewrites files in place: owner, group and mode are kept; a read-only file
is refused (its whole group left alone) unless ``--force``. (A file with other hard
links is refused too: see ``test_escapes``.)"""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.cli import main
from tests.migrate.conftest import FIXTURES, snapshot
from tests.stress.harness import ROOT

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


# ---------------------------------------------- permissions, checked by the kernel
# Root may write anything: the runs below drop the capabilities that let it (as a user
# who is not the owner would run), so the kernel itself refuses the writes.


def powerless(*args: str) -> subprocess.CompletedProcess[str]:
    if os.geteuid() != 0:
        pytest.skip("giving files to another user needs root")
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    drop = "--bounding-set=-dac_override,-dac_read_search,-fowner"
    return subprocess.run(
        [setpriv, drop, "--", sys.executable, "-m", "runnercheck", *args],
        cwd=ROOT,
        env={**os.environ, "PYTHONDONTWRITEBYTECODE": "1"},
        capture_output=True,
        text=True,
        timeout=120,
    )


def one_refusal(done: subprocess.CompletedProcess[str], code: str) -> str:
    text = done.stdout + done.stderr
    assert "Traceback" not in text
    lines = [line for line in text.splitlines() if " MIG0" in line or "error:" in line]
    assert len(lines) == 1 and code in lines[0], text
    return lines[0]


@pytest.mark.parametrize("force", [False, True])
def test_a_file_of_another_user_is_refused_with_its_owner(work: Path, force: bool) -> None:
    runner = work / "model_runner.py"
    os.chown(runner, 1234, 1234)
    before = snapshot(work)
    done = powerless("migrate", *(["--force"] if force else []), str(work))
    line = one_refusal(done, "MIG004")
    assert "not writable by this user: owned by uid 1234 (mode 0644)" in line
    assert done.returncode == 1 and snapshot(work) == before


def test_forcing_a_read_only_file_of_another_user_says_why_it_cannot(work: Path) -> None:
    runner = work / "model_runner.py"
    os.chown(runner, 1234, 1234)
    runner.chmod(0o444)
    before = snapshot(work)
    line = one_refusal(powerless("migrate", "--force", str(work)), "MIG004")
    assert "read-only (mode 0444) and owned by uid 1234" in line
    assert "--force cannot make it writable" in line
    assert snapshot(work) == before


@pytest.mark.slow
def test_a_directory_that_cannot_be_written_is_named(work: Path, tmp_path: Path) -> None:
    os.chown(work, 1234, 1234)  # model_runner_base.py cannot be created in it
    before = snapshot(work)
    line = one_refusal(powerless("migrate", str(work)), "MIG004")
    assert f"cannot create files in {work}: the directory is not writable by this user" in line
    assert snapshot(work) == before
    tree = tmp_path / "tree"  # the journal's directory (the tree's root) cannot be written
    package = Path(shutil.copytree(BEFORE, tree / "engine"))
    tree.chmod(0o755)
    os.chown(tree, 1234, 1234)
    before = snapshot(package)
    done = powerless("migrate", str(tree))
    line = one_refusal(done, "error:")
    assert done.returncode == 2
    assert line.endswith("migrate writes its journal there first: nothing was changed")
    assert snapshot(package) == before
