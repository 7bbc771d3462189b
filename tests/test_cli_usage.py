"""Usage errors: a mistyped subcommand or option gets a suggestion, an unknown option
is said with the usage of the subcommand that got it, and a missing path is exit 2 in
every subcommand."""

from __future__ import annotations

from pathlib import Path

import pytest

from runnercheck.cli import main


def usage_error(argv: list[str], capsys: pytest.CaptureFixture[str]) -> str:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == 2
    return capsys.readouterr().err


@pytest.mark.parametrize(
    ("argv", "suggestion"),
    [
        (["chek", "x"], "(did you mean 'check'?)"),
        (["fuz", "x"], "(did you mean 'fuzz'?)"),
        (["migrate", "--chek", "x"], "(did you mean '--check'?)"),
        (["check", "--selct", "RC101", "x"], "(did you mean '--select'?)"),
    ],
)
def test_a_mistyped_name_gets_a_suggestion(
    argv: list[str], suggestion: str, capsys: pytest.CaptureFixture[str]
) -> None:
    err = usage_error(argv, capsys)
    assert err.rstrip().endswith(suggestion), err


def test_no_suggestion_for_a_name_like_none(capsys: pytest.CaptureFixture[str]) -> None:
    err = usage_error(["check", "--fix", "x"], capsys)
    assert "unrecognized arguments: --fix" in err and "did you mean" not in err


def test_an_unknown_option_is_said_with_its_subcommand_s_usage(
    capsys: pytest.CaptureFixture[str],
) -> None:
    err = usage_error(["check", "--fix", "x"], capsys)
    assert err.startswith("usage: runnercheck check ")
    assert "runnercheck check: error:" in err


@pytest.mark.parametrize("command", ["check", "migrate", "config"])
def test_a_missing_path_is_a_usage_error_everywhere(
    command: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    missing = tmp_path / "nope"
    assert main([command, str(missing)]) == 2
    assert f"{missing}: no such file or directory" in capsys.readouterr().err


@pytest.mark.parametrize(
    "command", ["check", "migrate", "mypy", "fuzz", "trace", "rules", "config"]
)
def test_help_is_plain_text(command: str, capsys: pytest.CaptureFixture[str]) -> None:
    """No reStructuredText markup (``code``, :class:`X`) in what --help prints."""
    with pytest.raises(SystemExit) as exited:
        main([command, "--help"])
    assert exited.value.code == 0
    out = capsys.readouterr().out
    assert out.strip() and "``" not in out and ":class:`" not in out and ":func:`" not in out
