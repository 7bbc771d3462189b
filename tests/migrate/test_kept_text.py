"""A rewritten module writes the statements it keeps from its parsed module as the text
they were read from (:mod:`codemods.toolkit.kept_text`): the same text a print gives, with the
print left to what the rewrite made."""

from __future__ import annotations

import ast
import shutil
from pathlib import Path

import libcst as cst
import pytest

from codemods.framework.pipeline import migrate
from codemods.toolkit import cstutil, layout, node_index, positions
from codemods.toolkit.codegen_positions import print_sized, printed_within
from codemods.toolkit.kept_text import Kept, kept_text
from runnercheck.demo.engine import engine_source_dir
from tests.migrate.test_positions import TRICKY

FIXTURES = Path(__file__).parent / "fixtures"

#: Blocks of every kind read, comments a block ends with (owned by it, or by the
#: statement after it), a CRLF line, ``elif`` chains, one-line suites, decorators over
#: several lines, ``async`` statements, a class whose body is one line.
KINDS = (
    "import os\n"
    "\n"
    "\n"
    "@decorator(\n"
    "    1,\n"
    ")\n"
    "\n"
    "@other\n"
    "async def f(x):\n"
    "    async with a as b, c:\n"
    "        pass\n"
    "    async for i in x:\n"
    "        yield i\n"
    "        # owned by the block\n"
    "    # owned by what follows\n"
    "    while x:\r\n"
    "        x -= 1\n"
    "    else:\n"
    "        x = 2\n"
    "    if x: return 1\n"
    "    elif x > 1:\n"
    "        return 2\n"
    "\n"
    "        # the block's last lines\n"
    "\n"
    "    else:\n"
    "        try:\n"
    "            pass\n"
    "        except E:\n"
    "            for j in x: pass\n"
    "        except (F, G) as e:\n"
    "            raise\n"
    "        else:\n"
    "            pass\n"
    "        finally:\n"
    "            x = (\n"
    "                1\n"
    "            )\n"
    "class C: pass\n"
    "class D(C):\n"
    "    x = 1; y = 2\n"
    "\n"
    "    def g(self):\n"
    "        return [\n"
    "            1,\n"
    "        ]\n"
    "# the module's last comment\n"
)


#: No decorator, no header: only where its statements start and end tells its lines.
PLAIN = "x = 1\n\n\ndef f():\n    a = 1\n\n    b = 2\nc = 3\n"


def _sources() -> list[tuple[str, str]]:
    files = [
        *(("legacy", p) for p in sorted(engine_source_dir("legacy").rglob("*.py"))),
        *(("before", p) for p in sorted((FIXTURES / "engine" / "before").rglob("*.py"))),
    ]
    return [
        ("tricky", TRICKY + "\n"),
        ("kinds", KINDS),
        *((f"{where}/{p.name}", p.read_text()) for where, p in files if p.read_text().strip()),
    ]


def _kept(text: str) -> tuple[cst.Module, Kept]:
    module = cstutil.parse_module(text.encode())
    kept = kept_text(module, ast.parse(text), text)
    assert kept is not None
    return module, kept


def _statements_in_blocks(module: cst.Module) -> list[cst.BaseStatement]:
    found: list[cst.BaseStatement] = list(module.body)
    for node in node_index.nodes(module):
        if isinstance(node, cst.IndentedBlock):
            found.extend(node.body)
    return found


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_each_statement_has_the_text_it_prints_where_it_stands(name: str, text: str) -> None:
    module, kept = _kept(text)
    statements = _statements_in_blocks(module)
    assert statements
    assert {id(s) for s in statements} == set(kept.texts)
    for statement in statements:
        written, indents = kept.texts[id(statement)]
        assert written == printed_within(statement, module, indents), cstutil.code(statement)


def test_the_statements_read_fill_the_text() -> None:
    module, kept = _kept(KINDS)
    top = "".join(kept.texts[id(s)][0] for s in module.body)
    assert top == KINDS.removesuffix("# the module's last comment\n")
    cls = module.body[-1]
    assert isinstance(cls, cst.ClassDef)
    assert kept.texts[id(cls.body.body[-1])][1] == ("    ",)


@pytest.mark.parametrize(
    ("text", "tree"),
    [
        # the tree is not of this text: its lines are one further down
        (KINDS, "\n" + KINDS),
        (PLAIN, "\n" + PLAIN),
        # nor this one: its last statement ends before the text does
        (PLAIN.replace("c = 3\n", "c = (\n    3\n)\n"), PLAIN),
        # nor this one: a blank line moved within a block
        (PLAIN, PLAIN.replace("    a = 1\n\n    b = 2\n", "\n    a = 1\n    b = 2\n")),
        # nor this one: a statement less
        (KINDS, KINDS.replace("    x = 1; y = 2\n", "    x = 1\n")),
        # a decorator whose expression starts on a line after its ``@``
        ("@(\n    deco\n)\ndef f():\n    pass\n", None),
        # the last line has no line break
        ("x = 1\ny = 2", None),
    ],
    ids=[
        "lines-shifted",
        "lines-shifted-plain",
        "last-statement-longer",
        "blank-line-moved",
        "statement-missing",
        "decorator-below-its-at",
        "no-last-line-break",
    ],
)
def test_a_text_whose_lines_do_not_line_up_gives_none(text: str, tree: str | None) -> None:
    module = cstutil.parse_module(text.encode())
    assert kept_text(module, ast.parse(text if tree is None else tree), text) is None


