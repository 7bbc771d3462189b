"""Calls of the legacy method the migration removes, anywhere in the project: rewritten
to the new method when it is a drop-in and the file was given, else named file:line."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from codemods.pipeline import MERGE, migrate
from tests.migrate.conftest import FIXTURES, copy_tree

CALLER = """\
def test_prepare(model_runner, requests):
    (tokens, metadata, _) = model_runner.prepare_input_tensors(requests)
    assert tokens is not None and metadata is not None


def test_third(model_runner, requests):
    _, _, sampling = model_runner.prepare_input_tensors(requests)


def test_short(model_runner, requests):
    tokens, metadata = model_runner.prepare_input_tensors(requests)
"""


def _project(tmp_path: Path) -> Path:
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_runner.py").write_text(CALLER)
    return tmp_path


def test_a_drop_in_call_is_rewritten_when_its_file_is_given(tmp_path: Path) -> None:
    root = _project(tmp_path)
    result = migrate([root / "engine", root / "tests"], select=(MERGE,))
    change = result.changes[root / "tests" / "test_runner.py"]
    new = change.new.decode()
    assert (
        "    model_input = model_runner.prepare_model_input(requests)\n"
        "    (tokens, metadata) = (model_input.input_tokens, model_input.attn_metadata)\n"
    ) in new
    # not drop-ins: a third value the runners hold in different fields, two values
    # unpacked from three; named at their lines in the rewritten file
    lines = new.splitlines()
    third = lines.index("    _, _, sampling = model_runner.prepare_input_tensors(requests)")
    short = lines.index("    tokens, metadata = model_runner.prepare_input_tensors(requests)")
    named = [n for n in result.notes if n.kind == "callers"]
    assert [(n.path.name, n.line) for n in named] == [
        ("test_runner.py", third + 1),
        ("test_runner.py", short + 1),
    ]
    assert "different fields" in named[0].message
    assert "unpacks 2 values" in named[1].message


def test_a_call_outside_the_given_paths_is_named(tmp_path: Path) -> None:
    root = _project(tmp_path)
    result = migrate([root / "engine"], select=(MERGE,))
    assert root / "tests" / "test_runner.py" not in result.changes
    named = sorted((n.path.name, n.line) for n in result.notes if n.kind == "callers")
    assert named == [("test_runner.py", 2), ("test_runner.py", 7), ("test_runner.py", 11)]


def test_the_given_paths_are_read_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The search reads only what the migration did not: files outside the given
    paths (here ``tests/``); the given ones it takes from the migration's one walk."""
    from codemods import callers

    root = _project(tmp_path)
    (root / "tools").mkdir()
    (root / "tools" / "bench.py").write_text(CALLER)
    searched: list[Path] = []
    real_read = callers.read_source

    def reading(path: Path, *args: Any, **kwargs: Any) -> bytes:
        searched.append(Path(path))
        return real_read(path, *args, **kwargs)

    monkeypatch.setattr(callers, "read_source", reading)
    result = migrate([root / "engine", root / "tests"], select=(MERGE,))
    assert root / "tests" / "test_runner.py" in result.changes  # found without a second read
    assert [p.relative_to(root) for p in searched] == [Path("tools/bench.py")]
    named = [(n.path.parent.name, n.line) for n in result.notes if n.kind == "callers"]
    assert [n for n in named if n[0] == "tools"] == [("tools", 2), ("tools", 7), ("tools", 11)]
    assert [n[0] for n in named] == ["tests", "tests", "tools", "tools", "tools"]  # walk order
