"""The control-flow skeleton of a function (:mod:`runnercheck.analysis.steps`, read
through the real file reader): calls in evaluation order, what a local name is bound
to, loops with their counts and first values, ``try`` blocks, exits and assertions."""

from __future__ import annotations

import ast

import pytest

from runnercheck.analysis.conditions import AnyOf, Atom
from runnercheck.analysis.model import (
    AssertStep,
    BindStep,
    CallStep,
    ExitStep,
    LoopStep,
    Step,
    TryStep,
)
from runnercheck.analysis.steps import range_count
from tests.analysis.sources import facts_of

SOURCE = """\
from vllm.distributed import broadcast_tensor_dict


class Worker:
    def execute_model(self, request=None):
        data = broadcast_tensor_dict(src=0)
        k = data["k"]
        n = broadcast_tensor_dict(src=0)["n"]
        sent = {"k": k, "n": 0}
        no_spec = k == 0 or request.disable
        flag = True
        for i in range(1, k + 1):
            self.inner.step(i)
        for item in items:
            self.inner.step(item)
        try:
            self.outer(self.inner.prepare(k))
        except ValueError:
            raise
        finally:
            self.cleanup()
        assert data["n"] > 0
        return sent
"""


def steps() -> tuple[Step, ...]:
    return facts_of(SOURCE).classes["Worker"].methods["execute_model"].steps


def test_what_each_name_is_bound_to() -> None:
    binds = {s.name: s for s in steps() if isinstance(s, BindStep)}
    assert binds["data"].value == "@6:16"  # the result of the call there
    assert binds["k"].value == "data['k']"
    assert binds["n"].value == "@8:13['n']"  # a key of the result of the call there
    assert (binds["sent"].value, binds["sent"].keys) == ("{}", (("k", "k"), ("n", "=0")))
    assert binds["no_spec"].test == AnyOf((Atom("k", "==", "0"), Atom("request.disable")))
    assert binds["flag"].value == "=True"


def test_a_loop_s_first_value_and_where_it_ends() -> None:
    loops = [s for s in steps() if isinstance(s, LoopStep)]
    assert [(loop.count, loop.first, loop.line, loop.end_line) for loop in loops] == [
        # a count only for ``range(N)``; the first value of ``range(1, ...)`` too
        (None, ("i", "1"), 12, 13),
        (None, None, 14, 15),
    ]


def test_calls_in_evaluation_order_inside_try() -> None:
    (block,) = [s for s in steps() if isinstance(s, TryStep)]
    body = [s.callee for s in block.body if isinstance(s, CallStep)]
    assert body == ["self.inner.prepare", "self.outer"]  # the argument runs first
    assert [type(s) for s in block.handlers[0]] == [ExitStep]
    assert [s.callee for s in block.finalbody if isinstance(s, CallStep)] == ["self.cleanup"]


def test_an_assertion_and_the_return() -> None:
    found = steps()
    (check,) = [s for s in found if isinstance(s, AssertStep)]
    assert check.test == Atom("data['n']", ">", "0")
    assert isinstance(found[-1], ExitStep) and found[-1].kind == "return"


@pytest.mark.parametrize(
    ("text", "count"),
    [
        ("range(n)", "n"),
        ("range(max(k, 1))", "max(k, 1)"),
        ("range(2, n)", None),
        ("range(n, 0, -1)", None),
        ("items", None),
    ],
)
def test_range_count(text: str, count: str | None) -> None:
    assert range_count(ast.parse(text, mode="eval").body) == count
