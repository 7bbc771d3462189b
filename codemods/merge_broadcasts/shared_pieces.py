"""Pieces of a generated input class larger than one statement that several inputs of
a directory may share as helpers (:mod:`.shared_helpers` writes the helpers).

Runners copied from one another give inputs that (de)serialise the same metadata the
same way, spread over more than one statement:

* in ``as_broadcastable_tensor_dict``, the entries of the dict literal that read
  attributes of one field ``F`` (``"selected_token_indices":
  self.sampling_metadata.selected_token_indices``): :func:`field_entries`;
* in ``from_broadcasted_tensor_dict``, the statements that pop keys and bind one
  field ``N`` through temporaries that no other statement reads
  (``indices = tensor_dict.pop("k")`` ... ``N = Metadata(indices=indices)``), with
  other statements between them: :func:`bound_runs`.

Each piece has a signature, its code as ``ast`` with the temporaries renamed in the
order they are bound, so two inputs that name their temporaries differently hold the
same piece and inputs whose pieces differ in anything else do not.
"""

from __future__ import annotations

import ast
import builtins
from collections.abc import Sequence
from dataclasses import dataclass
from typing import cast

import libcst as cst

from codemods.merge_broadcasts.runner_model import ATTN_BACKEND
from codemods.toolkit import cstutil

DICT = "tensor_dict"
_BUILTINS = frozenset(dir(builtins))
#: the names a ``from_broadcasted_tensor_dict`` binds as parameters
_PARAMS = frozenset({"cls", DICT, ATTN_BACKEND})


@dataclass(frozen=True)
class Entries:
    """The dict literal's entries that read attributes of the input's field ``field``."""

    field: str
    #: where they stand among the literal's elements
    indices: tuple[int, ...]
    #: (key, value) with ``self.<field>`` written as ``<field>``
    items: tuple[tuple[str, str], ...]

    @property
    def signature(self) -> str:
        # in parentheses: a value the literal's braces held over lines parses alone
        values = "".join(_dump(f"({value})", "eval") for _, value in self.items)
        return f"{self.field}:{[key for key, _ in self.items]}:{values}"


@dataclass(frozen=True)
class Run:
    """Statements of ``from_broadcasted_tensor_dict`` that bind ``name`` alone."""

    name: str
    #: where they stand in the method's body, in order
    indices: tuple[int, ...]
    #: the method's parameters it reads (``attn_backend``, ``tensor_dict``), sorted
    inputs: tuple[str, ...]
    #: module-level names it reads (imports of the runner's module)
    globals: frozenset[str]
    signature: str


def _dump(code: str, mode: str = "exec") -> str:
    return ast.dump(ast.parse(code.strip(), mode=mode))


def _field_of_self(value: cst.BaseExpression) -> str | None:
    """``F`` when ``value`` reads ``self`` only as ``self.F.<attribute>`` (one ``F``)
    and no other name but builtins; else None."""
    loads = cstutil.name_uses(value)[0]
    if not loads or {n.value for n in loads} - _BUILTINS != {"self"}:
        return None
    deeper = {
        id(n.value.value): n.value.attr.value
        for n in cstutil.find_all(value, cst.Attribute)
        if isinstance(n, cst.Attribute)
        and cstutil.is_self_attr(n.value)
        and isinstance(n.value, cst.Attribute)
    }
    found = set()
    for name in loads:
        if name.value == "self":
            if id(name) not in deeper:
                return None
            found.add(deeper[id(name)])
    return found.pop() if len(found) == 1 else None


def field_entries(literal: cst.Dict) -> list[Entries]:
    """Per field read through its attributes, the literal's entries that read it, in
    their order; entries with a comment above them stay where they are."""
    by_field: dict[str, list[tuple[int, str, str]]] = {}
    for index, element in enumerate(literal.elements):
        if not isinstance(element, cst.DictElement):
            continue
        key = cstutil.string_value(element.key)
        name = _field_of_self(element.value)
        if key is None or name is None or cstutil.comment_before(literal, index):
            continue
        value = cstutil.code(SelfField(name).rewrite(element.value))
        by_field.setdefault(name, []).append((index, key, value.strip()))
    return [
        Entries(name, tuple(i for i, _, _ in found), tuple((k, v) for _, k, v in found))
        for name, found in by_field.items()
    ]


def _dict_keys(statement: cst.CSTNode) -> set[str] | None:
    """The literal keys a statement pops or gets from the dict when that is all it does
    with it; None when it uses the dict in any other way."""
    uses = [n for n in cstutil.name_uses(statement)[0] if n.value == DICT]
    keys: set[str] = set()
    calls = {
        id(cst.ensure_type(n.func, cst.Attribute).value): cstutil.dict_method_key(n, DICT)
        for n in cstutil.find_all(statement, cst.Call)
        if isinstance(n, cst.Call) and cstutil.dict_method_key(n, DICT) is not None
    }
    for use in uses:
        key = calls.get(id(use))
        if key is None:
            return None
        keys.add(key)
    return keys


def _pops(statement: cst.CSTNode) -> bool:
    return any(
        isinstance(n, cst.Call)
        and isinstance(n.func, cst.Attribute)
        and n.func.attr.value == "pop"
        and cstutil.dict_method_key(n, DICT) is not None
        for n in cstutil.find_all(statement, cst.Call)
    )


