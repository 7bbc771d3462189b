"""New files and new lines take the line ending of the file or tree they go into; lines
``migrate`` does not touch keep theirs, byte for byte."""

from __future__ import annotations

from pathlib import Path

import pytest

from codemods.toolkit.cstutil import dominant_newline, parse_module
from runnercheck.cli import main
from tests.migrate.conftest import FIXTURES, copy_tree


def crlf(path: Path) -> None:
    path.write_bytes(path.read_bytes().replace(b"\r\n", b"\n").replace(b"\n", b"\r\n"))


def endings(data: bytes) -> tuple[int, int]:
    """(CRLF lines, LF lines)."""
    both = data.count(b"\r\n")
    return both, data.count(b"\n") - both


def test_an_all_crlf_tree_stays_crlf_new_file_included(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tree = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    for path in tree.glob("*.py"):
        crlf(path)
    assert main(["migrate", str(tree)]) == 0
    capsys.readouterr()
    created = tree / "model_runner_base.py"
    assert created.exists()
    for path in tree.glob("*.py"):
        data = path.read_bytes()
        assert endings(data)[1] == 0, path.name  # no LF-only line anywhere
        if data:
            assert endings(data)[0] > 0
    # the text is what the LF tree migrates to (the golden output), in CRLF
    for path in (FIXTURES / "engine" / "after").glob("*.py"):
        assert (tree / path.name).read_bytes() == path.read_bytes().replace(b"\n", b"\r\n")


def test_new_lines_of_a_mixed_file_take_its_dominant_ending() -> None:
    # first line LF (LibCST's default would be LF), every other line CRLF
    source = b"import os\nclass A:\r\n    x = 1\r\n\r\n    y = 2\r\n"
    assert dominant_newline(source) == "\r\n"
    module = parse_module(source)
    assert module.code.encode() == source  # untouched: byte for byte
    import libcst as cst

    added = module.with_changes(body=[*module.body, cst.parse_statement("z = 3\n")])
    data = added.code.encode()
    assert data.startswith(source) and data[len(source) :] == b"z = 3\r\n"
    assert dominant_newline(b"a\nb\nc\r\n") == "\n"
    assert dominant_newline(b"", "\r\n") == "\r\n"
