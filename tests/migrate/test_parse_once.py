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
