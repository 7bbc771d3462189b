"""``-j`` is capped by the work and the cores: ``check -j 1000`` starts no more
processes than there are cores, and a bad value is one line."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runnercheck.cli import main
from runnercheck.jobs import cores, worker_count
from tests.check.conftest import FIXTURES

ROOT = Path(__file__).resolve().parents[1]


def test_worker_count() -> None:
    assert worker_count(1000, 240) == min(cores(), 240)
    assert worker_count(0, 240) == cores()
    assert worker_count(8, 1) == 1
    assert worker_count(8, 0) == 1


def children(pid: int) -> set[int]:
    found = set()
    for name in os.listdir("/proc"):
        if name.isdigit():
            try:
                stat = Path(f"/proc/{name}/stat").read_text().rsplit(")", 1)[1].split()
            except (OSError, IndexError):
                continue
            if int(stat[1]) == pid:
                found.add(int(name))
    return found


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="counts processes through /proc")
@pytest.mark.parametrize("command", ["check", "migrate"])
def test_a_huge_j_starts_at_most_one_process_per_core(tmp_path: Path, command: str) -> None:
    source = (FIXTURES / "recursive-from-dict" / "bad.py").read_text()
    for number in range(240 if command == "check" else 24):  # migrate rewrites each one
        (tmp_path / f"m{number}.py").write_text(source)
    proc = subprocess.Popen(
        [sys.executable, "-m", "runnercheck", command, "-j", "1000", str(tmp_path)],
        cwd=ROOT,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    most = 0
    while proc.poll() is None:
        most = max(most, len(children(proc.pid)))
        time.sleep(0.01)
    assert proc.returncode == (1 if command == "check" else 0)  # findings; a clean write
    assert most <= cores() + 1  # the pool's workers (+ its resource tracker)
    assert most > 0 or cores() == 1


def test_a_negative_j_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["check", "-j", "-1", str(FIXTURES)]) == 2
    assert capsys.readouterr().err == "runnercheck: error: -j/--jobs must be 0 or more, not -1\n"