def _rewritten(module: cst.Module) -> cst.Module:
    """A rewrite of ``KINDS``: a new class holding kept statements (one method as it
    was, one moved to the top level, where it is indented otherwise), new lines."""
    cls = module.body[-1]
    assert isinstance(cls, cst.ClassDef)
    kept_line, method = cls.body.body
    assert isinstance(method, cst.FunctionDef)
    added = cst.parse_statement("z = 3\n")
    new_cls = cls.with_changes(body=cls.body.with_changes(body=[added, kept_line, method]))
    moved = method.with_changes(leading_lines=[cst.EmptyLine()])
    assert isinstance(moved, cst.FunctionDef)
    top = cst.parse_statement("def h():\n    return 1\n")
    assert isinstance(top, cst.FunctionDef)
    indented = top.with_changes(body=top.body.with_changes(body=[*top.body.body, method]))
    return module.with_changes(body=[*module.body[:-1], new_cls, indented, method])


def test_a_rewritten_module_writes_what_it_keeps_and_prints_the_rest() -> None:
    module, kept = _kept(KINDS)
    new = _rewritten(module)
    code, sizes, written = print_sized(new, kept)
    plain, plain_sizes, none = print_sized(new)
    assert code == plain == new.code
    assert not none
    cls, nested, last = new.body[-3:]
    assert isinstance(cls, cst.ClassDef) and isinstance(nested, cst.FunctionDef)
    assert id(cls) not in written
    assert {id(s) for s in module.body[:-1]} <= written
    assert id(cls.body.body[1]) in written and id(cls.body.body[2]) in written
    # the method inside ``h`` stands one level deeper than it was read: printed there;
    # the same node at the top level stands where it was read
    assert id(last) in written
    assert sizes[id(cls)] == plain_sizes[id(cls)] and sizes[id(nested)] == plain_sizes[id(nested)]
    for key, size in sizes.items():
        assert plain_sizes[key] == size


def test_a_module_indented_otherwise_is_printed() -> None:
    module, kept = _kept(KINDS)
    other = module.with_changes(default_indent="\t")
    code, _, written = print_sized(other, kept)
    assert code == other.code and not written


@pytest.mark.parametrize("limit", [30, 40])
def test_the_layout_pass_lays_out_the_same_with_kept_text(limit: int) -> None:
    """New long lines right after kept statements, and inside a new class beside kept
    ones: the same statements laid out, the same text."""
    module, kept = _kept(KINDS)
    new = _rewritten(module)
    long = cst.parse_statement("value = function(first_argument, second_argument)\n")
    new = new.with_changes(body=[*new.body[:2], long, *new.body[2:], long])
    without = layout.wrap_long_statements(new, KINDS, limit)
    with_kept = layout.wrap_long_statements(new, KINDS, limit, kept)
    assert cstutil.module_code(with_kept) == cstutil.module_code(without)
    assert with_kept.code == without.code != new.code


@pytest.mark.parametrize("cached", [False, True], ids=["first-run", "facts-from-the-cache"])
def test_migrate_writes_the_statements_it_keeps(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cached: bool
) -> None:
    """Also when the facts of the files come from the cache (no ``ast`` of the run)."""
    tree = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), tree)
    cache = tmp_path / "cache" if cached else None
    if cache is not None:
        first = migrate([str(tree)], cache_root=cache)
        assert any(cache.rglob("*")) and first.changes
    written: list[int] = []
    measure = positions.measure_sizes

    def spy(module: cst.Module, kept: Kept | None = None) -> positions.Measured:
        measured = measure(module, kept)
        written.append(len(measured.written))
        return measured

    monkeypatch.setattr(layout, "measure_sizes", spy)
    result = migrate([str(tree)], cache_root=cache)
    assert result.changes and len(written) >= 2
    assert all(count > 0 for count in written), written


@pytest.mark.vllm
def test_every_statement_of_a_real_release_has_its_printed_text() -> None:
    """The worker and runner files of vLLM 0.5.0 (what ``migrate`` rewrites there)."""
    from tests.migrate.test_vllm import source_root

    files = sorted((source_root("0.5.0") / "vllm" / "worker").glob("*.py"))
    assert len(files) > 5
    for path in files:
        text = path.read_text()
        if not text:
            continue  # (an empty ``__init__.py``: no statement, no last line break)
        module, kept = _kept(text)
        for statement in _statements_in_blocks(module):
            written, indents = kept.texts[id(statement)]
            assert written == printed_within(statement, module, indents), path


def test_the_run_counts_lines_from_kept_text_only_where_it_has_the_ast() -> None:
    """``Planned.lines`` counts a node's line in a print of its statement alone when the
    run holds the file's ``ast`` (or read its kept text already); with facts from the
    cache and no kept text yet, it prints the method, as it did, rather than parse the
    file with ``ast`` for it."""
    from codemods.merge_broadcasts.planned import Planned

    path = FIXTURES / "engine" / "before" / "model_runner.py"
    data = path.read_bytes()
    for trees in ({path: ast.parse(data)}, None):
        planned = Planned({path: data}, trees)
        module = planned.module(path)
        cdef = next(s for s in module.body if isinstance(s, cst.ClassDef))
        method = next(s for s in cstutil.body_of(cdef.body) if isinstance(s, cst.FunctionDef))
        statement = cstutil.body_of(method.body)[-1]
        node = cstutil.find_all(statement, cst.Name)[0]
        lines = planned.lines(path)
        expected = positions.Lines(module).line(node)
        def_line = next(
            n.lineno
            for n in ast.walk(ast.parse(data))
            if isinstance(n, ast.FunctionDef) and n.name == method.name.value
        )
        assert lines.line_in(method, def_line, node) == expected
        if trees is not None:
            assert id(method) not in lines._scopes and id(statement) in lines._scopes
        else:
            assert id(method) in lines._scopes and path not in planned._kept
            planned.kept_text(path)  # read for the layout pass: then it is used
            assert planned.lines(path).line_in(method, def_line, statement) == lines.line(statement)
            assert id(statement) in lines._scopes
