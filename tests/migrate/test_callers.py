"""Calls of the legacy method the migration removes, anywhere in the project: rewritten
to the new method when it is a drop-in, as a rename refactor updates every reference
(only inside the given paths with ``--no-callers``), else named file:line (MIG112)."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import Any

import pytest

from codemods.framework.pipeline import CALLER_CODE, MERGE, MigrateResult, migrate
from codemods.merge_broadcasts.callers import search_root
from runnercheck.records import Refused
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


def _named(result: MigrateResult) -> list[Refused]:
    return [r for r in result.refusals if r.code == CALLER_CODE]


def test_a_drop_in_call_is_rewritten_when_its_file_is_given(tmp_path: Path) -> None:
    root = _project(tmp_path)
    result = migrate([root / "engine", root / "tests"], select=(MERGE,))
    change = result.changes[root / "tests" / "test_runner.py"]
    new = change.new.decode()
    assert (
        "    model_input = model_runner.prepare_model_input(requests)\n"
        "    tokens = model_input.input_tokens\n"
        "    metadata = model_input.attn_metadata\n"
    ) in new
    # written with the group whose method it calls (one transaction)
    assert set(change.group.split(" + ")) == {g.label for g in result.groups}
    # not drop-ins: a third value the runners hold in different fields, two values
    # unpacked from three; named (MIG112) at their lines in the rewritten file
    lines = new.splitlines()
    third = lines.index("    _, _, sampling = model_runner.prepare_input_tensors(requests)")
    short = lines.index("    tokens, metadata = model_runner.prepare_input_tensors(requests)")
    named = _named(result)
    assert [(n.path.name, n.line) for n in named] == [
        ("test_runner.py", third + 1),
        ("test_runner.py", short + 1),
    ]
    assert "different fields" in named[0].message
    assert "unpacks 2 values" in named[1].message


@pytest.mark.slow
def test_a_call_outside_the_given_paths_is_rewritten_as_a_rename_would(tmp_path: Path) -> None:
    """The project's tests call the removed method: rewritten with the group, also when
    only the engine is given; ``callers=False`` (``--no-callers``) names them instead."""
    root = _project(tmp_path)
    result = migrate([root / "engine"], select=(MERGE,))
    change = result.changes[root / "tests" / "test_runner.py"]
    assert "model_input = model_runner.prepare_model_input(requests)\n" in change.new.decode()
    named = sorted((n.path.name, n.line) for n in _named(result))
    assert named == [("test_runner.py", 9), ("test_runner.py", 13)]
    kept = migrate([root / "engine"], select=(MERGE,), callers=False)
    assert root / "tests" / "test_runner.py" not in kept.changes
    named = sorted((n.path.name, n.line) for n in _named(kept))
    assert named == [("test_runner.py", 2), ("test_runner.py", 7), ("test_runner.py", 11)]
    assert "outside the given paths" in _named(kept)[0].message


def test_a_plain_copy_searches_the_directory_holding_the_package(tmp_path: Path) -> None:
    """No ``.git``, no ``pyproject.toml``: the callers beside the engine package are
    still found (the directory holding the package is the project)."""
    copy_tree(FIXTURES / "engine" / "before", tmp_path / "copy" / "engine")
    (tmp_path / "copy" / "tests").mkdir()
    (tmp_path / "copy" / "tests" / "test_runner.py").write_text(CALLER)
    assert search_root(tmp_path / "copy" / "engine") == (tmp_path / "copy").resolve()
    result = migrate([tmp_path / "copy" / "engine"], select=(MERGE,))
    assert tmp_path / "copy" / "tests" / "test_runner.py" in result.changes
    assert len(_named(result)) == 2


def test_a_rewritten_call_keeps_to_the_line_length(tmp_path: Path) -> None:
    root = _project(tmp_path)
    long_call = (
        "def test_long(model_runner_under_test, seq_group_metadata_list_of_the_long_prompt):\n"
        "    (input_tokens_of_the_prompt, attention_metadata_of_the_prompt, _) = (\n"
        "        model_runner_under_test.prepare_input_tensors(\n"
        "            seq_group_metadata_list_of_the_long_prompt))\n"
    )
    (root / "tests" / "test_runner.py").write_text(long_call)
    result = migrate([root / "engine"], select=(MERGE,))
    new = result.changes[root / "tests" / "test_runner.py"].new.decode()
    assert "prepare_model_input" in new and "prepare_input_tensors" not in new
    assert max(len(line) for line in new.splitlines()) <= 100, new
    compile(new, "test_runner.py", "exec")


def test_check_fails_on_a_caller_it_cannot_rewrite(tmp_path: Path, migrate_cli: Any) -> None:
    root = _project(tmp_path)
    (root / "tests" / "test_runner.py").write_text(
        "def test_first(model_runner, requests):\n"
        "    assert model_runner.prepare_input_tensors(requests)[0] is not None\n"
    )
    done = migrate_cli("--check", str(root / "engine"))
    assert done.code == 1
    assert "test_runner.py:2: MIG112" in done.out, done.out


@pytest.mark.slow
def test_callers_are_written_with_their_group(tmp_path: Path, migrate_cli: Any) -> None:
    root = _project(tmp_path)
    done = migrate_cli(str(root / "engine"))
    assert done.code == 1, done.out  # two calls left for a person (MIG112)
    assert "migrated tests/test_runner.py" in done.out.replace(str(root) + "/", "")
    text = (root / "tests" / "test_runner.py").read_text()
    assert "model_input = model_runner.prepare_model_input(requests)" in text
    assert not (root / ".runnercheck-migrate").exists()
    assert migrate_cli("--check", str(root / "engine")).code == 0  # nothing left to change


def test_only_files_that_may_call_a_removed_method_are_parsed_with_libcst() -> None:
    """The ``ast`` pre-check keeps exactly the files with a call the search would look at."""
    from codemods.merge_broadcasts.callers import _may_call

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
    from codemods.merge_broadcasts import callers

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
    from codemods.merge_broadcasts.callers import _SKIP_DIRS, _searched

    p, s = Path(path), Path(start)
    expected = (
        p.suffix == ".py"
        and p.is_relative_to(s)
        and not any(
            part in _SKIP_DIRS or part.startswith(".") for part in p.relative_to(s).parent.parts
        )
    )
    assert _searched(p, s) == expected
