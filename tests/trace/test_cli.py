"""``runnercheck trace`` usage errors (one line, exit 2), failing and interrupted commands."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from runnercheck.cli import main
from runnercheck.trace.monitor import alive


@pytest.mark.parametrize(
    ("argv", "message"),
    [
        (["trace"], "no command to trace"),
        (["trace", "--"], "no command to trace"),
        (["trace", "--deadline", "0", "--", "true"], "--deadline must be positive"),
        (["trace", "--timeout", "-1", "--", "true"], "--timeout must be positive"),
        (
            ["trace", "--max-broadcasts-per-step", "-1", "--", "true"],
            "--max-broadcasts-per-step must be at least 0",
        ),
        (["trace", "--step-method", "a.b", "--", "true"], "--step-method 'a.b': not a method"),
        (["trace", "--", "/nonexistent/runnercheck-cmd"], "cannot run '/nonexistent/"),
    ],
)
def test_usage_errors(argv: list[str], message: str, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("runnercheck: error: ")
    assert message in err[0]


def test_a_failing_command_without_collectives_fails_the_trace(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "--", "false"]) == 1
    out = capsys.readouterr().out
    assert "no collective was recorded" in out
    assert "the command exited with status 1" in out


def test_trace_is_listed_in_help(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["--help"])
    assert "trace" in capsys.readouterr().out


def test_terminating_trace_stops_the_command(tmp_path: Path) -> None:
    """The command runs in its own session; SIGTERM to trace must not leave it running."""
    pid_file = tmp_path / "pid"
    command = f"echo $$ > {pid_file}; exec sleep 120"
    trace = subprocess.Popen(
        [sys.executable, "-m", "runnercheck", "trace", "--", "bash", "-c", command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
    )
    deadline = time.monotonic() + 60
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline and trace.poll() is None
        time.sleep(0.05)
    sleeper = int(pid_file.read_text())
    assert alive(sleeper)
    trace.send_signal(signal.SIGTERM)
    _, err = trace.communicate(timeout=60)
    assert trace.returncode == 130
    assert err.decode().strip() == "runnercheck: interrupted"
    assert not alive(sleeper)
