"""A run that can take seconds shows a spinner on a terminal (stderr a real TTY), and
nothing when piped or with ``--quiet``: the real commands, on a pseudo-terminal."""

from __future__ import annotations

import os
import pty
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.demo.engine import engine_source_dir

ROOT = Path(__file__).resolve().parents[1]


def on_terminal(cwd: Path, *args: str) -> tuple[int, str, str]:
    """(exit status, stdout, what the terminal got on stderr)."""
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", PYTHONPATH=str(ROOT), COLUMNS="100")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=follower,
        env=env,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    out = proc.stdout.read() if proc.stdout else b""
    proc.wait(timeout=300)
    os.close(leader)
    return proc.returncode, out.decode(), seen.decode(errors="replace")


@pytest.fixture
def engine(tmp_path: Path) -> Path:
    shutil.copytree(engine_source_dir("legacy"), tmp_path / "engine")
    return tmp_path


@pytest.mark.parametrize(
    ("args", "says"),
    [
        (["check", "--no-cache", "engine"], "checking engine"),
        (["mypy", "--follow-imports=skip", "engine"], "running mypy with the runnercheck plugin"),
    ],
    ids=["check", "mypy"],
)
def test_a_spinner_on_a_terminal_none_when_quiet_or_piped(
    engine: Path, args: list[str], says: str
) -> None:
    status, _, terminal = on_terminal(engine, *args)
    assert status in (0, 1) and says in terminal, terminal
    status, _, terminal = on_terminal(engine, args[0], "--quiet", *args[1:])
    assert status in (0, 1) and says not in terminal, terminal
    piped = subprocess.run(
        [sys.executable, "-m", "runnercheck", *args],
        cwd=engine,
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert piped.returncode in (0, 1) and says not in piped.stderr + piped.stdout
