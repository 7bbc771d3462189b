"""What every rank holds, asked the same way by every rule: one fixture per cause of a
false or missed error seen on real engine trees, each with its false side (code that
is right, which must not be an error) and its true side (the bug, which must be one).
The exact output of both sides is pinned, notes included."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.check.conftest import FIXTURES, REPO, CliResult

SEMANTICS = FIXTURES / "semantics"
CASES = sorted(p for p in SEMANTICS.iterdir() if (p / "false.py").is_file())


@pytest.mark.parametrize("case", CASES, ids=lambda p: p.name)
@pytest.mark.parametrize("side", ["false", "true"])
def test_side_has_its_pinned_findings(
    case: Path, side: str, run_built: Callable[..., CliResult]
) -> None:
    target = (case / f"{side}.py").relative_to(REPO).as_posix()
    expected = (case / f"{side}.expected").read_text().splitlines()
    result = run_built("--show-notes", target)
    assert result.finding_lines == expected
    errors = [line for line in expected if ": note: " not in line]
    # the false side is clean of errors, the true side is not
    assert bool(errors) == (side == "true")
    assert result.code == (1 if side == "true" else 0)


@pytest.mark.parametrize(("name", "findings"), [("shared", 1), ("separate", 2), ("mixed", 1)])
def test_one_finding_per_cause(
    name: str, findings: int, run_built: Callable[..., CliResult]
) -> None:
    """One extra broadcast in a worker base that two workers inherit is one cause: one
    finding listing both pairs. Two workers with an extra broadcast each are two. When
    one of the two never broadcasts, the error names it and why, and no note repeats
    the error on its line."""
    case = SEMANTICS / "one-cause"
    target = (case / f"{name}.py").relative_to(REPO).as_posix()
    result = run_built("--show-notes", target)
    assert result.finding_lines == (case / f"{name}.expected").read_text().splitlines()
    assert [line.split(": ")[1].split()[0] for line in result.finding_lines] == ["RC106"] * findings
    if name == "shared":
        assert "GpuWorker and GpuRunner, CpuWorker and CpuRunner" in result.finding_lines[0]
