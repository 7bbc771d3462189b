"""``migrate`` reads the facts of an unchanged file from the facts cache
(:mod:`runnercheck.workspace.cache`): a second run parses no original file with ``ast``,
a changed file is read again, and the result is the same as without the cache."""

from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from codemods.framework import pipeline
from codemods.framework.pipeline import MigrateResult, migrate
from runnercheck.demo.engine import engine_source_dir
from runnercheck.workspace.cache import CACHE_DIR

from .conftest import snapshot


def _outcome(result: MigrateResult) -> tuple[object, ...]:
    return (
        {p: (c.old, c.new, c.codemods) for p, c in result.changes.items()},
        [(r.code, r.path, r.line, r.message) for r in result.refusals],
        [(n.path, n.line, n.message) for n in result.notes],
        result.files_parsed,
        result.files_cst,
    )


def _counting_reads(monkeypatch: pytest.MonkeyPatch) -> Counter[str]:
    """How often ``migrate`` extracts the facts of each file (by path)."""
    reads: Counter[str] = Counter()
    real_extract = pipeline.extract_tree

    def counting_extract(tree: ast.Module, path: str, *args: Any, **kwargs: Any) -> Any:
        reads[Path(path).name] += 1
        return real_extract(tree, path, *args, **kwargs)

    monkeypatch.setattr(pipeline, "extract_tree", counting_extract)
    return reads


def test_a_second_run_reads_the_facts_of_unchanged_files_from_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    first = migrate([tree], cache_root=tmp_path)  # extracts as without a cache, and stores
    assert first.changes
    assert (tmp_path / CACHE_DIR).is_dir()

    reads = _counting_reads(monkeypatch)
    second = migrate([tree], cache_root=tmp_path)
    assert not reads, reads
    assert _outcome(second) == _outcome(first)


@pytest.mark.slow
def test_the_files_of_a_group_keep_their_loaded_names_in_the_cache(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The names a group's file reads (the rewrite keeps the imports they use) are read
    from its ``ast`` once: stored with its facts, a later run parses it no more; an
    entry stored while the file was in no group gets them the first time it is."""
    from runnercheck.analysis import syntax

    read: Counter[str] = Counter()
    real = syntax.loaded_names

    def counting(tree: ast.Module) -> frozenset[str]:
        read[str(len(tree.body))] += 1
        return real(tree)

    monkeypatch.setattr(syntax, "loaded_names", counting)
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    migrate([tree], select=("self-return",), cache_root=tmp_path)  # stored with no group
    assert not read
    first = migrate([tree], cache_root=tmp_path)
    groups = {p for g in first.groups for p in g.used_before}
    assert groups and sum(read.values()) == len(groups), "read once per file of a group"
    read.clear()
    second = migrate([tree], cache_root=tmp_path)
    assert not read, "the cache held them"
    assert _outcome(second) == _outcome(first)
    assert _outcome(migrate([tree])) == _outcome(first)


def test_a_changed_file_is_read_again(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    first = migrate([tree], cache_root=tmp_path)
    runner = next(p for p in first.changes if p.name == "model_runner.py")
    changed = runner.read_bytes() + b"\nLIMIT = 1\n"
    runner.write_bytes(changed)

    reads = _counting_reads(monkeypatch)
    second = migrate([tree], cache_root=tmp_path)
    assert reads == {runner.name: 1}, "the changed file alone is read again"
    assert second.changes[runner].old == changed
    assert second.changes[runner].new.endswith(b"\nLIMIT = 1\n")
    assert second.changes.keys() == first.changes.keys()


def test_the_cli_keeps_the_cache_under_the_project_root_and_no_cache_bypasses_it(
    tmp_path: Path, migrate_cli: Any
) -> None:
    project = tmp_path / "project"
    tree = project / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    (project / "pyproject.toml").write_text("[project]\nname = 'engine'\n")
    before = snapshot(tree)

    bypassed = migrate_cli("--diff", "--no-cache", str(tree))
    assert not (project / CACHE_DIR).exists()
    cached = migrate_cli("--diff", str(tree))
    assert any((project / CACHE_DIR).rglob("*")), "the facts were stored"
    assert bypassed == cached
    assert bypassed.code == 1 and bypassed.out
    assert snapshot(tree) == before, "--diff writes no source"
