"""The engine variants are built from the shipped legacy engine and one edit each
(:mod:`tests.migrate.variants`): an edit applies exactly or stops with where it does not."""

from __future__ import annotations

import pytest

from tests.migrate import variants
from tests.migrate.variants import DiffError, apply_diff, make_diff

OLD = {"runner.py": "a\nb\nc\nd\ne\nf\ng\nh\n", "keep.py": "x\n"}
NEW = {"runner.py": "a\nb\nc\nD\ne\nf\ng\nh\nI\n", "added.py": "new\n", "keep.py": "x\n"}


def test_a_diff_made_here_applies_back() -> None:
    diff = make_diff(OLD, NEW)
    assert "keep.py" not in diff and "--- /dev/null\n+++ b/added.py\n" in diff
    assert apply_diff(OLD, diff) == NEW
    assert apply_diff(NEW, make_diff(NEW, OLD)) == OLD


def test_a_changed_context_line_stops_with_the_file_and_line() -> None:
    diff = make_diff(OLD, NEW)
    moved = {**OLD, "runner.py": OLD["runner.py"].replace("c\n", "C\n")}
    with pytest.raises(DiffError, match=r"does not apply to runner\.py: its line 3 is 'C\\n'"):
        apply_diff(moved, diff, "v.diff")
    # no fuzz: the same lines one further down are not taken for them
    shifted = {**OLD, "runner.py": "0\n" + OLD["runner.py"]}
    with pytest.raises(DiffError, match="its line 1 is '0"):
        apply_diff(shifted, diff)
    with pytest.raises(DiffError, match=r"added\.py is created but already exists"):
        apply_diff({**OLD, "added.py": "mine\n"}, diff)


def test_each_variant_is_the_legacy_engine_with_its_own_edit() -> None:
    legacy = {f: (variants.LEGACY / f).read_text() for f in variants.GPU_FILES}
    for name, variant in variants.VARIANTS.items():
        before = variants.before(name)
        base = variants.before(variant.base) if variant.base else legacy
        # the legacy files a variant leaves alone are the shipped engine's, to the byte
        same = [f for f in base if before.get(f) == base[f]]
        assert "worker_base.py" in same and before != base, name
        assert variants.after(name)  # the golden applies as well
