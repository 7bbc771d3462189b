"""Every rule: a bad fixture with its exact expected output, and a good one with none."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runnercheck import catalog
from runnercheck.rules import RULES
from tests.check.conftest import FIXTURES, REPO, CliResult, good_tree

RULE_DIRS = sorted(p for p in FIXTURES.iterdir() if (p / "bad.expected").is_file())


def _target(directory: Path, kind: str) -> str:
    single = directory / f"{kind}.py"
    path = single if single.is_file() else directory / kind
    return path.relative_to(REPO).as_posix()


def test_every_check_rule_has_fixtures() -> None:
    names = {p.name for p in RULE_DIRS}
    for rule in RULES:
        assert rule.name in names, f"no fixture for {rule.code} {rule.name}"


@pytest.mark.parametrize("directory", RULE_DIRS, ids=lambda p: p.name)
def test_bad_fixture_exact_output(directory: Path, run_built: Callable[..., CliResult]) -> None:
    expected = (directory / "bad.expected").read_text().splitlines()
    result = run_built("--show-notes", _target(directory, "bad"))
    assert result.finding_lines == expected
    assert result.code == 1
    assert result.err == ""
    rule = catalog.lookup(RULES, directory.name)
    # every bad fixture has at least one error of its rule (notes say "note:")
    assert any(f": {rule.code} " in line for line in expected)


@pytest.mark.parametrize(
    "directory",
    [p for p in RULE_DIRS if (p / "good.py").exists() or (p / "good").is_dir()],
    ids=lambda p: p.name,
)
def test_good_fixture_has_no_finding(
    directory: Path, run: Callable[..., CliResult], tmp_path: Path
) -> None:
    single = (directory / "good.py").is_file()
    target = _target(directory, "good") if single else str(good_tree(directory, tmp_path / "good"))
    result = run(target)
    assert result.finding_lines == []
    assert result.summary.startswith("No findings (")
    assert result.code == 0
