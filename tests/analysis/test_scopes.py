"""Names a statement binds and reads in its own function's scope
(:mod:`runnercheck.analysis.scopes`): comprehensions, lambdas and nested functions
keep what they bind and read through to the enclosing scope."""

from __future__ import annotations

import ast

import pytest

from runnercheck.analysis.scopes import bound, bound_in, loaded, ordered_loads, self_reads


def statement(text: str) -> ast.stmt:
    (node,) = ast.parse(text).body
    return node


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("a, (b, c) = f()", {"a", "b", "c"}),
        ("for i in range(n):\n    total += i", {"i", "total"}),
        ("import os.path as p, sys", {"p", "sys"}),
        ("try:\n    pass\nexcept E as err:\n    del x", {"err", "x"}),
        ("ys = [y for y in xs]", {"ys"}),  # ``y`` is the comprehension's
        ("flag = any((seen := x) for x in xs)", {"flag", "seen"}),  # := leaks out
        ("def helper(a):\n    b = a", {"helper"}),
        ("with open(p) as fh:\n    data = fh.read()", {"fh", "data"}),
    ],
)
def test_bound(text: str, names: set[str]) -> None:
    assert bound(statement(text)) == names


@pytest.mark.parametrize(
    ("text", "names"),
    [
        ("total = a + b.c", {"a", "b"}),
        ("ys = [y * k for y in xs]", {"k", "xs"}),
        ("f = lambda v, *rest: v + w", {"w"}),
        ("def helper(a):\n    b = a\n    return b + c", {"c"}),
    ],
)
def test_loaded(text: str, names: set[str]) -> None:
    assert loaded(statement(text)) == names


def test_a_nested_function_s_star_parameters_are_its_own() -> None:
    assert loaded(statement("def helper(*args, **kwargs):\n    return args, kwargs")) == set()


def test_ordered_loads_and_self_reads() -> None:
    node = statement("out = g(b, a, self.x) + b + self.y")
    assert ordered_loads(node) == ["g", "b", "a", "self"]
    assert self_reads(node) == {"x", "y"}
    assert self_reads(statement("self.z = self.x")) == {"x"}  # a store is no read
    assert bound_in(ast.parse("a = 1\nfor b in c: pass\n").body) == {"a", "b"}
