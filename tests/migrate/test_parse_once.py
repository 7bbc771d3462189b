"""``migrate`` reads each file's meaning with ``ast`` once per run: planning, grouping,
the single-class codemods and verification all use those facts (only rewritten text
is parsed again, to verify it)."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from codemods.framework.pipeline import migrate
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


def test_a_module_several_groups_generate_is_verified_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both groups of the legacy engine generate the same ``model_runner_base.py`` and
    ``worker_input.py``: the second verification takes the first one's tree, compile
    and facts (the same bytes), and still compares its own context."""
    from codemods.framework import verify

    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    parses: Counter[str] = Counter()
    facts: Counter[str] = Counter()
    real_parse, real_facts = verify.parse, verify.facts

    def counting_parse(path: Path, source: Any) -> ast.Module:
        parses[path.name] += 1
        return real_parse(path, source)

    def counting_facts(path: Path, *args: Any) -> Any:
        facts[path.name] += 1
        return real_facts(path, *args)

    monkeypatch.setattr(verify, "parse", counting_parse)
    monkeypatch.setattr(verify, "facts", counting_facts)
    result = migrate([tree], plain_mypy=False)
    assert len(result.groups) == 2
    created = [p.name for p, change in result.changes.items() if change.old is None]
    assert sorted(created) == ["model_runner_base.py", "worker_input.py"]
    for name in created:
        assert (parses[name], facts[name]) == (1, 1), name


