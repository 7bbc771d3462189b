"""Calls of the legacy method the migration removes, anywhere in the project: rewritten
to the new method when it is a drop-in and the file was given, else named file:line."""

from __future__ import annotations

import ast
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


def test_only_files_that_may_call_a_removed_method_are_parsed_with_libcst() -> None:
    """The ``ast`` pre-check keeps exactly the files with a call the search would look at."""
    from codemods.callers import _may_call

    methods = {"prepare_input_tensors": []}
    own = (
        b"class R:\n    def prepare_input_tensors(self): ...\n"
        b"    def f(self):\n        return self.prepare_input_tensors()\n"
    )
    assert not _may_call(own, methods)  # the class's own method, still there
    assert not _may_call(b"x.prepare_input_tensors\n", methods)  # not a call
    assert _may_call(b"def f(r):\n    return r.prepare_input_tensors()\n", methods)
    inherited = b"class W(R):\n    def f(self):\n        a, b = self.prepare_input_tensors()\n"
    assert _may_call(inherited, methods)
    nested = (
        own + b"    class Inner:\n        def g(self):\n            self.prepare_input_tensors()\n"
    )
    assert _may_call(nested, methods)
    assert _may_call(b"x = (\n", methods)  # ast cannot tell: LibCST decides
    inner_own = (
        b"class W:\n    def f(self):\n        self.prepare_input_tensors()\n"
        b"    class Inner:\n        def prepare_input_tensors(self): ...\n"
        b"        def g(self):\n            return lambda: self.prepare_input_tensors()\n"
    )
    assert _may_call(inner_own, methods)  # W's own call: W does not define it
    assert not _may_call(
        inner_own.replace(b"self.prepare_input_tensors()\n    class", b"1\n    class"), methods
    )
    # the same answers from a tree already parsed
    for source in (own, inherited, nested, inner_own, b"x.prepare_input_tensors\n"):
        assert _may_call(b"", methods, ast.parse(source)) == _may_call(source, methods)


def test_a_file_the_run_parsed_is_searched_in_its_tree(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The ``ast`` pre-check reads the tree the run parsed of a file it read, and
    finds what it finds parsing the file itself."""
    from codemods import callers

    root = _project(tmp_path)
    caller = root / "tests" / "test_runner.py"
    known = {caller: caller.read_bytes()}
    removed = [
        callers.Removed("Runner", "prepare_input_tensors", "prepare_model_input", "In", ("a", "b"))
    ]
    expected = callers.find_callers(removed, [root], [root], known=known)
    assert expected.rewritten
    parsed: list[object] = []
    real = ast.parse

    def parse(source: object, *args: Any, **kwargs: Any) -> ast.Module:
        parsed.append(source)
        return real(source, *args, **kwargs)  # type: ignore[arg-type]

    trees = {caller: real(known[caller])}
    monkeypatch.setattr(ast, "parse", parse)
    found = callers.find_callers(removed, [root], [root], known=known, trees=trees)
    assert found == expected
    assert known[caller] not in parsed


@pytest.mark.parametrize(
    ("path", "start"),
    [
        ("/p/a.py", "/p"),
        ("/p/sub/a.py", "/p"),
        ("/p/sub/deeper/a.py", "/p/sub"),
        ("/pkg/a.py", "/p"),  # a sibling that starts with the same text
        ("/p/.hidden/a.py", "/p"),
        ("/p/node_modules/a.py", "/p"),
        ("/p/sub/.py", "/p"),
        ("/p/a.pyi", "/p"),
        ("/p/a.py", "/"),
        ("/p/a.py", "/p/a.py"),
        ("/p/.x/sub/a.py", "/p/.x"),  # hidden above the walk's start: walked
        ("/a.py", "/p"),
    ],
)
def test_a_known_file_is_searched_as_the_walk_from_its_directory_finds_it(
    path: str, start: str
) -> None:
    from codemods.callers import _SKIP_DIRS, _searched

    p, s = Path(path), Path(start)
    expected = (
        p.suffix == ".py"
        and p.is_relative_to(s)
        and not any(
            part in _SKIP_DIRS or part.startswith(".") for part in p.relative_to(s).parent.parts
        )
    )
    assert _searched(p, s) == expected
