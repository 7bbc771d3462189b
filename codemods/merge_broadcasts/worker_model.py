"""The plan of one worker's step and the driver paths of its methods."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from codemods.merge_broadcasts.driver_paths import Located, locate, owners
from codemods.toolkit import cstutil

WORKER_INPUT = "worker_input"


@dataclass
class KeyPlan:
    key: str
    value: cst.BaseExpression
    annotation: str
    default: str | None  # None: no default (the receiver indexed it)
    #: the worker states two types for the value (``annotation`` stays ``Any``)
    contested: bool = False
    #: ``annotation`` is the sent value's own type and says it is never None (a
    #: tensor built, a count, a local declared so): the driver always sets the key
    valued: bool = False


@dataclass
class BroadcastCall:
    call: cst.Call
    where: Located
    func: cst.FunctionDef


@dataclass
class WorkerPlan:
    path: Path
    name: str
    cdef: cst.ClassDef
    runner_attr: str
    input_name: str = ""
    typevar: str = ""
    keys: list[KeyPlan] = field(default_factory=list)
    # driver
    send_func: cst.FunctionDef | None = None
    send: cst.BaseStatement | None = None
    literal_stmt: cst.BaseStatement | None = None
    dict_var: str = ""
    condition: cst.BaseExpression | None = None
    request: cst.BaseExpression | None = None
    # non-driver
    recv_func: cst.FunctionDef | None = None
    recv_var: str = ""
    #: insert WorkerInput.from_broadcasted_tensor_dict after this statement
    recv_anchor: cst.BaseStatement | None = None
    key_reads: dict[int, str] = field(default_factory=dict)
    #: the receive is followed by ``if not <dict>: <exit>``
    recv_guarded: bool = False
    # runner call sites
    driver_site: BroadcastCall | None = None
    non_driver_site: BroadcastCall | None = None


def is_pure(node: cst.BaseExpression) -> bool:
    """Re-evaluating it has no effect: names, attributes, constants, comparisons,
    boolean logic and ``len()``."""

    def ok(n: cst.CSTNode) -> bool:
        if isinstance(n, cst.Call):
            return isinstance(n.func, cst.Name) and n.func.value == "len"
        return not isinstance(n, (cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda))

    return all(ok(n) for n in cstutil.find_all(node, lambda n: True))


@dataclass
class FunctionPaths:
    """One function's statements with their paths, and which statement holds a node."""

    func: cst.FunctionDef
    located: list[Located]
    owner: dict[int, Located] | None = None

    def site(self, node: cst.CSTNode) -> Located:
        if self.owner is None:
            self.owner = owners(self.func, self.located)
        found = self.owner.get(id(node))
        assert found is not None
        return found


def site_at(where: FunctionPaths, node: cst.CSTNode) -> Located:
    return where.site(node)


def function_paths(func: cst.FunctionDef, flag: str) -> FunctionPaths:
    return FunctionPaths(func, locate(func, flag))
