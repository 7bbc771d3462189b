"""``codemods.toolkit.positions.measure``: one print of a module gives what LibCST's position
metadata and ``code_for_node`` give, node by node; ``cstutil.module_code`` gives
``module.code`` without printing again; ``cstutil.children``, ``find_all`` (whitespace,
comments and punctuation aside), ``walk`` and ``name_uses`` meet the nodes LibCST's
visit meets, in its order."""

from __future__ import annotations

from pathlib import Path

import libcst as cst
import pytest
from libcst._nodes.base import CSTCodegenError
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods.toolkit import cstutil, node_index
from codemods.toolkit.positions import Lines, measure, measure_sizes
from runnercheck.demo.engine import engine_source_dir

#: Shapes whose start differs from where their code starts: decorators, comments and
#: blank lines owned by a statement, parentheses, a line ending other than the first
#: line's, a line continuation, a statement with no trailing newline.
TRICKY = (
    "# a comment\n"
    "\n"
    "@decorator(\n"
    "    1)\n"
    "class A(  # trailing\n"
    "    Base):\n"
    '    """Doc."""\n'
    "\n"
    "    # owned by f\n"
    "    def f(self, x: int = (1 +\r\n"
    "            2)) -> None:\r\n"
    "        y = [z for z in (x,)] ; w = \\\n"
    "            y\n"
    "        if (a and\n"
    "                b):\n"
    "            return\n"
    "        else:\n"
    "            pass\n"
    "try:\n"
    "    pass\n"
    "except (E) as e:\n"
    "    raise\n"
    "finally:\n"
    "    ((yield))"
)


#: What the layout pass sizes: lines, statements, blocks, expressions.
SIZED = (
    cst.EmptyLine,
    cst.BaseStatement,
    cst.BaseSmallStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.Finally,
    cst.BaseExpression,
)


#: What the layout pass sizes, which ``measure_sizes`` sizes in its print.
LAID_OUT = (
    cst.EmptyLine,
    cst.BaseStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.Finally,
)


def _sources() -> list[tuple[str, str]]:
    engine = sorted(p for p in engine_source_dir("legacy").rglob("*.py") if p.name != "__init__.py")
    return [("tricky", TRICKY), *((p.name, p.read_text()) for p in engine)]


@pytest.mark.slow
@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_measure_agrees_with_position_metadata_and_code_for_node(name: str, text: str) -> None:
    module = cst.parse_module(text)
    measured = measure(module)
    assert measured.code == module.code
    positions = MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider)
    assert len(positions) > 20
    for node, where in positions.items():
        assert measured.starts[id(node)] == (where.start.line, where.start.column), node
        if isinstance(node, SIZED):  # (code_for_node prints these out of context)
            assert measured.size(node) == module.code_for_node(node).count("\n"), node
    lines = Lines(module)
    for node, where in positions.items():
        assert lines.line(node) == where.start.line
    sized = measure_sizes(module)
    assert sized.code == module.code
    for node in positions:
        if isinstance(node, SIZED):
            assert id(node) in sized.sizes or not isinstance(node, LAID_OUT), node
            assert sized.size(node) == measured.size(node), node


def test_the_printer_prints_every_node_as_libcst_does() -> None:
    """``cstutil.code``/``node_code``/``module_code`` (LibCST's code generation without
    its position hook) print each node as ``code_for_node`` does, in modules indented
    and ending their lines otherwise too."""
    parsed = cst.parse_module(TRICKY + "\n" + min((t for _, t in _sources()[1:]), key=len))
    variants = [parsed, parsed.with_changes(default_indent="\t", default_newline="\r\n")]
    checked = 0
    for module in variants:
        assert cstutil.module_code(module) == module.code
        for node in cstutil.find_all(module, lambda n: True):
            try:
                expected = module.code_for_node(node)
            except CSTCodegenError:  # a node that does not print out of context
                with pytest.raises(CSTCodegenError):
                    cstutil.node_code(module, node)
                continue
            assert cstutil.node_code(module, node) == expected, node
            assert cstutil.public_print_code(node, *_layout(module)) == expected, node
            assert cstutil.code(node) == cst.Module(body=[]).code_for_node(node), node
            checked += 1
    assert checked > 100


def _layout(module: cst.Module) -> tuple[str, str]:
    return module.default_indent, module.default_newline