def test_each_group_file_is_parsed_with_libcst_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Two groups share one base module and its helpers: each group's files are still
    parsed with LibCST once in the run (whole, or with the function bodies no question
    asks about left out: :mod:`codemods.toolkit.unparsed`), and each group planned once."""
    import libcst as cst

    from codemods.merge_broadcasts import planned
    from codemods.toolkit import unparsed

    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    originals = {p.read_bytes(): p for p in tree.rglob("*.py")}
    parses: Counter[Path] = Counter()
    plans: Counter[str] = Counter()
    real_parse, real_plan = cst.parse_module, planned.plan_group

    real_unparsed = unparsed.parse

    def counting_parse(source: Any, *args: Any, **kwargs: Any) -> cst.Module:
        data = source.encode() if isinstance(source, str) else source
        if data in originals:
            parses[originals[data]] += 1
        return real_parse(source, *args, **kwargs)

    def counting_unparsed(data: bytes, *args: Any) -> cst.Module | None:
        found = real_unparsed(data, *args)
        if found is not None:
            parses[originals[data]] += 1
        return found

    def counting_plan(group: Any, *args: Any, **kwargs: Any) -> Any:
        plans[group.label] += 1
        return real_plan(group, *args, **kwargs)

    monkeypatch.setattr(cst, "parse_module", counting_parse)
    monkeypatch.setattr(unparsed, "parse", counting_unparsed)
    monkeypatch.setattr(planned, "plan_group", counting_plan)
    result = migrate([tree])
    assert len(result.groups) >= 2, "the legacy engine has two groups"
    created = [p for p, c in result.changes.items() if c.old is None]
    assert any(p.name == "model_runner_base.py" for p in created)
    assert parses and max(parses.values()) == 1, {p.name: n for p, n in parses.items()}
    assert plans and max(plans.values()) == 1, plans


def test_a_tree_with_nothing_to_rewrite_imports_no_libcst(tmp_path: Path) -> None:
    """``migrate --check`` on a merged tree (a pre-commit hook's usual case) decides from
    the analysis alone: LibCST is never imported."""
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("merged"), tree)
    code = (
        "import sys; from codemods.framework.pipeline import migrate; r = migrate([sys.argv[1]]); "
        "print(len(r.changes), r.files_parsed > 0, r.files_cst, 'libcst' in sys.modules)"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, str(tree)], capture_output=True, text=True, check=True
    )
    assert proc.stdout.split() == ["0", "True", "0", "False"]


def test_the_shared_helpers_plan_each_group_once(monkeypatch: pytest.MonkeyPatch) -> None:
    """The engine fixture's directory holds two groups (GPU and CPU); each group's
    rewrite asks for the directory's shared helpers, which plan every group of the
    directory: once per run, not once per group asking."""
    from codemods.merge_broadcasts import planned as planned_module
    from tests.migrate.conftest import FIXTURES

    planned: Counter[str] = Counter()
    real_plan = planned_module.plan_group

    def counting_plan(group: Any, *args: Any, **kwargs: Any) -> Any:
        planned[group.label] += 1
        return real_plan(group, *args, **kwargs)

    monkeypatch.setattr(planned_module, "plan_group", counting_plan)
    result = migrate([FIXTURES / "engine" / "before"], plain_mypy=False)  # (planning only)
    assert len(result.groups) == 2 and not result.refusals
    assert sorted(planned.values()) == [1, 1], planned


#: A module whose imports a rewrite edits: decorators, comments, a statement after a
#: ``;``, a bracketed statement over several lines and non-ASCII text after them.
_IMPORTS = (
    "'''Doc.'''\n"
    "import os\n"
    "from typing import (Any, Dict,\n"
    "                    List, Tuple)  # names\n"
    "from x import y; z = 1\n"
    "\n"
    "# a comment\n"
    "@decorate(\n"
    "    Any)\n"
    "class A(Base):  # é\n"
    "    s = 'ü' + str(Dict)\n"
    "    def f(self) -> List[int]:\n"
    "        return [(1,\n"
    "                 2)]\n"
    "\n"
    "def g(): return y\n"
)


@pytest.mark.parametrize(
    ("old", "new"),
    [
        (_IMPORTS, _IMPORTS.replace("(Any, Dict,\n", "(Any, Dict,\n").replace(", Tuple)", ")")),
        (_IMPORTS, _IMPORTS.replace("from typing import (Any, Dict,\n", "from typing import (\n")),
        (_IMPORTS, _IMPORTS.replace("(Any, Dict,\n                    List, Tuple)", "List")),
        (_IMPORTS, _IMPORTS.replace("import os\n", "")),
        (_IMPORTS, _IMPORTS.replace("from x import y; z = 1\n", "z = 1\n")),
        (_IMPORTS, _IMPORTS.replace("\n# a comment\n", "# a comment\n")),
        (_IMPORTS, _IMPORTS.replace("import os\n", "import os\nimport sys\n\n")),
        (_IMPORTS, _IMPORTS.replace("'''Doc.'''\n", "")),
        (_IMPORTS, _IMPORTS.replace("\n", "\r\n").replace("import os\r\n", "")),
        (_IMPORTS, _IMPORTS.replace("\n", "\r").replace("import os\r", "")),  # parsed whole
        (_IMPORTS, _IMPORTS.replace("@decorate(\n", "@decorate(\nAny,\n")),  # parsed whole
        (_IMPORTS, _IMPORTS.replace("import os\n", "if x:\n    import os\n")),
    ],
)
def test_a_text_edited_at_its_top_is_reparsed_as_a_whole_parse_gives_it(old: str, new: str) -> None:
    """``verify.reparse`` (the statements a rewrite left as they were, moved; the lines
    before them parsed) gives what ``ast.parse`` of the new text gives, positions
    included."""
    from codemods.framework import verify

    path = Path("m.py")
    assert old != new
    expected = ast.dump(ast.parse(new), include_attributes=True)
    assert ast.dump(verify.reparse(path, ast.parse(old), old, new), include_attributes=True) == (
        expected
    )


def test_a_text_edited_at_its_top_is_parsed_only_there(monkeypatch: pytest.MonkeyPatch) -> None:
    from codemods.framework import verify

    parsed: list[str] = []
    real = verify.parse

    def recording(path: Path, source: bytes | str) -> ast.Module:
        parsed.append(str(source))
        return real(path, source)

    monkeypatch.setattr(verify, "parse", recording)
    new = _IMPORTS.replace("import os\n", "")
    tree = verify.reparse(Path("m.py"), ast.parse(_IMPORTS), _IMPORTS, new)
    assert parsed == [new[: new.index("from typing")]]  # the lines before those kept
    dump = ast.dump(tree, include_attributes=True)
    assert dump == ast.dump(ast.parse(new), include_attributes=True)


def test_the_line_limit_is_read_once_per_directory(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine fixture's directory holds two groups: each group's rewrite and its
    shared worker input ask for the directory's line limit, which is read (a search for
    configuration files in every directory above) once per run, and is the one the
    nearest configuration sets."""
    from codemods.toolkit import layout
    from tests.migrate.conftest import FIXTURES

    tree = tmp_path / "engine"
    shutil.copytree(FIXTURES / "engine" / "before", tree)
    (tmp_path / "pyproject.toml").write_text("[tool.ruff]\nline-length = 100\n")
    reads: Counter[Path] = Counter()
    limits: list[int] = []
    real_limit = layout.line_limit

    def counting_limit(start: Path) -> int:
        here = start if start.is_dir() else start.parent
        reads[here] += 1
        limits.append(real_limit(start))
        return limits[-1]

    monkeypatch.setattr(layout, "line_limit", counting_limit)
    result = migrate([tree])
    assert len(result.groups) == 2 and not result.refusals
    assert reads and max(reads.values()) == 1, reads
    assert set(limits) == {100}
