"""Notes cite lines of the rewritten files, not of the files as they were."""

from __future__ import annotations

from pathlib import Path

from codemods.framework.pipeline import MERGE, migrate
from codemods.toolkit.positions import line_map
from tests.migrate.conftest import FIXTURES, copy_tree


def test_line_map_follows_kept_and_rewritten_lines() -> None:
    old = "a = 1\nclass X(Base):\n    pass\nreturn False\n"
    new = "import y\na = 1\n\nclass XInput:\n    z: int\n\nclass X(Base[XInput]):\n    pass\nreturn False\n"
    to_new = line_map(old, new)
    assert [to_new(n) for n in (1, 2, 3, 4)] == [2, 7, 8, 9]


def test_runner_and_worker_notes_cite_the_new_lines(tmp_path: Path) -> None:
    work = copy_tree(FIXTURES / "engine" / "before", tmp_path / "engine")
    result = migrate([work], select=(MERGE,))
    cited = [
        (Path(p), line, text)
        for group in result.groups
        for p, line, text in [
            *group.worker_notes,
            *(n for r in group.runners for n in r.notes),
        ]
    ]
    assert cited
    for path, line, text in cited:
        new_line = result.changes[path].new.decode().splitlines()[line - 1].strip()
        if "now derives from" in text:
            assert new_line.startswith("class PoolingModelRunner("), new_line
        elif "returns False here" in text:
            assert new_line == "return False", new_line
        elif "outside the worker's step" in text:
            assert "self.execute_model(" in new_line, new_line
