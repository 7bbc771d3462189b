"""One recogniser per concept of the contract, read from ``ast``: collectives (and the
step-metadata broadcast among them), values that cannot be broadcast, the driver flag
in a condition, and the driver-only marker of a dataclass field.
"""

from __future__ import annotations

import ast
import re

from runnercheck.analysis.conditions import Guard, Role
from runnercheck.analysis.syntax import dotted, last_name, literal_text, receiver, str_const
from runnercheck.contract import (
    DRIVER_ONLY_KEY,
    DRIVER_ONLY_METADATA_KEY,
    DRIVER_ONLY_METADATA_VALUE,
    Contract,
)

#: ``torch.distributed`` (and group-communicator) operations that are collectives.
COLLECTIVE_NAMES = frozenset(
    {
        "broadcast",
        "broadcast_object",
        "broadcast_object_list",
        "broadcast_tensor_dict",
        "all_reduce",
        "all_gather",
        "all_gather_object",
        "all_gather_into_tensor",
        "all_to_all",
        "all_to_all_single",
        "reduce",
        "reduce_scatter",
        "reduce_scatter_tensor",
        "gather",
        "gather_object",
        "scatter",
        "scatter_object_list",
        "barrier",
        "monitored_barrier",
    }
)
#: Free functions named like vLLM's ``tensor_model_parallel_all_reduce``.
_PARALLEL_HELPER = re.compile(
    r"^(tensor|pipeline|model|sequence|data|expert)_(model_)?parallel_"
    r"(all_reduce|all_gather|gather|broadcast|reduce_scatter|all_to_all|barrier)\w*$"
)
#: Modules whose functions of a collective name are collectives.
_DISTRIBUTED_ORIGINS = ("torch.distributed", "distributed", "xla_model", "parallel_state")

_STREAM_NAMES = frozenset({"Stream", "current_stream", "default_stream", "Event", "ExternalStream"})
_DEVICE_MODULES = ("cuda", "xpu", "npu", "mps", "accelerator")

_LOCK_NAMES = frozenset(
    {"Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore", "Event", "Barrier"}
)


# ----------------------------------------------------------- value checks


def bad_value(node: ast.expr, self_name: str | None, imports: dict[str, str]) -> str | None:
    """Why a value syntactically cannot be pickled or broadcast, or None."""
    if isinstance(node, ast.Lambda):
        return "a lambda"
    if isinstance(node, ast.GeneratorExp):
        return "a generator"
    if isinstance(node, ast.Call):
        callee = dotted(node.func)
        name = last_name(callee)
        recv = receiver(callee)
        origin = imports.get(callee.split(".", 1)[0], "")
        full = origin + callee[len(callee.split(".", 1)[0]) :] if origin else callee
        if name in _LOCK_NAMES and ("threading" in full or "multiprocessing" in full):
            return f"a {full} object"
        if name == "open" and recv in ("", "io", "builtins"):
            return "an open file"
        if name in _STREAM_NAMES and (
            any(f".{device}." in f".{full}." for device in _DEVICE_MODULES)
            or (full.startswith("torch.") and name != "Event")
        ):
            return f"a device stream or event ({callee}())"
        parts = full.split(".")
        if len(parts) >= 2 and parts[-2] == "nn" and name[:1].isupper():
            return f"an nn.Module ({callee}(...))"
        return None
    if (
        self_name is not None
        and isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == self_name
        and node.attr == "model"
    ):
        return f"an nn.Module ({self_name}.model)"
    return None


def broadcast_sends(call: ast.Call) -> bool:
    """A broadcast call that sends a dict (positionally or as ``tensor_dict=``); the
    receiving side calls it without one."""
    return bool(call.args) or any(kw.arg == "tensor_dict" for kw in call.keywords)


def is_step_broadcast(callee: str, broadcast_function: str) -> bool:
    """``callee`` (``"get_tp_group().broadcast_tensor_dict"``) is the contract's
    step-metadata broadcast, whatever object or module it is called on."""
    return last_name(callee) == broadcast_function


def driver_split(test_source: str, flag: str) -> bool | None:
    """For the source of an ``if`` test: True when its body is the driver's path and its
    ``else`` the other ranks' (``self.is_driver_worker``), False for the reverse
    (``not self.is_driver_worker``), None when it does not split by role."""
    try:
        test = ast.parse(test_source.strip(), mode="eval").body
    except SyntaxError:
        return None
    roles = role_of(test, flag)
    if roles == ("driver", "non-driver"):
        return True
    if roles == ("non-driver", "driver"):
        return False
    return None


