"""What decides a test (:mod:`runnercheck.analysis.decides`): the subject a value is
read as, the rank tests that split the roles, and a test read into a formula."""

from __future__ import annotations

import ast

import pytest

from runnercheck.analysis.conditions import AllOf, AnyOf, Atom, Not
from runnercheck.analysis.decides import (
    MAX_ATOMS,
    dict_items,
    names_something,
    rank_role,
    read_test,
    subject_of,
    value_text,
)

FLAG = "is_driver_worker"


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


@pytest.mark.parametrize(
    ("text", "subject"),
    [
        ("no_spec", "no_spec"),
        ("self.do_metadata_broadcast", "self.do_metadata_broadcast"),
        ("data['no_spec']", "data['no_spec']"),
        ('data.get("no_spec")', "data['no_spec']"),
        ('data.get("no_spec", False)', "data['no_spec']"),
        ("len(seqs)", "len(seqs)"),
        ("get_pp_group().is_first_rank", "get_pp_group().is_first_rank"),
        ("data.get(key)", None),  # a key that is not a literal string
        ("f(x)", None),  # a call with arguments
        ("f(x=1)", None),
        ("a + b", None),
        ("data[k]", None),
    ],
)
def test_subject_of(text: str, subject: str | None) -> None:
    assert subject_of(expr(text)) == subject


def test_value_text_writes_a_literal_behind_equals_and_a_subject_as_it_is() -> None:
    assert value_text(expr("0")) == "=0"
    assert value_text(expr("'x'")) == "='x'"
    assert value_text(expr("request.no_spec")) == "request.no_spec"
    assert value_text(expr("a + b")) == ""


def test_dict_items_of_a_literal_and_of_dict_keywords() -> None:
    assert dict_items(expr('{"k": v, "n": 0, **rest}')) == (("k", "v"), ("n", "=0"))
    assert dict_items(expr("dict(k=v, **rest)")) == (("k", "v"),)
    assert dict_items(expr("dict(other)")) is None
    assert dict_items(expr("make()")) is None
    assert dict_items(None) is None


@pytest.mark.parametrize(
    ("text", "found"),
    [
        ("self.rank == self._driver_rank", ("==", "driver")),
        ("self.rank != self._driver_rank", ("!=", "driver")),
        ("0 == rank", ("==", "driver")),
        ("tp_rank != 0", ("!=", "driver")),
        ("get_tensor_model_parallel_rank() == 0", ("==", "driver")),
        ("get_tp_group().rank_in_group == 0", ("==", "driver")),
        # not the tensor-parallel rank, or not compared with the driver's
        ("get_pp_group().rank_in_group == 0", None),
        ("self.local_rank == 0", None),
        ("self.rank == 1", None),
        ("self.rank < self._driver_rank", None),
        ("self.driver_rank == 0", None),
    ],
)
def test_rank_role(text: str, found: tuple[str, str] | None) -> None:
    node = expr(text)
    assert isinstance(node, ast.Compare)
    assert rank_role(node) == found


def test_the_driver_flag_and_a_rank_test_are_atoms_of_a_role() -> None:
    assert read_test(expr("self.is_driver_worker"), FLAG) == Atom(
        "self.is_driver_worker", role="driver"
    )
    assert read_test(expr("not self.is_driver_worker"), FLAG) == Not(
        Atom("self.is_driver_worker", role="driver")
    )
    assert read_test(expr("self.rank != self._driver_rank"), FLAG) == Not(
        Atom("self.rank", role="driver")
    )
    # another flag is a value like any other
    assert read_test(expr("self.is_driver_worker"), "is_leader") == Atom("self.is_driver_worker")


def test_comparisons_with_a_literal_either_way_round() -> None:
    assert read_test(expr("data['n'] == 0"), FLAG) == Atom("data['n']", "==", "0")
    assert read_test(expr("0 < k"), FLAG) == Atom("k", ">", "0")
    assert read_test(expr("3 > k"), FLAG) == Atom("k", "<", "3")
    assert read_test(expr("3 >= k"), FLAG) == Atom("k", "<=", "3")
    assert read_test(expr("x is None"), FLAG) == Atom("x", "is", "None")
    assert read_test(expr("a == b"), FLAG) == Atom("?a == b")


def test_boolean_structure_is_kept() -> None:
    test = read_test(expr("self.is_driver_worker and (not data or k > 1)"), FLAG)
    assert test == AllOf(
        (
            Atom("self.is_driver_worker", role="driver"),
            AnyOf((Not(Atom("data")), Atom("k", ">", "1"))),
        )
    )


def test_an_unnamed_test_is_an_opaque_atom_at_its_position() -> None:
    test = read_test(expr("f(x) or g(y)"), FLAG)
    assert test == AnyOf((Atom("?1:1"), Atom("?1:9")))
    assert not names_something(test)
    assert names_something(AnyOf((Atom("?1:1"), Not(Atom("k")))))


def test_a_test_of_too_many_atoms_decides_nothing() -> None:
    longest = " and ".join(f"a{i}" for i in range(MAX_ATOMS))
    assert isinstance(read_test(expr(longest), FLAG), AllOf)
    longer = " and ".join(f"a{i}" for i in range(MAX_ATOMS + 1))
    assert read_test(expr(longer), FLAG) == Atom("?1:1")
