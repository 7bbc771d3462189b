"""migrate formats the lines it writes with the target's own formatter (yapf here,
as vLLM 0.4-0.5 did), and leaves the other lines byte-identical."""

from __future__ import annotations

import warnings
from pathlib import Path

import pytest

from codemods.framework.pipeline import MERGE, migrate
from codemods.toolkit.formatting import changed_ranges, find_formatter, format_change, layout_note
from tests.migrate.conftest import FIXTURES, copy_tree

with warnings.catch_warnings():
    warnings.simplefilter("ignore", (DeprecationWarning, PendingDeprecationWarning))
    from yapf.yapflib import yapf_api


def test_the_formatter_is_read_from_the_project_configuration(tmp_path: Path) -> None:
    package = tmp_path / "pkg" / "sub"
    package.mkdir(parents=True)
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.ruff]\nline-length = 80\n")
    assert find_formatter(package) is None
    (tmp_path / "pkg" / "requirements-dev.txt").write_text("ruff==0.1.5\nyapf==0.32.0\n")
    find_formatter.cache_clear()
    found = find_formatter(package)
    assert found is not None
    assert (found.tool, found.pin, found.declared_by) == (
        "yapf",
        "0.32.0",
        "requirements-dev.txt: yapf==0.32.0",
    )
    (tmp_path / "pkg" / "pyproject.toml").write_text("[tool.black]\nline-length = 88\n")
    find_formatter.cache_clear()
    found = find_formatter(package / "x.py")
    assert found is not None and found.tool == "black"


def test_only_the_changed_lines_are_formatted(tmp_path: Path) -> None:
    (tmp_path / ".style.yapf").write_text("[style]\nbased_on_style = pep8\n")
    old = "x = [1,\n     2]\ny = 3\n"
    new = "x = [1,\n     2]\ny = f( 3,\n  4)\n"
    assert changed_ranges(old, new) == [(3, 4)]
    assert format_change(tmp_path / "m.py", old, new) == "x = [1,\n     2]\ny = f(3, 4)\n"


@pytest.mark.parametrize("config", ['[tool.yapf]\nbased_on_style = "pep8"\n', None])
def test_rewritten_lines_are_clean_under_the_targets_yapf(
    tmp_path: Path, config: str | None
) -> None:
    work = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    if config is not None:
        (tmp_path / "pyproject.toml").write_text(config)
    else:  # no style configured, a yapf pin in the lint requirements: yapf's pep8
        (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 80\n")
        (tmp_path / "requirements-lint.txt").write_text("yapf==0.32.0\ntoml==0.10.2\n")
    find_formatter.cache_clear()
    result = migrate([work], select=(MERGE,))
    assert result.changes
    for path, change in result.changes.items():
        old = None if change.old is None else change.old.decode()
        new = change.new.decode()
        ranges = changed_ranges(old, new)
        again, _ = yapf_api.FormatCode(new, style_config="pep8", lines=ranges)
        assert again == new, path.name


def test_a_formatter_that_cannot_run_keeps_the_own_layout_and_says_so(tmp_path: Path) -> None:
    (tmp_path / "pyproject.toml").write_text("[tool.black]\nline-length = 88\n")
    find_formatter.cache_clear()
    found = find_formatter(tmp_path)
    assert found is not None
    if found.available:
        pytest.skip("black is installed here")
    assert format_change(tmp_path / "m.py", "x = 1\n", "x = f( 1 )\n") == "x = f( 1 )\n"
    assert layout_note(found) == (
        "black (named by pyproject.toml [tool.black]) cannot be imported here: "
        "the rewritten lines keep the migration's own layout"
    )
