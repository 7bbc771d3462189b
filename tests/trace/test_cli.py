"""``runnercheck trace`` usage errors (one line, exit 2), failing and interrupted commands."""

from __future__ import annotations

import json
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
        (
            ["--timeline", str(tmp / "missing" / "t.json")],
            f"--timeline {tmp}/missing/t.json: no such directory: {tmp}/missing",
        ),
        (["--timeline", str(tmp)], f"--timeline {tmp}: is a directory"),
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
    timeline = tmp_path / "timeline.json"
    argv = ["--json", str(report), "--keep", str(keep), "--timeline", str(timeline)]
    assert main(["trace", *argv, "--", "true"]) == 0
    assert '"returncode": 0' in report.read_text() and keep.is_dir()
    assert json.loads(timeline.read_text())["traceEvents"] == []
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


STOPS_ITS_PARENT = "date +%s.%N > {stamp}; kill -STOP $PPID; exec sleep 60"


@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks processes up in /proc")
@pytest.mark.parametrize(
    ("limits", "reason"),
    [
        (
            ["--deadline", "2"],
            "runnercheck's own process was stopped (SIGSTOP; does the command signal its "
            "parent?) and the deadline of 2 s passed",
        ),
        (
            ["--deadline", "600", "--timeout", "2"],
            "runnercheck's own process was stopped (SIGSTOP; does the command signal its "
            "parent?) and the timeout of 2 s passed",
        ),
    ],
    ids=["deadline", "timeout"],
)
def test_a_command_that_stops_trace_is_ended_at_its_limit(
    tmp_path: Path, limits: list[str], reason: str
) -> None:
    from tests.cli_runs import run_cli

    stamp = tmp_path / "stopped_at"
    script = STOPS_ITS_PARENT.format(stamp=stamp)
    ran = run_cli(["trace", *limits, "--", "sh", "-c", script], tmp_path)
    assert ran.returncode is not None, "runnercheck trace hung, stopped by its command"
    assert ran.ended - float(stamp.read_text()) < 2 + 6.0
    assert ran.returncode == 1
    assert "Traceback" not in ran.stdout + ran.stderr
    said = [line for line in ran.stdout.splitlines() if "runnercheck's own process" in line]
    assert len(said) == 1 and said[0].startswith(f"stopped the run: {reason}; "), ran.stdout
    assert ran.left == []


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc").is_dir(), reason="looks processes up in /proc")
def test_a_trace_suspended_from_its_terminal_past_the_deadline_goes_on(tmp_path: Path) -> None:
    """Ctrl-Z (SIGTSTP) is the user's: the run is not ended however long it lasts."""
    started = tmp_path / "started"
    command = ["sh", "-c", f"touch {started}; sleep 4"]
    trace = subprocess.Popen(
        [sys.executable, "-m", "runnercheck", "trace", "--deadline", "1", "--", *command],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        process_group=0,  # a group of this session: a job, which SIGTSTP stops
    )
    try:
        deadline = time.monotonic() + 60
        while not started.exists():
            assert time.monotonic() < deadline and trace.poll() is None
            time.sleep(0.05)
        trace.send_signal(signal.SIGTSTP)
        time.sleep(3)
        state = Path(f"/proc/{trace.pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
        trace.send_signal(signal.SIGCONT)
        out, err = trace.communicate(timeout=60)
    finally:
        trace.kill()
        trace.wait()
    assert state == "T"
    assert (trace.returncode, err.decode()) == (0, "")
    assert "runnercheck's own process" not in out.decode()
