"""Helpers for the ``runnercheck check`` tests: run the real CLI in-process."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from runnercheck.cli import main
from tests.check import built

REPO = Path(__file__).resolve().parents[2]
FIXTURES = Path(__file__).parent / "fixtures"


def good_tree(directory: Path, target: Path) -> Path:
    """A rule fixture's ``good/`` as checked: ``bad/`` (but its hidden directories: a
    journal) with the files ``good/`` holds put over it (a good fixture holds only the
    files its fix changes), built files included (:mod:`tests.check.built`)."""
    built.tree(directory / "bad", target)
    for name, text in built.sources(directory / "good").items():
        (target / name).write_text(text)
    return target


@dataclass
class CliResult:
    code: int
    out: str
    err: str

    @property
    def finding_lines(self) -> list[str]:
        """stdout without its final summary line."""
        lines = self.out.splitlines()
        assert lines, "no summary line"
        return lines[:-1]

    @property
    def summary(self) -> str:
        return self.out.splitlines()[-1]


@pytest.fixture
def run(capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``run_check(*args)``: ``runnercheck check ARGS`` from the repository root, without
    the facts cache (which would be written into the repository, beside the nearest
    ``pyproject.toml``; ``tests/check/test_cache.py`` runs it in copies)."""
    monkeypatch.chdir(REPO)

    def run(*args: str) -> CliResult:
        capsys.readouterr()
        code = main(["check", *(() if "--no-cache" in args else ("--no-cache",)), *args])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


@pytest.fixture(scope="session")
def fixtures_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A directory holding ``tests/check/fixtures`` with its built files written."""
    return built.materialize(tmp_path_factory.mktemp("built"))


@pytest.fixture
def run_built(run, fixtures_root: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """``run``, from :func:`fixtures_root`: the fixtures' relative paths name the same
    files, built ones included."""
    monkeypatch.chdir(fixtures_root)
    return run
