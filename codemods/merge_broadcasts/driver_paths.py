"""Which rank runs a statement: driver, non-driver, or both.

A statement's path follows from ``if self.<flag>:`` / ``if not self.<flag>:``
branches, from an early exit in such a branch (``if not self.flag: ...;
return`` makes the rest of the block driver-only) and from an ``assert
[not] self.<flag>`` at the top of a function."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import libcst as cst

from codemods.toolkit import cstutil, node_index

DriverPath = Literal["both", "driver", "non-driver"]
#: (block statements, index of the next link) from a function's body down to a statement
Chain = tuple[tuple[tuple[cst.BaseStatement, ...], int], ...]


@dataclass(frozen=True)
class Located:
    """A statement with its path and the chain of blocks that lead to it."""

    statement: cst.CSTNode
    path: DriverPath
    chain: Chain


def _other(path: DriverPath) -> DriverPath:
    return "non-driver" if path == "driver" else "driver" if path == "non-driver" else "both"


def _function_path(func: cst.FunctionDef, flag: str) -> DriverPath:
    for statement in cstutil.body_of(func.body)[:2]:
        small = cstutil.single_small(statement)
        if isinstance(small, cst.Assert):
            test = cstutil.flag_test(small.test, flag)
            if test is not None:
                return "driver" if test else "non-driver"
    return "both"


def locate(func: cst.FunctionDef, flag: str) -> list[Located]:
    """Every statement (simple and compound) under ``func`` with its path."""
    out: list[Located] = []
    _locate(tuple(cstutil.body_of(func.body)), _function_path(func, flag), (), flag, out)
    return out


def _locate(
    block: tuple[cst.BaseStatement, ...],
    path: DriverPath,
    chain: Chain,
    flag: str,
    out: list[Located],
) -> None:
    """:func:`locate` of ``block`` (on ``path``, reached through ``chain``), into ``out``."""
    current = path
    for index, statement in enumerate(block):
        here = (*chain, (block, index))
        out.append(Located(statement, current, here))
        if isinstance(statement, cst.If):
            test = cstutil.flag_test(statement.test, flag)
            if test is None:
                _locate(tuple(cstutil.body_of(statement.body)), current, here, flag, out)
                _locate_else(statement.orelse, current, here, flag, out)
                continue
            when_true: DriverPath = "driver" if test else "non-driver"
            if current in ("both", when_true):
                _locate(tuple(cstutil.body_of(statement.body)), when_true, here, flag, out)
            if current in ("both", _other(when_true)) and statement.orelse is not None:
                _locate_else(statement.orelse, _other(when_true), here, flag, out)
            if statement.orelse is None and cstutil.ends_with_exit(statement.body):
                current = _other(when_true) if current == "both" else current
        elif isinstance(statement, cst.BaseCompoundStatement):
            for child in _child_blocks(statement):
                _locate(tuple(cstutil.body_of(child)), current, here, flag, out)


def _locate_else(
    orelse: cst.If | cst.Else | None, path: DriverPath, chain: Chain, flag: str, out: list[Located]
) -> None:
    if orelse is None:
        return
    if isinstance(orelse, cst.Else):
        _locate(tuple(cstutil.body_of(orelse.body)), path, chain, flag, out)
    else:
        _locate((orelse,), path, chain, flag, out)


def _child_blocks(statement: cst.BaseCompoundStatement) -> list[cst.BaseSuite]:
    if isinstance(statement, cst.Match):  # each case runs on the path of the match
        return [case.body for case in statement.cases]
    blocks: list[cst.BaseSuite] = [statement.body]
    for attr in ("orelse", "finalbody"):
        extra = getattr(statement, attr, None)
        if isinstance(extra, (cst.Else, cst.Finally)):
            blocks.append(extra.body)
    for handler in getattr(statement, "handlers", ()):
        blocks.append(handler.body)
    return blocks


def owners(func: cst.FunctionDef, located: list[Located]) -> dict[int, Located]:
    """``id(node) -> `` the innermost located statement holding it, read from the
    index of the function's body (:mod:`codemods.toolkit.node_index`)."""
    by_id = {id(item.statement): item for item in located}
    order, ends, start, end = node_index.span(func.body)
    owner: dict[int, Located] = {}
    holding: list[tuple[Located, int]] = []  # the located statements around, innermost last
    for position in range(start, end):
        while holding and holding[-1][1] <= position:
            holding.pop()
        key = id(order[position])
        here = by_id.get(key)
        if here is not None:
            holding.append((here, ends[position]))
        if holding:
            owner[key] = holding[-1][0]
    return owner
