"""The analysis's own cheap readings of ``ast`` trees give what the standard library's
give: :func:`syntax.walk` the nodes of ``ast.walk`` in its order, :func:`syntax.unparse`
the text of ``ast.unparse``."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runnercheck.analysis import syntax
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
