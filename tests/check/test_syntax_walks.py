"""The analysis's own cheap readings of ``ast`` trees give what the standard library's
give: :func:`syntax.walk` the nodes of ``ast.walk`` in its order, :func:`syntax.unparse`
the text of ``ast.unparse``, :func:`syntax.loaded_names` the names of ``ast.walk``'s
``Name`` nodes; an annotation names a dict type where the pattern finds one."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runnercheck.analysis import extract, syntax
from runnercheck.demo.engine import engine_source_dir

REPO = Path(__file__).resolve().parents[2]
#: The engine's files and the analysis's own: every kind of statement and expression.
FILES = sorted(
    [
        *engine_source_dir("legacy").glob("*.py"),
        *engine_source_dir("merged").glob("*.py"),
        *(REPO / "runnercheck" / "analysis").glob("*.py"),
        *(REPO / "codemods" / "merge_broadcasts").glob("*.py"),
    ]
)

#: Shapes next to the plain ones, which the general unparser writes otherwise.
EDGES = """
a: X[int,]
c: X[()]
d: X[Y[a, b], c.d, None]
e: (1).real
f: x()[a]
g: x[a][b]
h: x[a].b
i: X[a:b]
j: X[...]
k: X["Y", Z]
l: X[a, (b, c)]
m: A | None
n: X[None]
o: Optional[torch.Tensor]
p = count - 1
q = a - b - c
r = a - (b - c)
s = a ** b ** c
t = (a ** b) ** c
u = a * (b + c) @ d // e % f / g
v = (a | b) & c ^ d << 1 >> 2
w = x[1] + y.z[a, b] * 10
x = -1 + a
y = a + 1.5 + "s" + True
z = (a + b)[c]
"""


def _trees() -> list[ast.Module]:
    return [ast.parse(path.read_bytes()) for path in FILES] + [ast.parse(EDGES)]


def test_walk_gives_the_nodes_of_ast_walk_in_its_order() -> None:
    for tree in _trees():
        for node in [tree, *tree.body]:
            walked = syntax.walk(node)
            assert len(walked) == len(list(ast.walk(node)))
            assert all(a is b for a, b in zip(walked, ast.walk(node), strict=True))


@pytest.mark.parametrize("tree", _trees(), ids=[*(p.name for p in FILES), "edges"])
def test_unparse_writes_what_ast_unparse_writes(tree: ast.Module) -> None:
    kinds = (ast.Name, ast.Attribute, ast.Subscript, ast.Constant, ast.BinOp)
    nodes = [n for n in ast.walk(tree) if isinstance(n, kinds)]
    for node in nodes:
        assert syntax.unparse(node) == ast.unparse(node), ast.dump(node)


def test_unparse_writes_the_plain_shapes_itself() -> None:
    plain = ["x", "x.y.z", "None", "X[a]", "X[a, b.c]", "Dict[str, List[torch.Tensor]]"]
    for text in plain:
        assert syntax._plain_text(ast.parse(text, mode="eval").body) == text
    others = ["X[a,]", "X[()]", "(1).real", "x()[a]", "X[1]", "X['a']", "A | None"]
    for text in others:
        assert syntax._plain_text(ast.parse(text, mode="eval").body) is None, text


def test_unparse_writes_arithmetic_on_plain_operands_itself() -> None:
    plain = [
        "count - 1",
        "a - b - c",
        "a - (b - c)",
        "a ** b ** c",
        "(a ** b) ** c",
        "a * (b + c)",
        "(a | b) & c ^ d << 1 >> 2",
        "x[i] + y.z[a, b] * 10",
        "A | None",
    ]
    for text in plain:
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.BinOp)
        assert syntax._binop_text(node, syntax._TOP) == ast.unparse(node) == text
    # an operand the plain path does not write: the general unparser writes the whole
    for text in ["-1 + a", "a + 1.5", "a + 's'", "a + True", "f(a) + b", "(a + b)[c] * 2"]:
        node = ast.parse(text, mode="eval").body
        assert isinstance(node, ast.BinOp)
        assert syntax._binop_text(node, syntax._TOP) is None, text


def _names_dict_by_pattern(annotation: ast.expr) -> bool:
    """The definition: a dict type's name as a word of a name, an attribute, a
    keyword's or parameter's name, or a constant's ``repr``."""
    texts = []
    for node in ast.walk(annotation):
        if isinstance(node, ast.Name):
            texts.append(node.id)
        elif isinstance(node, ast.Attribute):
            texts.append(node.attr)
        elif isinstance(node, ast.Constant):
            texts.append(repr(node.value))
        elif isinstance(node, (ast.keyword, ast.arg)):
            texts.append(node.arg or "")
    return any(extract._DICT_ANNOTATION.search(text) for text in texts)


def test_an_annotation_names_a_dict_as_the_pattern_finds_it() -> None:
    edges = [
        "Dict[str, int]",
        "typing.Mapping",
        "'MutableMapping[str, Any]'",
        "my_dict",
        "Dictionary",
        "dict_of_tensors",
        "a·Dict",  # a word boundary inside a non-ASCII name
        "a·dictionary",
        "Optional['dict']",
        "Callable[..., dict]",
        "f(dict=1)",
        "List[int]",
    ]
    annotations = [ast.parse(text, mode="eval").body for text in edges]
    for tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.arg) and node.annotation is not None:
                annotations.append(node.annotation)
    found = [extract._names_dict(a) for a in annotations]
    assert found == [_names_dict_by_pattern(a) for a in annotations]
    assert found[:12] == [
        True,
        True,
        True,
        False,
        False,
        False,
        True,
        False,
        True,
        True,
        True,
        False,
    ]


@pytest.mark.parametrize("tree", _trees(), ids=[*(p.name for p in FILES), "edges"])
def test_loaded_names_are_the_names_of_ast_walk(tree: ast.Module) -> None:
    expected = {n.id for n in ast.walk(tree) if isinstance(n, ast.Name)}
    assert syntax.loaded_names(tree) == expected
