"""Constants and the branches they decide (:mod:`runnercheck.analysis.constants`):
``self.X`` constant for a class (a class attribute, a property returning a literal,
the only ``self.X = <literal>``, along the MRO), guards under bindings, and the
parameters a call binds."""

from __future__ import annotations

import pytest

from runnercheck.analysis.conditions import Condition, Guard
from runnercheck.analysis.constants import (
    UNKNOWN,
    branch_taken,
    call_bindings,
    conditions_hold,
    holds,
)
from runnercheck.analysis.hierarchy import MethodRef
from runnercheck.analysis.model import CallSite
from tests.analysis.sources import class_named, project_of

CLASSES = """\
from vllm.sequence import Unknown


class Base:
    do_metadata_broadcast = True
    mode = "eager"

    @property
    def driver_rank(self):
        return 0

    def execute_model(self):
        if self.do_metadata_broadcast and self.mode == "eager":
            pass
        if self.driver_rank == 0:
            pass


class Single(Base):
    do_metadata_broadcast = False


class SetInInit(Base):
    def __init__(self):
        self.use_cache = False

    def step(self):
        if self.use_cache:
            pass


class SetTwice(SetInInit):
    def reset(self):
        self.use_cache = True


class Computed(Base):
    @property
    def driver_rank(self):
        return self.rank


class Method(Base):
    def driver_rank(self):
        return 0


class FromUnread(Unknown):
    def step(self):
        if self.flag:
            pass
"""


def test_a_self_constant_along_the_mro() -> None:
    p = project_of({"acme/c.py": CLASSES})
    constants = p.constants

    def value(cls: str, attr: str) -> str:
        return constants.self_constant(class_named(p, cls), attr)

    assert value("Base", "do_metadata_broadcast") == "True"
    assert value("Single", "do_metadata_broadcast") == "False"  # the subclass's wins
    assert value("Single", "mode") == "'eager'"
    assert value("Single", "driver_rank") == "0"  # a property returning a literal
    assert value("Computed", "driver_rank") == UNKNOWN
    assert value("Method", "driver_rank") == UNKNOWN  # a bound method, not its result
    assert value("SetInInit", "use_cache") == "False"  # the only assignment
    assert value("SetTwice", "use_cache") == UNKNOWN  # two different values
    assert value("FromUnread", "flag") == UNKNOWN  # a base not read may set it
    assert value("Base", "missing") == UNKNOWN


def test_self_bindings_are_the_constants_a_guard_tests() -> None:
    p = project_of({"acme/c.py": CLASSES})
    assert p.constants.self_bindings(class_named(p, "Single")) == {
        "self.do_metadata_broadcast": "False",
        "self.mode": "'eager'",
        "self.driver_rank": "0",
    }
    assert p.constants.self_bindings(class_named(p, "SetInInit"), "worker") == {
        "worker.do_metadata_broadcast": "True",
        "worker.mode": "'eager'",
        "worker.driver_rank": "0",
        "worker.use_cache": "False",
    }


@pytest.mark.parametrize(
    ("guard", "value", "result"),
    [
        (Guard("x", "truthy"), "0", False),
        (Guard("x", "falsy"), "0", True),
        (Guard("x", "is", "None"), "None", True),
        (Guard("x", "is not", "None"), "None", False),
        (Guard("x", "==", "'a'"), "'a'", True),
        (Guard("x", "!=", "'a'"), "'b'", True),
        (Guard("x", "==", "3"), "-3", False),
        (Guard("x", "truthy"), UNKNOWN, None),
        (Guard("y", "truthy"), "1", None),  # not bound
    ],
)
def test_holds(guard: Guard, value: str, result: bool | None) -> None:
    assert holds(guard, {"x": value}) is result


def test_which_side_of_a_branch_may_run() -> None:
    a, b = Guard("a", "truthy"), Guard("b", "truthy")
    assert branch_taken((a, b), True, {"a": "True", "b": "True"}) == (True, False)
    assert branch_taken((a, b), True, {"a": "True", "b": "False"}) == (False, True)
    assert branch_taken((a, b), True, {"a": "True"}) == (True, True)  # b unknown
    # guards that are not the whole test: the else may run while they all hold
    assert branch_taken((a,), False, {"a": "True"}) == (True, True)
    assert branch_taken((), True, {}) == (True, True)
    inside = (Condition((a,), then=True), Condition((b,), then=False))
    assert conditions_hold(inside, {"a": "True", "b": "False"})
    assert not conditions_hold(inside, {"a": "True", "b": "True"})


def test_a_call_binds_literal_arguments_known_names_and_defaults() -> None:
    p = project_of(
        {
            "acme/f.py": """\
            class Runner:
                def _add_dummy(self, seqs, align=True, mode="x", count=0):
                    pass
            """
        }
    )
    runner = class_named(p, "Runner")
    ref = MethodRef(runner, runner.methods["_add_dummy"])
    call = CallSite(
        line=1,
        col=1,
        callee="self._add_dummy",
        args=("seqs", "False"),
        kwargs=(("count", "n"), ("mode", "other")),
    )
    bound = call_bindings(call, ref, {"n": "3"}, self_bound=True)
    assert bound == {"seqs": UNKNOWN, "align": "False", "mode": UNKNOWN, "count": "3"}
