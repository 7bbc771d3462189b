"""``migrate`` reads each file's meaning with ``ast`` once per run: planning, grouping,
the single-class codemods and verification all use those facts (only rewritten text
is parsed again, to verify it)."""

from __future__ import annotations

import ast
import shutil
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from codemods.pipeline import migrate
from runnercheck.demo.engine import engine_source_dir


def test_each_original_file_is_parsed_once(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    originals = {p.read_bytes(): p for p in tree.rglob("*.py")}
    parses: Counter[Path] = Counter()
    real_parse = ast.parse

    def counting_parse(source: Any, *args: Any, **kwargs: Any) -> ast.Module:
        data = source.encode() if isinstance(source, str) else source
        if data in originals:
            parses[originals[data]] += 1
        return real_parse(source, *args, **kwargs)

    monkeypatch.setattr(ast, "parse", counting_parse)
    result = migrate([tree])
    assert result.changes, "the legacy engine has something to migrate"
    assert parses, "the run read the files"
    assert max(parses.values()) == 1, {p.name: n for p, n in parses.items() if n > 1}


def test_the_shared_helpers_plan_each_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine fixture's directory holds two groups (GPU and CPU); each group's
    rewrite asks for the directory's shared helpers, which plan every group of the
    directory: once per run, not once per group asking."""
    from codemods.merge_broadcasts import shared_helpers
    from tests.migrate.conftest import FIXTURES

    planned: Counter[str] = Counter()
    real_plan = shared_helpers.plan_group

    def counting_plan(group: Any, *args: Any, **kwargs: Any) -> Any:
        planned[group.label] += 1
        return real_plan(group, *args, **kwargs)

    monkeypatch.setattr(shared_helpers, "plan_group", counting_plan)
    result = migrate([FIXTURES / "engine" / "before"])
    assert len(result.groups) == 2 and not result.refusals
    assert sorted(planned.values()) == [1, 1], planned
