"""Context beyond the given paths: a plugin's classes derive from an engine outside
them. The engine's modules are read (never imported) from ``--context``, ``context``
in the config, or the installed packages; findings are reported for the given paths
only."""

from __future__ import annotations

import sys
from collections.abc import Callable

import pytest

from runnercheck.check import check_paths
from runnercheck.config import Config
from tests.check.conftest import FIXTURES, REPO, CliResult

CASE = FIXTURES / "context"
PLUGIN = (CASE / "plugin").relative_to(REPO).as_posix()
ENGINE = (CASE / "engine").relative_to(REPO).as_posix()


def codes(result: CliResult) -> list[str]:
    return [line.split(": ")[1].split()[0] for line in result.finding_lines]


def test_without_the_engine_the_delivered_field_looks_undelivered(
    run: Callable[..., CliResult],
) -> None:
    result = run(PLUGIN)
    assert "RC103" in codes(result)
    assert result.code == 1


def test_context_path_reads_the_engine_and_reports_only_the_plugin(
    run: Callable[..., CliResult],
) -> None:
    result = run("--show-notes", "--context", ENGINE, PLUGIN)
    # the engine's worker input delivers virtual_engine; the engine's own extra
    # broadcast is not in the given paths, so it is not reported
    assert result.finding_lines == []
    assert "1 imported file read for context" in result.summary
    assert result.code == 0


def test_context_given_as_the_package_itself(run: Callable[..., CliResult]) -> None:
    # ``--context site-packages/accel_engine`` means the directory holding it
    result = run("--context", f"{ENGINE}/accel_engine", PLUGIN)
    assert result.finding_lines == []
    assert "1 imported file read for context" in result.summary


def test_context_from_the_config(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    result = check_paths([PLUGIN], Config(context=(ENGINE,)), root=REPO)
    assert [f.code for f in result.findings] == []


def test_installed_package_is_found_without_importing(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(REPO)
    monkeypatch.setattr(sys, "path", [*sys.path, str(REPO / ENGINE)])
    result = check_paths([PLUGIN])
    assert [f.code for f in result.findings] == []
    assert "accel_engine" not in sys.modules


def test_a_context_that_is_not_a_directory_is_a_usage_error(
    run: Callable[..., CliResult],
) -> None:
    result = run("--context", "no/such/dir", PLUGIN)
    assert result.code == 2
    assert result.err.strip().endswith("--context no/such/dir: not a directory")
    assert "Traceback" not in result.err