def classify_collective(callee: str, imports: dict[str, str], contract: Contract) -> str | None:
    """The collective's name if ``callee`` is a collective, else None."""
    name = last_name(callee)
    if is_step_broadcast(callee, contract.broadcast_function):
        return name
    recv = receiver(callee)
    if not recv:
        if _PARALLEL_HELPER.match(name):
            return name
        if name in COLLECTIVE_NAMES:
            origin = imports.get(name, "")
            if any(part in origin for part in _DISTRIBUTED_ORIGINS):
                return name
        return None
    if name not in COLLECTIVE_NAMES and not _PARALLEL_HELPER.match(name):
        return None
    head = recv.split(".", 1)[0]
    origin = imports.get(head, head)
    full_recv = origin + recv[len(head) :]
    if any(part in full_recv for part in _DISTRIBUTED_ORIGINS):
        return name
    if "group" in recv.lower() or "comm" in last_name(recv).lower():
        return name
    return None


# ---------------------------------------------------------------- roles


def role_of(test: ast.expr, flag: str) -> tuple[Role | None, Role | None]:
    """(role when the test is true, role when it is false)."""
    if (isinstance(test, ast.Attribute) and test.attr == flag) or (
        isinstance(test, ast.Name) and test.id == flag
    ):
        return "driver", "non-driver"
    if isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not):
        then_role, else_role = role_of(test.operand, flag)
        return else_role, then_role
    if isinstance(test, ast.BoolOp):
        roles = [role_of(value, flag) for value in test.values]
        if isinstance(test.op, ast.And):
            then = next((r[0] for r in roles if r[0] is not None), None)
            return then, None
        orelse = next((r[1] for r in roles if r[1] is not None), None)
        return None, orelse
    return None, None


_COMPARE = {ast.Is: "is", ast.IsNot: "is not", ast.Eq: "==", ast.NotEq: "!="}


def _guard_name(node: ast.expr) -> str | None:
    """A name a guard may test: a local or parameter, or ``<self>.X``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
        return f"{node.value.id}.{node.attr}"
    return None


def guards_of(test: ast.expr) -> tuple[tuple[Guard, ...], bool]:
    """The conjuncts of an ``if`` test that compare a name with a literal (``if
    align_worker``, ``if not self.do_metadata_broadcast``, ``if mode == "dummy"``,
    ``if a and b is None``), and whether they are the whole test (the others may be
    anything, so the test may be false while every guard holds)."""
    if isinstance(test, ast.BoolOp) and isinstance(test.op, ast.And):
        found: list[Guard] = []
        complete = True
        for value in test.values:
            guards, whole = guards_of(value)
            found += guards
            complete = complete and whole
        return tuple(found), complete
    negated = isinstance(test, ast.UnaryOp) and isinstance(test.op, ast.Not)
    operand = test.operand if isinstance(test, ast.UnaryOp) and negated else test
    name = _guard_name(operand)
    if name is not None:
        return (Guard(name, "falsy" if negated else "truthy"),), True
    if (
        not negated
        and isinstance(test, ast.Compare)
        and len(test.ops) == 1
        and type(test.ops[0]) in _COMPARE
    ):
        name = _guard_name(test.left)
        literal = literal_text(test.comparators[0])
        if name is not None and literal is not None:
            return (Guard(name, _COMPARE[type(test.ops[0])], literal),), True
    return (), False


def is_driver_only_marker(node: ast.expr | None, key: str = DRIVER_ONLY_KEY) -> bool:
    """``{key: True, ...}`` / ``dict(key=True)`` (``key``: ``"driver_only"`` unless
    configured), or the older ``{"runnercheck": "driver-only"}`` /
    ``dict(runnercheck="driver-only")``."""

    def marks(name: str | None, value: ast.expr) -> bool:
        if name == key:
            return isinstance(value, ast.Constant) and value.value is True
        return name == DRIVER_ONLY_METADATA_KEY and str_const(value) == DRIVER_ONLY_METADATA_VALUE

    if isinstance(node, ast.Dict):
        return any(
            k is not None and marks(str_const(k), item)
            for k, item in zip(node.keys, node.values, strict=True)
        )
    if isinstance(node, ast.Call) and dotted(node.func) == "dict":
        return any(marks(kw.arg, kw.value) for kw in node.keywords)
    return False
