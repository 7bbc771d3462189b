"""The verification's new findings: what a rewrite's files report that the files as
read did not (``verify.new_findings``), with the findings of the files as read made
only when the rewrite's files report any."""

from __future__ import annotations

import ast
from pathlib import Path

from codemods.facts.values import ValueFacts
from codemods.framework import verify
from runnercheck.analysis.model import ModuleFacts
from runnercheck.config import Config
from tests.check import built

CHECK_FIXTURES = Path(__file__).parents[1] / "check" / "fixtures"


def _read(tree: Path) -> dict[Path, ModuleFacts]:
    """The facts of a fixture directory's files, stored or built (``tests.check.built``)."""
    config = Config()
    out = {}
    for name, text in sorted(built.sources(tree).items()):
        path = tree / name
        out[path] = verify.facts(path, ast.parse(text), text, config)
    return out


def _baseline(modules: dict[Path, ModuleFacts]) -> verify.Baseline:
    return verify.Baseline(modules, Config(), ValueFacts({}))


def test_a_finding_the_files_as_read_had_is_not_new() -> None:
    read = _read(CHECK_FIXTURES / "unsent-broadcast-key" / "bad")
    baseline = _baseline(read)
    assert {f.code for f in baseline.findings} == {"RC111"}
    assert verify.new_findings(baseline, read) == []


def test_a_finding_the_files_as_read_did_not_have_is_new() -> None:
    good = _read(CHECK_FIXTURES / "unsent-broadcast-key" / "good")
    bad = _read(CHECK_FIXTURES / "unsent-broadcast-key" / "bad")
    baseline = _baseline(good)
    assert baseline.findings == []
    added = verify.new_findings(baseline, bad)
    assert sorted(f.code for f in added) == ["RC111", "RC111"]


def test_an_rc106_left_in_a_changed_file_is_new_even_where_it_was_read() -> None:
    read = _read(CHECK_FIXTURES / "paired-broadcast" / "bad")
    baseline = _baseline(read)
    assert {f.code for f in baseline.findings} == {"RC106"}
    assert verify.new_findings(baseline, dict(read)) == []  # (no file changed)
    changed = {path: ModuleFacts(**vars(facts)) for path, facts in read.items()}
    assert {f.code for f in verify.new_findings(baseline, changed)} == {"RC106"}


def test_the_findings_as_read_are_made_only_when_the_rewrite_reports_some() -> None:
    bad = _read(CHECK_FIXTURES / "unsent-broadcast-key" / "bad")
    good = _read(CHECK_FIXTURES / "unsent-broadcast-key" / "good")
    baseline = _baseline(bad)
    assert verify.new_findings(baseline, good) == []
    assert "findings" not in vars(baseline)  # (a cached property, never asked for)
