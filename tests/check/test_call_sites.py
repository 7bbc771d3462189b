"""A call's :class:`CallSite` holds what its definition says, on every call of real
files: its callee, its positional arguments' count and texts, the names and texts of
its keywords, and whether it passes ``**mapping``; a function's constructions are the
calls that may build a class from values of known classes."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from runnercheck.analysis import syntax
from runnercheck.analysis.dicts import call_site
from runnercheck.analysis.extract import extract_source
from runnercheck.demo.engine import engine_source_dir

REPO = Path(__file__).resolve().parents[2]
FILES = sorted(
    [
        *engine_source_dir("legacy").glob("*.py"),
        *engine_source_dir("merged").glob("*.py"),
        *(REPO / "runnercheck" / "analysis").glob("*.py"),
        *(REPO / "codemods" / "merge_broadcasts").glob("*.py"),
    ]
)

EDGES = """
f()
f(a, b, *c)
f(x=1, **d)
f(**d, y=self.flag)
f(not self.flag, count - 1, k=a + 1, m="s")
self.g(a)(b)
"""


def _calls() -> list[ast.Call]:
    trees = [ast.parse(path.read_bytes()) for path in FILES] + [ast.parse(EDGES)]
    return [node for tree in trees for node in ast.walk(tree) if isinstance(node, ast.Call)]


@pytest.mark.parametrize("nested", [False, True])
def test_a_call_site_holds_what_its_call_says(nested: bool) -> None:
    calls = _calls()
    assert any(kw.arg is None for call in calls for kw in call.keywords)
    for call in calls:
        site = call_site(call, nested=nested)
        assert (site.line, site.col) == (call.lineno, call.col_offset + 1)
        assert site.callee == syntax.dotted(call.func)
        assert site.nargs == len(call.args)
        assert site.args == tuple(syntax.arg_text(a) for a in call.args)
        assert site.keywords == tuple(kw.arg for kw in call.keywords if kw.arg is not None)
        assert site.kwargs == tuple(
            (kw.arg, syntax.arg_text(kw.value)) for kw in call.keywords if kw.arg is not None
        )
        assert site.star_kwargs == any(kw.arg is None for kw in call.keywords)
        assert site.nested is nested


def test_constructions_are_the_calls_that_may_build_a_class_from_known_values() -> None:
    text = (
        "class W:\n"
        "    def f(self, worker: Worker, other):\n"
        "        inner = Proposer(worker)\n"
        "        self.helper(worker)\n"  # a method: builds nothing
        "        log(worker)\n"  # a lower-case callee: not a class
        '        raise ValueError("x")\n'  # a class, but nothing known passed
        "        built = cls(inner, self.scorer)\n"
        "        return Wrapper(inner=inner, plain=other)\n"
    )
    method = extract_source(text, "w.py").classes["W"].methods["f"]
    assert [(c.callee, c.line, c.args, c.kwargs) for c in method.constructions] == [
        ("Proposer", 3, (("Worker",),), ()),
        ("cls", 7, (("Proposer",), ("self.scorer",)), ()),
        ("Wrapper", 8, (), (("inner", ("Proposer",)), ("plain", ()))),
    ]
