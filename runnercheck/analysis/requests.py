"""Uses of the request after preparing, read with ``ast``.

A legacy ``execute_model(self, seq_group_metadata_list, kv_caches)`` prepares its
input with ``self.prepare_input_tensors(seq_group_metadata_list)`` and may read the
request again afterwards, for a driver-only post-processing step (vLLM forks return
the hidden states of the prompts' last tokens, count prompts, ...), directly or by
passing it to a method it calls. In the merged shape ``execute_model`` takes the
model input instead, so what it still reads of the request travels in the input as a
driver-only field, set by ``prepare_model_input``; the other ranks, which were handed
``None``, read the field's default, ``None``.

:func:`request_uses` answers: the request parameter, its annotation, and every place
``execute_model`` reads it besides the preparing call (line and column, to be
rewritten as ``model_input.<request>``), with the methods it is passed to.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from runnercheck.analysis.recognise import role_of
from runnercheck.analysis.scopes import loaded
from runnercheck.analysis.shapes import ShapeProblem
from runnercheck.analysis.syntax import dotted, unparse, walk

REQUEST_AFTER_PREPARE = "request used after preparing"


@dataclass(frozen=True)
class RequestUse:
    """One read of the request besides the preparing call."""

    line: int
    #: 0-based column in characters (as LibCST counts), of the name's first character
    col: int
    #: ``self.<method>`` when the request is passed to a method, else ""
    passed_to: str = ""


@dataclass(frozen=True)
class RequestUses:
    request: str
    #: the parameter's annotation as written ("" when none)
    annotation: str
    uses: tuple[RequestUse, ...] = ()
    problem: ShapeProblem | None = None


def _char_col(lines: list[str], line: int, byte_col: int) -> int:
    """``ast`` counts columns in UTF-8 bytes; LibCST in characters."""
    if not 0 < line <= len(lines):
        return byte_col
    return len(lines[line - 1].encode("utf-8")[:byte_col].decode("utf-8", "replace"))


def request_reads(func: ast.FunctionDef, source_lines: list[str]) -> RequestUses | None:
    """Every read of ``func``'s request parameter (its first after ``self``), with the
    ``self.<method>`` each is passed to; None when ``func`` has no such parameter."""
    params = [*func.args.posonlyargs, *func.args.args]
    if len(params) < 2:
        return None
    param = params[1]
    request = param.arg
    annotation = unparse(param.annotation) if param.annotation is not None else ""
    passed: dict[int, str] = {}
    for node in walk(func):
        if not isinstance(node, ast.Call):
            continue
        callee = dotted(node.func)
        if not callee.startswith("self."):
            continue
        for arg in [*node.args, *(kw.value for kw in node.keywords)]:
            if isinstance(arg, ast.Name) and arg.id == request:
                passed[id(arg)] = callee
    uses: list[RequestUse] = []
    problem: ShapeProblem | None = None
    for node in walk(func):
        if not (isinstance(node, ast.Name) and node.id == request):
            continue
        if isinstance(node.ctx, (ast.Store, ast.Del)):
            problem = problem or ShapeProblem(
                node.lineno,
                REQUEST_AFTER_PREPARE,
                f"`{request}` is rebound in the method that prepares from it",
                f"use another name for the new value of `{request}`",
            )
            continue
        uses.append(
            RequestUse(
                node.lineno,
                _char_col(source_lines, node.lineno, node.col_offset),
                passed.get(id(node), ""),
            )
        )
    uses.sort(key=lambda u: (u.line, u.col))
    return RequestUses(request, annotation, tuple(uses), problem)


def request_uses(reads: RequestUses, prepare_method: str) -> RequestUses:
    """The reads besides the call ``self.<prepare_method>(<request>)`` that prepares."""
    preparing = f"self.{prepare_method}"
    return RequestUses(
        reads.request,
        reads.annotation,
        tuple(u for u in reads.uses if u.passed_to != preparing),
        reads.problem,
    )


def _exits(body: list[ast.stmt]) -> bool:
    return bool(body) and isinstance(body[-1], (ast.Return, ast.Raise))


def non_driver_reads(func: ast.FunctionDef, flag: str) -> dict[str, int]:
    """Names ``func`` reads on a path the other ranks take (not only the driver's),
    with the first line of each: statements under ``if self.<flag>:`` or after
    ``if not self.<flag>: return`` are the driver's alone."""
    found: dict[str, int] = {}
    _non_driver_reads(list(func.body), False, flag, found)
    return found


def _non_driver_reads(
    body: list[ast.stmt], driver_only: bool, flag: str, found: dict[str, int]
) -> None:
    """:func:`non_driver_reads` of a block (``driver_only``: only the driver runs it)."""
    for stmt in body:
        if isinstance(stmt, ast.If):
            then_role, else_role = role_of(stmt.test, flag)
            if not driver_only:
                _note(stmt.test, stmt.lineno, found)
            _non_driver_reads(stmt.body, driver_only or then_role == "driver", flag, found)
            _non_driver_reads(stmt.orelse, driver_only or else_role == "driver", flag, found)
            if then_role == "non-driver" and _exits(stmt.body) and not stmt.orelse:
                driver_only = True
            continue
        if not driver_only:
            _note(stmt, stmt.lineno, found)


def _note(node: ast.AST, line: int, found: dict[str, int]) -> None:
    """The names ``node`` reads, at ``line`` unless ``found`` has them already."""
    for name in sorted(loaded(node)):
        found.setdefault(name, line)