def _exits(statement: cst.CSTNode) -> bool:
    return cstutil.contains(statement, (cst.Return, cst.Raise, cst.Yield, cst.Await))


def bound_runs(body: Sequence[cst.BaseStatement], fields: set[str]) -> list[Run]:
    """The runs of ``body`` (the method's statements, its return last) that pop keys
    and bind one field through temporaries only they read, and that may stand
    together at their first statement: a later one moves up only past statements it
    does not depend on, and past uses of the dict only when both take other literal
    keys."""
    loads = [cstutil.loaded(s) for s in body]
    binds = [cstutil.bound(s) for s in body]
    binders: dict[str, list[int]] = {}
    for index, names in enumerate(binds):
        for name in names:
            binders.setdefault(name, []).append(index)
    runs: list[Run] = []
    for last, statement in enumerate(body[:-1]):
        if len(binds[last]) != 1 or _exits(statement):
            continue
        (name,) = binds[last]
        if name not in fields or binders[name] != [last]:
            continue
        run = _closure(last, loads, binds, binders)
        if run is None or not any(_pops(body[i]) for i in run):
            continue
        if len(run) == 1 and _moves_one_key(body[last]):
            continue
        readers = {i for i, names in enumerate(loads) if name in names} - set(run)
        temporaries = set().union(*(binds[i] for i in run)) - {name}
        outside = {i for i, names in enumerate(loads) if names & temporaries} - set(run)
        if outside or any(i < last for i in readers):
            continue
        if any(_exits(body[i]) or len(binds[i]) != 1 for i in run):
            continue
        if not _movable(body, run):
            continue
        read = set().union(*(loads[i] for i in run)) - set().union(*(binds[i] for i in run))
        read -= _BUILTINS - set(binders)
        if read & (set(binders) | {"cls", "self"}):
            continue
        runs.append(
            Run(
                name,
                tuple(run),
                tuple(sorted(read & _PARAMS)),
                frozenset(read - _PARAMS),
                _signature([body[i] for i in run], name),
            )
        )
    return runs


def _closure(
    last: int, loads: list[set[str]], binds: list[set[str]], binders: dict[str, list[int]]
) -> list[int] | None:
    """``last`` with the statements binding the names it reads, and theirs; None when a
    name read is bound more than once or after its reader."""
    run = {last}
    queue = [last]
    while queue:
        reader = queue.pop()
        for name in loads[reader] - binds[reader]:
            at = binders.get(name)
            if at is None:
                continue
            if len(at) != 1 or at[0] >= reader:
                return None
            if at[0] not in run:
                run.add(at[0])
                queue.append(at[0])
    return sorted(run)


def _movable(body: Sequence[cst.BaseStatement], run: list[int]) -> bool:
    """Whether each statement of ``run`` may move up to its first statement: past the
    statements between, whose names it does not read (checked by the caller); where
    both use the dict, only as literal pops and gets of different keys."""
    first = run[0]
    for index in run[1:]:
        mine = _dict_keys(body[index])
        if DICT not in cstutil.loaded(body[index]):
            continue
        for between in range(first + 1, index):
            if between in run or DICT not in cstutil.loaded(body[between]):
                continue
            theirs = _dict_keys(body[between])
            if mine is None or theirs is None or mine & theirs:
                return False
    return True


def _moves_one_key(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return (
        isinstance(small, cst.Assign)
        and isinstance(small.value, cst.Call)
        and cstutil.dict_method_key(small.value, DICT) is not None
    )


def _signature(statements: list[cst.BaseStatement], name: str) -> str:
    """The run as ``ast``, its temporaries renamed in the order they are bound."""
    renamed = aligned(statements, name)
    return name + ":" + _dump("".join(run_code(renamed)))


def aligned(statements: list[cst.BaseStatement], name: str) -> list[cst.BaseStatement]:
    """The run with its temporaries named ``_0``, ``_1``, ... in the order bound."""
    order = [n for s in statements for n in sorted(cstutil.bound(s)) if n != name]
    out = statements
    for step in ("__aligned_{}", "_{}"):  # through names no code uses
        for number, temporary in enumerate(order):
            out = [cstutil.rename(s, temporary, step.format(number)) for s in out]
        order = [f"__aligned_{n}" for n in range(len(order))]
    return out


def run_code(statements: list[cst.BaseStatement]) -> list[str]:
    """Each statement's code, without the lines above the first."""
    out = []
    for index, statement in enumerate(statements):
        if index == 0:
            statement = cstutil.with_leading(statement, [])
        else:
            statement = cstutil.with_leading(
                statement, cstutil.comments(cstutil.leading(statement))
            )
        out.append(cstutil.code(statement).strip("\n") + "\n")
    return out


class SelfField(cst.CSTTransformer):
    """``self.<name>`` written as ``<name>``."""

    def __init__(self, name: str) -> None:
        self.name = name

    def rewrite(self, node: cst.BaseExpression) -> cst.BaseExpression:
        return cast(cst.BaseExpression, node.visit(self))

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if cstutil.is_self_attr(original_node, self.name):
            return cst.Name(self.name)
        return updated_node
