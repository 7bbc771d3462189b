"""Helpers for the ``runnercheck migrate`` tests: copies of fixture trees and the
real CLI run in-process."""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from pathlib import Path

import pytest

from runnercheck.cli import main

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass
class CliResult:
    code: int
    out: str
    err: str


@pytest.fixture
def migrate_cli(capsys: pytest.CaptureFixture[str]):  # type: ignore[no-untyped-def]
    def run(*argv: str) -> CliResult:
        code = main(["migrate", *argv])
        captured = capsys.readouterr()
        return CliResult(code, captured.out, captured.err)

    return run


def copy_tree(source: Path, target: Path) -> Path:
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    return target


def snapshot(root: Path) -> dict[str, bytes]:
    """Every file under ``root`` by relative path (bytes)."""
    return {
        str(p.relative_to(root)): p.read_bytes()
        for p in sorted(root.rglob("*"))
        if p.is_file() and "__pycache__" not in p.parts
    }
