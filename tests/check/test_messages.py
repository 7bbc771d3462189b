"""Each finding points at the line where the failure happens (the read, not the
``def``), states what fails first and on which rank, and one cause gives one finding;
a note never repeats an error on the same line."""

from __future__ import annotations

from pathlib import Path

from runnercheck.check import check_sources
from runnercheck.findings import Finding
from tests.check.conftest import FIXTURES

LEAK = FIXTURES / "merged-dict-leak" / "bad"


def sources(directory: Path, **edits: tuple[str, str]) -> dict[str, str]:
    """The fixture's files under ``/src/engine/``, each ``name=(old, new)`` applied."""
    out: dict[str, str] = {}
    for path in sorted(directory.glob("*.py")):
        text = path.read_text()
        if path.stem in edits:
            old, new = edits[path.stem]
            assert old in text
            text = text.replace(old, new, 1)
        out[f"/src/engine/{path.name}"] = text
    return out


def line_of(text: str, needle: str) -> int:
    return next(i for i, line in enumerate(text.splitlines(), 1) if needle in line)


def test_rc109_cites_the_read_without_pop_not_the_def() -> None:
    files = sources(LEAK)
    text = files["/src/engine/worker_base.py"]
    read = line_of(text, 'virtual_engine=tensor_dict["virtual_engine"]')
    found = [f for f in check_sources(files).findings if "'virtual_engine'" in f.message]
    assert [(f.code, Path(f.path).name, f.line) for f in found] == [
        ("RC109", "worker_base.py", read)
    ]
    assert f"read without pop at worker_base.py:{read})" in found[0].message


def test_one_missing_field_is_one_finding_with_the_failure_that_comes_first() -> None:
    """``GPUModelInput`` sends ``virtual_engine`` but has no such field: the driver's
    ``as_broadcastable_tensor_dict`` raises AttributeError before anything is sent.
    That is one finding (RC102); RC109 lists only the input that the un-popped key of
    ``WorkerInput`` breaks by itself (``CPUModelInput``)."""
    files = sources(LEAK, runners=("    virtual_engine: int = 0\n", ""))
    result = check_sources(files)
    runners = files["/src/engine/runners.py"]
    key = line_of(runners, '"virtual_engine": self.virtual_engine')
    rc102 = [f for f in result.findings if f.code == "RC102"]
    assert [(Path(f.path).name, f.line) for f in rc102] == [("runners.py", key)]
    assert "AttributeError on the driver" in rc102[0].message
    assert "before anything is sent" in rc102[0].message
    leaks = [f for f in result.findings if f.code == "RC109" and "'virtual_engine'" in f.message]
    assert len(leaks) == 1
    assert "`CPUModelInput(**...)`" in leaks[0].message
    assert "GPUModelInput" not in leaks[0].message


def test_rc102_on_a_literal_value_stays_a_type_error_on_the_other_ranks() -> None:
    path = FIXTURES / "unaccepted-broadcast-key" / "bad.py"
    result = check_sources({str(path): path.read_text()})
    messages = [f.message for f in result.findings if f.code == "RC102"]
    assert messages and all("TypeError on non-driver ranks" in m for m in messages)
    assert not any("AttributeError" in m for m in messages)


def _repeats(findings: list[Finding], notes: list[Finding]) -> list[Finding]:
    errors = {(f.path, f.line, f.code) for f in findings}
    return [n for n in notes if (n.path, n.line, n.code) in errors]


def test_a_note_never_repeats_an_error_on_its_line() -> None:
    """RC104: a copy that drops a parent's key is one finding (the drop, saying it
    re-lists the parent's keys too), not an error and a note on the same line."""
    path = FIXTURES / "parent-dict-drift" / "bad.py"
    result = check_sources({str(path): path.read_text()})
    rc104 = [f for f in [*result.findings, *result.notes] if f.code == "RC104"]
    assert len(rc104) == 1 and not rc104[0].is_note
    assert "re-lists 2 keys of ModelInputForGPU.as_broadcastable_tensor_dict" in rc104[0].message
    assert "drops 'lora_mapping', 'attn_metadata'" in rc104[0].message
    for directory in sorted(p for p in FIXTURES.iterdir() if (p / "bad.expected").is_file()):
        bad = directory / "bad.py"
        files = [bad] if bad.is_file() else sorted((directory / "bad").rglob("*.py"))
        checked = check_sources({str(p): p.read_text() for p in files})
        assert _repeats(checked.findings, checked.notes) == [], directory.name
