"""A tree that names no formatter is formatted in the style its files already follow:
here the shipped engine's GPU files laid out by yapf's default (pep8) style, with no
configuration file anywhere (a plain copy)."""

from __future__ import annotations

import difflib
import warnings
from pathlib import Path

import pytest

from codemods.framework.pipeline import MERGE, migrate
from codemods.toolkit import formatting
from tests.migrate import variants

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from yapf.yapflib import yapf_api

PEP8 = "{based_on_style: pep8}"


def _yapf(text: str) -> str:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return str(yapf_api.FormatCode(text, style_config=PEP8)[0])


def _yapf_lines(text: str) -> int:
    diff = difflib.unified_diff(text.splitlines(), _yapf(text).splitlines(), lineterm="", n=0)
    return sum(1 for d in diff if d.startswith("+") and not d.startswith("+++"))


def _yapf_tree(tmp_path: Path) -> Path:
    """The GPU engine (``gpu_only``) reformatted whole by yapf pep8, built here."""
    tree = {name: _yapf(text) for name, text in variants.before("gpu_only").items()}
    return variants.write(tree, tmp_path / "engine")


@pytest.mark.slow
def test_an_unconfigured_yapf_tree_is_rewritten_in_yapf_style(tmp_path: Path) -> None:
    root = _yapf_tree(tmp_path)
    found = formatting.formatter_for(root / "model_runner.py")
    assert found is not None and (found.tool, found.style) == ("yapf", PEP8), found
    result = migrate([root], select=(MERGE,))
    assert result.changes
    for path, change in result.changes.items():
        new = change.new.decode()
        old = change.old.decode() if change.old is not None else ""
        # every line yapf would change was there before; none is new
        assert _yapf_lines(new) <= _yapf_lines(old), (path.name, _yapf(new))
        read = set(old.splitlines())
        assert all(len(line) <= 79 for line in new.splitlines() if line not in read), path.name


def test_with_no_style_that_fits_lines_keep_to_the_longest_line_at_most_80(
    tmp_path: Path,
) -> None:
    (tmp_path / "a.py").write_text("x = {'a':1}  # not any formatter's layout\n" + "y = 1\n")
    assert formatting.infer_formatter(tmp_path.resolve()) is None
    assert formatting.inferred_limit(tmp_path.resolve()) == 41
    (tmp_path / "b.py").write_text("z = 1  # " + "x" * 120 + "\n")
    formatting.inferred_limit.cache_clear()
    formatting.infer_formatter.cache_clear()
    assert formatting.inferred_limit(tmp_path.resolve()) == 80


@pytest.mark.slow
def test_a_hand_edit_the_formatter_was_not_run_on_still_tells_the_style(tmp_path: Path) -> None:
    root = _yapf_tree(tmp_path)
    runner = root / "model_runner.py"
    runner.write_text(runner.read_text() + "\n_UNFORMATTED = {'a':1}\n")
    found = formatting.infer_formatter(root.resolve())
    assert found is not None and found.style == PEP8
    assert "differ in 2 lines" in found.declared_by  # (and a blank line before it)


def test_the_blank_lines_above_a_new_statement_are_the_formatters(tmp_path: Path) -> None:
    """yapf puts one blank line between module-level variables: a ``TypeVar`` written
    after one with two blank lines above gets one."""
    old = "import os\n\nx = 1\n\n\nclass A:\n    pass\n"
    (tmp_path / "a.py").write_text(old)
    new = old.replace("x = 1\n", "x = 1\n\n\nT = TypeVar('T')\n")
    assert formatting.format_change(tmp_path / "a.py", old, new) == _yapf(new)
    assert "x = 1\n\nT = TypeVar('T')\n\n\nclass A:" in _yapf(new)
