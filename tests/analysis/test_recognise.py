"""What the reader recognises in a node (:mod:`runnercheck.analysis.recognise`): which
role a test gives each side, which calls are collectives, guards on literals, the
driver-only marker, and values that cannot be broadcast."""

from __future__ import annotations

import ast

import pytest

from runnercheck.analysis.conditions import Guard
from runnercheck.analysis.recognise import (
    bad_value,
    broadcast_sends,
    classify_collective,
    driver_split,
    guards_of,
    is_driver_only_marker,
    role_of,
)
from runnercheck.contract import VLLM

FLAG = "is_driver_worker"


def expr(text: str) -> ast.expr:
    return ast.parse(text, mode="eval").body


@pytest.mark.parametrize(
    ("test", "roles"),
    [
        ("self.is_driver_worker", ("driver", "non-driver")),
        ("is_driver_worker", ("driver", "non-driver")),
        ("not self.is_driver_worker", ("non-driver", "driver")),
        # ``and``: the body is the driver's, the else anyone's
        ("self.is_driver_worker and data", ("driver", None)),
        # ``or``: only the else is known (every part false)
        ("not self.is_driver_worker or data", (None, "driver")),
        ("self.is_driver_worker or data", (None, "non-driver")),
        ("self.rank == 0", (None, None)),  # a rank test is read by the schedule
        ("self.is_driver", (None, None)),
    ],
)
def test_role_of(test: str, roles: tuple[str | None, str | None]) -> None:
    assert role_of(expr(test), FLAG) == roles


def test_driver_split_of_a_test_s_source() -> None:
    assert driver_split("self.is_driver_worker", FLAG) is True
    assert driver_split(" not self.is_driver_worker ", FLAG) is False
    assert driver_split("self.is_driver_worker and x", FLAG) is None
    assert driver_split("(", FLAG) is None


@pytest.mark.parametrize(
    ("callee", "imports", "name"),
    [
        ("broadcast_tensor_dict", {}, "broadcast_tensor_dict"),
        ("get_tp_group().broadcast_tensor_dict", {}, "broadcast_tensor_dict"),
        ("tensor_model_parallel_all_reduce", {}, "tensor_model_parallel_all_reduce"),
        ("dist.all_reduce", {"dist": "torch.distributed"}, "all_reduce"),
        ("all_gather", {"all_gather": "torch.distributed.all_gather"}, "all_gather"),
        ("self.tp_group.broadcast", {}, "broadcast"),
        ("self.cpu_comm.all_reduce", {}, "all_reduce"),
        # a collective's name on something that is no communicator
        ("np.broadcast", {"np": "numpy"}, None),
        ("all_gather", {}, None),  # a local function of that name
        ("self.model.execute_model", {}, None),
    ],
)
def test_classify_collective(callee: str, imports: dict[str, str], name: str | None) -> None:
    assert classify_collective(callee, imports, VLLM) == name


def test_a_broadcast_sends_with_a_dict_and_receives_without() -> None:
    calls = [expr(t) for t in ("b(d, src=0)", "b(tensor_dict=d)", "b(src=0)")]
    assert [broadcast_sends(c) for c in calls if isinstance(c, ast.Call)] == [True, True, False]


@pytest.mark.parametrize(
    ("test", "guards", "complete"),
    [
        ("align", (Guard("align", "truthy"),), True),
        ("not self.do_metadata_broadcast", (Guard("self.do_metadata_broadcast", "falsy"),), True),
        ("mode == 'dummy'", (Guard("mode", "==", "'dummy'"),), True),
        ("a and b is None", (Guard("a", "truthy"), Guard("b", "is", "None")), True),
        # a conjunct that is no guard: the test may be false while the guards hold
        ("a and f(x)", (Guard("a", "truthy"),), False),
        ("a or b", (), False),
        ("not a == 1", (), False),
    ],
)
def test_guards_of(test: str, guards: tuple[Guard, ...], complete: bool) -> None:
    assert guards_of(expr(test)) == (guards, complete)


@pytest.mark.parametrize(
    ("node", "marks"),
    [
        ('{"driver_only": True}', True),
        ('{"driver_only": True, "other": 1}', True),
        ("dict(driver_only=True)", True),
        ('{"runnercheck": "driver-only"}', True),
        ('dict(runnercheck="driver-only")', True),
        ('{"driver_only": False}', False),
        ('{"driver_only": 1}', False),
        ('{"other": True}', False),
        ("MARKER", False),
    ],
)
def test_is_driver_only_marker(node: str, marks: bool) -> None:
    assert is_driver_only_marker(expr(node)) is marks


def test_a_configured_marker_key() -> None:
    assert is_driver_only_marker(expr('{"local": True}'), key="local")
    assert not is_driver_only_marker(expr('{"driver_only": True}'), key="local")


@pytest.mark.parametrize(
    ("value", "imports", "why"),
    [
        ("lambda x: x", {}, "a lambda"),
        ("(x for x in y)", {}, "a generator"),
        ("threading.Lock()", {"threading": "threading"}, "a threading.Lock object"),
        ("open('f')", {}, "an open file"),
        ("torch.cuda.Stream()", {"torch": "torch"}, "a device stream or event"),
        ("nn.Linear(1, 2)", {"nn": "torch.nn"}, "an nn.Module (nn.Linear(...))"),
        ("self.model", {}, "an nn.Module (self.model)"),
        ("Lock()", {}, None),  # not threading's
        ("torch.tensor([1])", {"torch": "torch"}, None),
        ("self.model_config", {}, None),
    ],
)
def test_bad_value(value: str, imports: dict[str, str], why: str | None) -> None:
    found = bad_value(expr(value), "self", imports)
    assert (found is None) if why is None else (found is not None and found.startswith(why))
