"""Small readings of ``ast`` nodes (:mod:`runnercheck.analysis.syntax`) the other
analysis modules rest on: dotted names, literals, stubs, imports, module-level
statements. (``walk``, ``unparse`` and ``loaded_names`` against the standard library's
are in ``tests/check/test_syntax_walks.py``.)"""

from __future__ import annotations

import ast

import pytest

from runnercheck.analysis.syntax import (
    dotted,
    is_stub_body,
    last_name,
    literal_text,
    module_level,
    names_in,
    param_defaults,
    params_read,
    read_import,
    read_import_source,
    receiver,
    self_fields,
    top_level_names,
)


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


def body(text: str) -> list[ast.stmt]:
    return ast.parse(text).body


@pytest.mark.parametrize(
    ("text", "name"),
    [
        ("self.model_runner.execute_model", "self.model_runner.execute_model"),
        ("super().execute_model", "super().execute_model"),
        ("get_tp_group().broadcast", "get_tp_group().broadcast"),
        ("x", "x"),
    ],
)
def test_dotted(text: str, name: str) -> None:
    assert dotted(expr(text)) == name


def test_last_name_and_receiver() -> None:
    assert last_name("self.model_runner.execute_model") == "execute_model"
    assert receiver("self.model_runner.execute_model") == "self.model_runner"
    assert (last_name("f"), receiver("f")) == ("f", "")


@pytest.mark.parametrize(
    ("text", "literal"),
    [("None", "None"), ("True", "True"), ("3", "3"), ("-3", "-3"), ("'a'", "'a'")],
)
def test_literal_text(text: str, literal: str) -> None:
    assert literal_text(expr(text)) == literal


@pytest.mark.parametrize("text", ["1.5", "-x", "[1]", "f()", "-'a'"])
def test_literal_text_of_what_is_no_literal(text: str) -> None:
    assert literal_text(expr(text)) is None


def test_stub_bodies() -> None:
    assert is_stub_body(body("'doc'\n..."))
    assert is_stub_body(body("pass"))
    assert is_stub_body(body("raise NotImplementedError('x')"))
    assert is_stub_body(body("raise errors.NotImplementedError"))
    assert not is_stub_body(body("raise ValueError"))
    assert not is_stub_body(body("return 1"))


def test_what_an_expression_reads() -> None:
    node = expr("self.a + f(self.b, self.a.c) + x + y")
    assert self_fields(node, "self") == ("a", "b")
    assert self_fields(node, None) == ()
    assert params_read(node, {"y": 1, "x": 0, "z": 2}) == (0, 1)
    assert names_in(expr('Optional["ModelRunner"]')) == ("Optional", "ModelRunner")


def test_param_defaults_are_the_literal_ones() -> None:
    (func,) = body("def f(a, b=1, *, c=None, d=g(), e='x'): pass")
    assert isinstance(func, ast.FunctionDef)
    assert param_defaults(func.args) == {"b": "1", "c": "None", "e": "'x'"}


def test_imports_as_names_to_their_origin() -> None:
    out: dict[str, str] = {}
    sources: dict[str, tuple[str, str | None, int]] = {}
    for stmt in body(
        "import os.path\nimport numpy as np\nfrom .base import A as B\nfrom ..pkg.mod import C\n"
    ):
        assert isinstance(stmt, (ast.Import, ast.ImportFrom))
        read_import(stmt, out)
        read_import_source(stmt, sources)
    assert out == {"os": "os", "np": "numpy", "B": ".base.A", "C": "..pkg.mod.C"}
    assert sources == {
        "os": ("os", None, 0),
        "np": ("numpy", None, 0),
        "B": ("base", "A", 1),
        "C": ("pkg.mod", "C", 2),
    }


def test_module_level_statements_inside_if_try_and_with() -> None:
    statements = module_level(
        body(
            "import a\n"
            "if TYPE_CHECKING:\n    import b\nelse:\n    import c\n"
            "try:\n    import d\nexcept ImportError:\n    e = None\nfinally:\n    f = 1\n"
            "with ctx():\n    class G: pass\n"
            "def h():\n    import i\n"
        )
    )
    names = top_level_names(statements)
    assert names == {"a", "b", "c", "d", "e", "f", "G", "h"}
