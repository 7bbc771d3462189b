"""``migrate``'s nesting guard bounds most statements by the length of their lines
instead of walking their expressions (``runnercheck.deep.too_deep`` given the source):
it answers what the whole walk answers, the depth it reports included, on code nested
just within and just beyond the limit in each place an expression can stand."""

from __future__ import annotations

import ast

import pytest

from runnercheck import deep

#: Expressions that nest densely, ``depth`` levels deep (brackets nest at most 200 deep:
#: Python's tokenizer stops there).
DENSE = {
    "minus": lambda depth: "-" * depth + "x",
    "attributes": lambda depth: "x" + ".a" * depth,
    "sum": lambda depth: " + ".join(["x"] * depth),
}

#: Places an expression stands: in a simple statement or in a compound one's head.
PLACES = {
    "assignment": "y = {}\n",
    "nested assignment": "def f():\n    if x:\n        y = {}\n",
    "decorator": "@{}\ndef f():\n    pass\n",
    "default": "def f(a={}):\n    pass\n",
    "base": "class C({}):\n    pass\n",
    "if": "if {}:\n    pass\nelse:\n    pass\n",
    "while": "while {}:\n    pass\n",
    "for": "for i in {}:\n    pass\n",
    "with": "with {}:\n    pass\n",
    "except": "try:\n    pass\nexcept {}:\n    pass\n",
    "match": "match {}:\n    case 1:\n        pass\n",
    "case guard": "match x:\n    case 1 if {}:\n        pass\n",
}


def _both(source: str) -> tuple[str | None, str | None]:
    """(the whole walk's answer, the bound's), parsed as ``migrate`` parses."""

    def answers() -> tuple[str | None, str | None]:
        data = source.encode()
        tree = ast.parse(data)
        return deep.too_deep(tree), deep.too_deep(tree, data)

    return deep.call(answers)


@pytest.mark.parametrize("dense", sorted(DENSE))
@pytest.mark.parametrize("place", sorted(PLACES))
@pytest.mark.parametrize("depth", [2_990, 3_200])
def test_the_bound_answers_what_the_walk_answers(dense: str, place: str, depth: int) -> None:
    source = PLACES[place].format(DENSE[dense](depth))
    walked, bounded = _both(source)
    assert bounded == walked
    assert (walked is None) == (depth < 3_000)


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_every_line_ending(newline: str) -> None:
    deep_line = "y = " + "-" * 3_100 + "x"
    source = newline.join(["def f():", "    " + deep_line, "    return 1", "z = 1", ""])
    walked, bounded = _both(source)
    assert walked is not None and bounded == walked
    assert _both(source.replace("-" * 3_100, "-" * 10)) == (None, None)


def test_a_starred_tuple_holds_more_levels_than_characters() -> None:
    """The one shape whose levels outnumber its characters (the bound's factor of 2)."""
    tree = ast.parse("a[*b]", mode="eval")
    subscript = tree.body
    assert isinstance(subscript, ast.Subscript) and isinstance(subscript.slice, ast.Tuple)
    starred = subscript.slice.elts[0]
    assert (subscript.slice.col_offset, subscript.slice.end_col_offset) == (
        starred.col_offset,
        starred.end_col_offset,
    )
    assert deep.nesting(subscript.slice) == 3 > len("*b")