def test_module_code_is_the_parsed_text_then_the_printed_one(tmp_path: Path) -> None:
    data = b"x = 1\r\ny = 2\r\n"
    module = cstutil.parse_module(data)
    assert cstutil.module_code(module) == module.code == data.decode()
    changed = module.with_changes(body=module.body[:1])
    assert cstutil.module_code(changed) == "x = 1\r\n"
    mixed = cstutil.parse_module(b"a = 1\nb = 2\r\nc = 3\r\n")  # spelled-out line endings
    assert cstutil.module_code(mixed) == mixed.code == "a = 1\nb = 2\r\nc = 3\r\n"


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_children_and_walks_meet_the_nodes_a_visit_meets(name: str, text: str) -> None:
    module = cst.parse_module(text)
    visited: list[cst.CSTNode] = []

    class Recorder(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            visited.append(node)
            return True

    module.visit(Recorder())
    searched = [n for n in visited if n is module or type(n) not in node_index.TRIVIA]
    assert [id(n) for n in cstutil.find_all(module, lambda n: True)] == [id(n) for n in searched]
    for node in visited:
        assert [id(c) for c in cstutil.children(node)] == [id(c) for c in node.children]
    walked: list[cst.CSTNode] = []

    class Walker(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            walked.append(node)
            return not isinstance(node, cst.FunctionDef)  # a pruned subtree stays unvisited

    pruned: list[cst.CSTNode] = []

    class Pruned(cst.CSTVisitor):
        def on_visit(self, node: cst.CSTNode) -> bool:
            pruned.append(node)
            return not isinstance(node, cst.FunctionDef)

    cstutil.walk(module, Walker())
    module.visit(Pruned())
    assert [id(n) for n in walked] == [id(n) for n in pruned]
    by_visit = cstutil._NameUses()
    module.visit(by_visit)
    loads, stores = cstutil.name_uses(module)
    assert [id(n) for n in loads] == [id(n) for n in by_visit.loads]
    assert [id(n) for n in stores] == [id(n) for n in by_visit.stores]
    assert loads and stores


def test_without_the_internal_code_generation_measure_falls_back_to_metadata(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A LibCST whose internal code generation state moved: the same starts and sizes
    come from its public metadata and ``code_for_node``."""
    import codemods.toolkit.codegen_positions as fast

    def moved(module: cst.Module) -> None:
        raise ImportError("cannot import name 'CodegenState'")

    module = cst.parse_module(TRICKY)
    expected = measure(module)
    monkeypatch.setattr(fast, "print_measured", moved)
    again = cst.parse_module(TRICKY)
    fallback = measure(again)
    assert fallback.sizes == {}  # the fallback ran
    assert fallback.code == expected.code
    pairs = list(zip(_nodes(module), _nodes(again), strict=True))
    assert len(pairs) > 20
    for old, new in pairs:
        assert type(old) is type(new)
        assert fallback.starts[id(new)] == expected.starts[id(old)], new
        if isinstance(new, SIZED):
            assert fallback.size(new) == expected.size(old), new


def _nodes(module: cst.Module) -> list[cst.CSTNode]:
    """Every node with a position, in the order LibCST's metadata visits them."""
    return list(MetadataWrapper(module, unsafe_skip_copy=True).resolve(PositionProvider))


@pytest.mark.parametrize(("name", "text"), _sources())
def test_a_line_counted_within_a_statement_is_the_line_in_the_module(name: str, text: str) -> None:
    """``Lines.line_in`` prints one class or method alone and counts from the line
    ``ast`` gives its ``class``/``def``: every node under it gets the same line as a
    measure of the whole module (decorators, owned comments and CRLF included)."""
    import ast

    def preorder(node: ast.AST) -> list[ast.AST]:
        return [node, *(n for child in ast.iter_child_nodes(node) for n in preorder(child))]

    kinds = (ast.ClassDef, ast.FunctionDef)
    scopes = [n for n in preorder(ast.parse(text)) if isinstance(n, kinds)]
    module = cst.parse_module(text)
    whole = Lines(module)
    defs = cstutil.find_all(module, lambda n: isinstance(n, (cst.ClassDef, cst.FunctionDef)))
    assert [d.name.value for d in defs] == [s.name for s in scopes]  # type: ignore[attr-defined]
    checked = 0
    for scope, facts in zip(defs, scopes, strict=True):
        within = Lines(module)
        for node in cstutil.find_all(scope, lambda n: True)[1:]:
            expected = whole.line(node)
            if expected:
                assert within.line_in(scope, facts.lineno, node) == expected, (name, node)
                checked += 1
        assert within._measured is None, "only the statement was printed"
    assert checked > 10


@pytest.mark.parametrize(("name", "text"), _sources(), ids=[n for n, _ in _sources()])
def test_a_line_counted_within_a_kept_statement_is_the_line_in_the_module(
    name: str, text: str
) -> None:
    """With the module's kept text, ``Lines.line_in`` prints only the innermost
    statement of the scope's blocks that holds the node, and counts from the line the
    kept text says it starts on: every node gets the line a measure of the whole module
    gives; the scope itself is printed only for the nodes of its own header."""
    import ast

    from codemods.toolkit.kept_text import kept_text

    text = text if text.endswith("\n") else text + "\n"  # (a kept text needs a final line break)
    tree = ast.parse(text)
    kinds = (ast.ClassDef, ast.FunctionDef)
    scopes = [n for n in ast.walk(tree) if isinstance(n, kinds)]
    scopes.sort(key=lambda n: (n.lineno, n.col_offset))
    module = cst.parse_module(text)
    kept = kept_text(module, tree, text)
    assert kept is not None
    whole = Lines(module)
    defs = cstutil.find_all(module, lambda n: isinstance(n, (cst.ClassDef, cst.FunctionDef)))
    assert [d.name.value for d in defs] == [s.name for s in scopes]  # type: ignore[attr-defined]
    checked = 0
    for scope, facts in zip(defs, scopes, strict=True):
        assert isinstance(scope, (cst.ClassDef, cst.FunctionDef))
        within = Lines(module, lambda: kept)
        body = scope.body.body if isinstance(scope.body, cst.IndentedBlock) else []
        inner = [n for statement in body for n in cstutil.find_all(statement, lambda n: True)]
        for node in inner:
            expected = whole.line(node)
            if expected:
                assert within.line_in(scope, facts.lineno, node) == expected, (name, node)
                checked += 1
        assert id(scope) not in within._scopes, "the scope was printed for a statement's node"
        header = [n for n in cstutil.find_all(scope, lambda n: True) if n not in inner]
        for node in header:
            expected = whole.line(node)
            if expected:
                assert within.line_in(scope, facts.lineno, node) == expected, (name, node)
        assert within._measured is None, "the whole module was measured"
    assert checked > 10
