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
        (["trace", "--deadline", "0", "--", "true"], "--deadline must be between 0.001 and"),
        (["trace", "--timeout", "-1", "--", "true"], "--timeout must be between 0.001 and"),
        (
            ["trace", "--max-broadcasts-per-step", "-1", "--", "true"],
            "--max-broadcasts-per-step must be between 0 and 1000000, not -1",
        ),
        (
            ["trace", "--deadline", "nan", "--", "true"],
            "--deadline must be between 0.001 and 604800 seconds, not nan",
        ),
        (
            ["trace", "--timeout", "nan", "--", "true"],
            "--timeout must be between 0.001 and 604800 seconds, not nan",
        ),
        (
            ["trace", "--deadline", "inf", "--", "true"],
            "--deadline must be between 0.001 and 604800 seconds, not inf",
        ),
        (
            ["trace", "--timeout=-inf", "--", "true"],
            "--timeout must be between 0.001 and 604800 seconds, not -inf",
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


def _output_cases(tmp: Path) -> list[tuple[list[str], str]]:
    afile = tmp / "afile"
    afile.write_text("x")
    (tmp / "used").mkdir()
    (tmp / "used" / "123.trace").write_text("")
    return [
        (
            ["--json", str(tmp / "missing" / "r.json")],
            f"--json {tmp}/missing/r.json: no such directory: {tmp}/missing",
        ),
        (["--json", str(tmp)], f"--json {tmp}: is a directory"),
        (["--json", str(afile / "r.json")], f"--json {afile}/r.json: not a directory: {afile}"),
        (["--keep", str(afile)], f"--keep {afile}: not a directory"),
        (["--keep", str(afile / "sub")], f"--keep {afile}/sub: cannot create it: Not a directory"),
        (
            ["--keep", str(tmp / "used")],
            f"--keep {tmp}/used: holds *.trace files of another run (give a new or empty directory)",
        ),
    ]


def test_output_paths_are_checked_before_the_command_runs(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    marker = tmp_path / "ran"
    for options, message in _output_cases(tmp_path):
        assert main(["trace", *options, "--", "touch", str(marker)]) == 2, options
        assert capsys.readouterr().err == f"runnercheck: error: {message}\n"
        assert not marker.exists(), options


def test_json_and_keep_are_written(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    report = tmp_path / "report.json"
    report.write_text("old")
    keep = tmp_path / "new" / "traces"
    assert main(["trace", "--json", str(report), "--keep", str(keep), "--", "true"]) == 0
    assert '"returncode": 0' in report.read_text() and keep.is_dir()
    assert not [p for p in tmp_path.iterdir() if p.name.endswith(".tmp")]


def test_a_command_without_ranks_does_not_claim_they_agree(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["trace", "--", "true"]) == 0
    out = capsys.readouterr().out
    assert "ranks agree" not in out
    assert "no rank ran a collective, so there were no ranks to compare" in out


def test_processes_the_command_leaves_behind_are_ended_and_named(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A plain child, one under setsid and one that ignores SIGTERM outlive the command."""
    pids = tmp_path / "pids"
    script = (
        f"sleep 600 & echo $! >> {pids}; setsid sleep 601 & echo $! >> {pids}; "
        f"(trap '' TERM; echo $BASHPID >> {pids}; exec sleep 602) & "
        # exit only once the third one ignores SIGTERM
        f"while [ $(wc -l < {pids}) -lt 3 ]; do sleep 0.01; done"
    )
    assert main(["trace", "--", "bash", "-c", script]) == 0
    out = capsys.readouterr().out
    started = [int(line) for line in pids.read_text().split()]
    assert len(started) == 3
    assert [pid for pid in started if alive(pid)] == []
    ended = next(line for line in out.splitlines() if line.startswith("ended what the command"))
    assert all(f" {pid} (" in ended for pid in started)  # (bash) before it execs sleep
