"""Special files in a tree never hang or crash ``check`` or ``migrate``: FIFOs, sockets,
links to devices, link loops, unreadable directories, files over ``max_file_size``.
Each is one note or one finding, the rest of the tree is handled, nothing is lost."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from tests.migrate.conftest import FIXTURES
from tests.stress.harness import ROOT

ENGINE = FIXTURES / "engine" / "before"
LIMIT = 100_000


def without_root_powers() -> list[str]:
    """A command prefix under which directory permissions apply (root reads anything)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: permissions cannot be tested")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT), "PYTHONDONTWRITEBYTECODE": "1"}
    return subprocess.run(
        [*without_root_powers(), sys.executable, "-m", "runnercheck", *args],
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,  # a FIFO that is opened blocks forever: this is the hang check
        env=env,
    )


@pytest.fixture
def tree(tmp_path: Path) -> Path:
    root = tmp_path / "tree"
    shutil.copytree(ENGINE, root)
    (root / "pyproject.toml").write_text(f"[tool.runnercheck]\nmax_file_size = {LIMIT}\n")
    os.mkfifo(root / "x.py")
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(root / "sock.py"))
    server.close()
    (root / "zero.py").symlink_to("/dev/zero")
    (root / "loop.py").symlink_to("loop.py")
    (root / "again").symlink_to(".", target_is_directory=True)
    locked = root / "locked"
    locked.mkdir()
    (locked / "hidden.py").write_text("broadcast_tensor_dict({})\n")
    locked.chmod(0)
    (root / "big.py").write_bytes(b"# broadcast_tensor_dict\n" + b"x = 1\n" * (LIMIT // 5))
    yield root
    locked.chmod(0o755)


def lines_with(text: str, needle: str) -> list[str]:
    return [line for line in text.splitlines() if needle in line]


def test_check_reports_each_special_file_once_and_checks_the_rest(tree: Path) -> None:
    result = run(tree.parent, "check", "tree")
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    assert sorted(result.stderr.splitlines()) == [
        "tree/loop.py: note: symbolic link loop: skipped",
        "tree/sock.py: note: a socket, not a regular file: skipped",
        "tree/x.py: note: a FIFO, not a regular file: skipped",
        "tree/zero.py: note: symbolic link to /dev/zero, a character device: skipped",
    ]
    size = (tree / "big.py").stat().st_size
    assert lines_with(result.stdout, " RC001 ") == [
        f"tree/big.py:1:1: RC001 {size} bytes, more than max_file_size ({LIMIT}): not read",
        "tree/locked:1:1: RC001 cannot read directory: Permission denied; "
        "files in it were not read",
    ]
    assert len(lines_with(result.stdout, " RC106 ")) == 3


@pytest.mark.slow
def test_migrate_skips_them_migrates_the_rest_and_leaves_them_as_they_were(tree: Path) -> None:
    result = run(tree.parent, "migrate", "tree")
    assert result.returncode == 1 and "Traceback" not in result.stdout + result.stderr
    out = result.stdout
    assert lines_with(out, ": note: ") == [
        "tree/loop.py: note: symbolic link loop: skipped",
        "tree/sock.py: note: a socket, not a regular file: skipped",
        "tree/x.py: note: a FIFO, not a regular file: skipped",
    ]
    assert lines_with(out, " RC001 ") == [
        f"tree/big.py: RC001 [parse] {(tree / 'big.py').stat().st_size} bytes, more than "
        f"max_file_size ({LIMIT}): not read",
        "tree/locked: RC001 [parse] cannot read directory: Permission denied; "
        "files in it were not read",
    ]
    assert lines_with(out, " MIG003 ") == [
        "tree/zero.py: MIG003 [parse] symbolic link to /dev/zero (outside the given paths): skipped"
    ]
    assert "7 changed (2 new)" in out.splitlines()[-1]
    assert stat.S_ISFIFO((tree / "x.py").lstat().st_mode)
    assert stat.S_ISSOCK((tree / "sock.py").lstat().st_mode)
    assert os.readlink(tree / "zero.py") == "/dev/zero"
    assert (tree / "big.py").stat().st_size > LIMIT


@pytest.mark.parametrize("command", ["check", "migrate"])
def test_a_special_file_or_unreadable_directory_given_as_an_argument(
    tree: Path, command: str
) -> None:
    for name, reason in [
        ("x.py", "a FIFO, not a regular file: not read"),
        ("locked", "cannot read directory: Permission denied; files in it were not read"),
        ("loop.py", "symbolic link loop: not read"),
    ]:
        result = run(tree, command, name)
        assert result.returncode == 1, (name, result.stdout, result.stderr)
        assert "Traceback" not in result.stdout + result.stderr
        code = "RC001"
        where = f"{name}:1:1" if command == "check" else name
        assert lines_with(result.stdout, code) == [
            f"{where}: {code} " + ("" if command == "check" else "[parse] ") + reason
        ]
