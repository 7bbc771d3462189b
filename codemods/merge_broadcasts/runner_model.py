"""The plan of one runner (its legacy method, fields, keys) and small readers of its class."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import libcst as cst

from codemods.framework.results import DroppedKey
from codemods.toolkit import cstutil, node_index
from codemods.toolkit.positions import Lines
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.shapes import ExtraBroadcast
from runnercheck.contract import Contract

if TYPE_CHECKING:
    from codemods.merge_broadcasts.helper_records import Record

ATTN_BACKEND = "attn_backend"

MODEL_INPUT = "model_input"


@dataclass
class FieldPlan:
    name: str
    annotation: str
    driver_only: bool
    #: set by ``prepare_model_input`` from this value (a request the input keeps);
    #: the other ranks get the default, None
    from_request: str = ""
    #: driver-only, and the other ranks bound it to ``None``: the field's default
    none_default: bool = False


@dataclass
class ExtraPlan:
    """A conditional extra broadcast, merged into the one dict under a key prefix."""

    shape: ExtraBroadcast
    #: the driver's ``if`` that sent it (its body ends with the send)
    send_if: cst.If


@dataclass
class RunnerPlan:
    path: Path
    name: str
    cdef: cst.ClassDef
    #: the legacy method (None: the runner inherits its input from a base runner)
    method: cst.FunctionDef | None = None
    input_name: str = ""
    typevar: str = ""
    fields: list[FieldPlan] = field(default_factory=list)
    #: plan of the runner whose input type this runner uses
    owner: RunnerPlan | None = None
    #: the runner gets ``ModelRunnerBase[input]`` as a base
    add_base: bool = False
    #: a subclass runner whose input is not its parent runner's: its contract
    #: methods narrow the parent's types (marked ``# type: ignore[override]``)
    narrows: bool = False
    narrows_from: str = ""
    #: a runner whose subclasses take other inputs splits into a generic base
    #: (``generic[TInput]``: all but the contract methods) and itself
    #: (``generic[<its input>]``: the contract methods); ``generic_typevar`` is the base's
    generic: str = ""
    generic_typevar: str = ""
    #: a subclass of such a runner: now derives from ``rebase.generic[<its input>]``
    rebase: RunnerPlan | None = None
    # legacy method pieces
    docstring: cst.BaseStatement | None = None
    prologue: list[cst.BaseStatement] = field(default_factory=list)
    driver_before: list[cst.BaseStatement] = field(default_factory=list)
    driver_after: list[cst.BaseStatement] = field(default_factory=list)
    dict_var: str = ""
    literal: cst.Dict | None = None
    #: statements whose own comments move with the code they introduce
    literal_stmt: cst.BaseStatement | None = None
    send_stmt: cst.BaseStatement | None = None
    receive_stmt: cst.BaseStatement | None = None
    return_stmt: cst.BaseStatement | None = None
    #: the returned names, in order (the unpacking in ``execute_model`` follows them)
    returned: list[str] = field(default_factory=list)
    #: statements after the driver split (every rank runs them): they move to the
    #: start of ``execute_model``; ``tail_bound`` are the names they bind
    tail: list[cst.BaseStatement] = field(default_factory=list)
    tail_bound: list[str] = field(default_factory=list)
    extras: list[ExtraPlan] = field(default_factory=list)
    branch_stmt: cst.BaseStatement | None = None
    mutations: list[cst.BaseStatement] = field(default_factory=list)
    receive_var: str = ""
    #: ``assert <received dict> is not None`` right after the receive (not moved)
    receive_checks: list[cst.BaseStatement] = field(default_factory=list)
    non_driver: list[cst.BaseStatement] = field(default_factory=list)
    #: statements the rebuilt input no longer needs (a driver-only field's ``= None``)
    from_dict_skip: list[cst.BaseStatement] = field(default_factory=list)
    uses_attn_backend: bool = False
    keys: list[str] = field(default_factory=list)
    dropped: list[DroppedKey] = field(default_factory=list)
    # execute_model rewrite
    execute: cst.FunctionDef | None = None
    unpack: cst.BaseStatement | None = None
    unpack_targets: list[str] = field(default_factory=list)
    #: calls ``self.execute_model(a, ...)`` in other methods -> wrap ``a``
    self_execute_calls: list[cst.Call] = field(default_factory=list)
    #: names of the methods holding those calls
    self_execute_in: set[str] = field(default_factory=set)
    #: helpers the legacy method unpacks that return a NamedTuple, by name; the
    #: unpacking that ``prepare_model_input`` reads as fields instead (:mod:`.helper_records`)
    records: dict[str, Record] = field(default_factory=dict)
    record_reads: list[tuple[cst.BaseStatement, Record]] = field(default_factory=list)
    #: ``self.<method>`` parameters of the runner (and its bases) that take a value:
    #: an Optional field passed there is asserted set (:mod:`.narrowing`)
    value_params: dict[str, frozenset[int | str]] = field(default_factory=dict)
    #: reads of the request in ``execute_model`` besides preparing -> the input's field
    request_uses: dict[int, str] = field(default_factory=dict)
    #: behaviour changes to report: (line in the original file, what changes)
    notes: list[tuple[int, str]] = field(default_factory=list)
    #: fields typed from the value the driver assigns against an old annotation:
    #: (line, field, what the old annotations said), noted with the input's final name
    retyped: list[tuple[int, str, str]] = field(default_factory=list)
    #: the runner's own helpers that build what the legacy non-driver branch builds with
    #: a literal flag, rewritten to read the driver flag: name -> the rewritten method
    flag_helpers: dict[str, cst.FunctionDef] = field(default_factory=dict)
    #: class -> keyword -> literal default, for the classes the non-driver branch builds
    #: with a literal flag
    flag_defaults: dict[str, dict[str, str]] = field(default_factory=dict)

    @property
    def input_plan(self) -> RunnerPlan:
        return self.owner if self.owner is not None else self


def method_named(cdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for item in cstutil.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == name:
            return item
    return None


def methods(cdef: cst.ClassDef) -> list[cst.FunctionDef]:
    return [item for item in cstutil.body_of(cdef.body) if isinstance(item, cst.FunctionDef)]


def line_in_method(lines: Lines, cdef: cst.ClassDef, facts: ClassFacts, node: cst.CSTNode) -> int:
    """``lines.line(node)`` for a node in a method of ``cdef`` (``facts``: its ``ast``
    facts): only that method is printed to count it when the facts give the method's
    line unambiguously."""
    defined = methods(cdef)
    names = [d.name.value for d in defined]
    # the methods already indexed first (the node was found in one): none walked in vain
    for method in sorted(defined, key=lambda d: not node_index.indexed(d)):
        found = facts.methods.get(method.name.value)
        if found is None or names.count(method.name.value) != 1:
            continue
        if cstutil.within(method, node):
            return lines.line_in(method, found.line, node)
    return lines.line(node)


def broadcast_methods(
    cdef: cst.ClassDef, contract: Contract, only: set[str] | None = None
) -> list[cst.FunctionDef]:
    """Methods that call the broadcast function (``only``: names known to, from ``ast``)."""
    function = contract.broadcast_function
    return [
        m
        for m in methods(cdef)
        if (only is None or m.name.value in only)
        and cstutil.contains(m, cst.Call, lambda n: cstutil.is_broadcast(n, function))
    ]


def is_docstring(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return isinstance(small, cst.Expr) and isinstance(
        small.value, (cst.SimpleString, cst.ConcatenatedString)
    )


def params_of(func: cst.FunctionDef) -> list[cst.Param]:
    return list(func.params.params)
