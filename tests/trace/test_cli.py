"""``runnercheck trace`` usage errors: one line, exit 2, nothing started."""

from __future__ import annotations

import pytest

from runnercheck.cli import main


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
