"""One diagnostic type and its four formats: what a finding of check, a mypy error the
gate reads and a walk's problem share, and how each format shows a warning, a fix and
the related sites (check's own outputs are compared whole in tests/check)."""

from __future__ import annotations

import json
from pathlib import Path

from mypy_plugin.gate import key, parse
from runnercheck import diagnostic_formats as formats
from runnercheck.diagnostics import Diagnostic, Site
from runnercheck.files import Problem
from runnercheck.findings import Finding

PAIRED = Diagnostic(
    "engine/worker.py",
    12,
    5,
    "RC106",
    "two broadcasts per step",
    "warning",
    fix="merge them into one broadcast",
    related=(Site("engine/runner.py", 40, "the second broadcast"),),
)


def test_a_finding_is_a_diagnostic_and_sorts_by_place_then_code() -> None:
    later = Finding("a.py", 3, 1, "RC101", "m")
    earlier = Finding("a.py", 2, 9, "RC104", "m")
    fixed = Diagnostic("a.py", 3, 1, "RC101", "m", fix="do this")
    assert Finding is Diagnostic
    assert sorted([later, fixed, earlier]) == [earlier, later, fixed]
    note = later.as_note("in dead code")
    assert note.is_note and note.message == "m (note: in dead code)" and not later.is_note


def test_text_labels_a_warning_and_a_note_but_not_an_error() -> None:
    error = Diagnostic("a.py", 3, 1, "RC101", "m")
    assert formats.text(error) == "a.py:3:1: RC101 m"
    assert formats.text(error.as_note("why")) == "a.py:3:1: note: RC101 m (note: why)"
    assert formats.text(PAIRED) == "engine/worker.py:12:5: warning: RC106 two broadcasts per step"


def test_json_keeps_check_s_keys_and_adds_fix_and_related_only_when_present() -> None:
    plain = formats.json_object(Diagnostic("a.py", 3, 1, "RC101", "m"), "unbroadcast-field")
    assert list(plain) == ["path", "line", "col", "code", "message", "severity", "name"]
    full = formats.json_object(PAIRED, "paired-broadcast")
    assert full["fix"] == "merge them into one broadcast"
    assert full["related"] == [
        {"path": "engine/runner.py", "line": 40, "message": "the second broadcast"}
    ]
    json.dumps(full)


def test_sarif_result_has_related_locations_and_the_fix(tmp_path: Path) -> None:
    result = formats.sarif_result(PAIRED, 7, tmp_path)
    assert result["ruleIndex"] == 7 and result["level"] == "warning"
    location = result["locations"][0]["physicalLocation"]
    assert location["artifactLocation"] == {"uri": "engine/worker.py", "uriBaseId": "%SRCROOT%"}
    assert location["region"] == {"startLine": 12, "startColumn": 5}
    (related,) = result["relatedLocations"]
    assert related["physicalLocation"]["region"] == {"startLine": 40}
    assert related["message"] == {"text": "the second broadcast"}
    assert result["properties"] == {"fix": "merge them into one broadcast"}
    outside = formats.sarif_result(Diagnostic("/elsewhere/x.py", 1, 1, "RC101", "m"), 0, tmp_path)
    assert outside["locations"][0]["physicalLocation"]["artifactLocation"] == {
        "uri": "file:///elsewhere/x.py"
    }


def test_github_level_follows_severity_and_related_messages_follow_the_message() -> None:
    assert formats.github(PAIRED, "RC106 paired-broadcast") == (
        "::warning file=engine/worker.py,line=12,col=5,title=RC106 paired-broadcast"
        "::two broadcasts per step%0Athe second broadcast"
    )
    note = Diagnostic("a.py", 3, 0, "RC101", "m", "note")
    assert formats.github(note, "") == "::notice file=a.py,line=3::m"


def test_the_gate_reads_mypy_errors_as_diagnostics_with_their_notes() -> None:
    errors, printed = parse(
        [
            'e/r.py:60:5: error: returns the fixed class "C"  [from-dict-fixed-return]',
            "e/r.py:61: note: declared here",
            "    a continuation",
            "e/other.py:2: note: a note of another file",
            "e/w.py:3: error: Incompatible types",
        ]
    )
    first, second = errors
    assert (first.path, first.line, first.column, first.code) == (
        "e/r.py",
        60,
        5,
        "from-dict-fixed-return",
    )
    assert first.related == (Site("e/r.py", 61, "declared here"),)
    assert (second.column, second.code, second.related) == (0, "misc", ())
    assert printed[0] == [
        'e/r.py:60:5: error: returns the fixed class "C"  [from-dict-fixed-return]',
        "e/r.py:61: note: declared here",
        "    a continuation",
    ]
    # the baseline's line, as before errors were diagnostics: no line number
    assert key(first) == 'e/r.py\tfrom-dict-fixed-return\treturns the fixed class "C"'


def test_a_walk_problem_is_an_error_when_it_may_hide_source_and_a_note_otherwise() -> None:
    hides = Problem(Path("x.py"), "d/x.py", "unreadable", "cannot read", True)
    shown = Problem(Path("y"), "d/y", "broken-link", "a broken link", False)
    assert hides.diagnostic("RC001") == Diagnostic("d/x.py", 1, 1, "RC001", "cannot read")
    assert shown.diagnostic("RC001").severity == "note"
