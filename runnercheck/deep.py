"""Analysing deeply nested code: whatever CPython compiles, the tools analyse.

CPython 3.11 compiles expressions nested about 3,000 levels deep (a chain of 2,990
``+`` or calls, for instance) under its default recursion limit of 1,000, but a
recursive walk over such a tree (``ast`` visitors, LibCST's parser, visitors and code
generator) needs more Python frames than that limit allows. :func:`call` runs a
function in a thread with a large stack (1 GiB of address space, touched only as
deep as the code goes) and a raised recursion limit, so those walks finish.
:func:`nesting` measures a tree's depth without recursion, so that what is deeper
still than CPython compiles can be refused for that file alone instead of taking a
long time (LibCST's parse time grows faster than linearly with depth).
"""

from __future__ import annotations

import ast
import itertools
import sys
import threading
from collections.abc import Callable
from typing import Any, TypeVar

T = TypeVar("T")

#: Stack size of the analysis thread (address space; pages are used on demand).
STACK_SIZE = 1 << 30
#: Recursion limit while an analysis thread runs.
RECURSION_LIMIT = 30_000
#: Depth of an ``ast`` tree beyond which CPython 3.11 no longer compiles it under its
#: default recursion limit (the compiler allows three levels per frame of the limit).
MAX_NESTING = 3_000

_local = threading.local()
_lock = threading.Lock()
_active = 0
_saved_limit = 0


def in_deep_thread() -> bool:
    return bool(getattr(_local, "deep", False))


def call(function: Callable[..., T], *args: Any, **kwargs: Any) -> T:
    """``function(*args, **kwargs)`` in a thread with a large stack and a raised
    recursion limit; returns its result or raises its exception. Already in such a
    thread, calls it directly."""
    if in_deep_thread():
        return function(*args, **kwargs)
    outcome: list[Any] = []
    failure: list[BaseException] = []

    def run() -> None:
        _local.deep = True
        try:
            outcome.append(function(*args, **kwargs))
        except BaseException as exc:  # handed to the caller's thread
            failure.append(exc)

    _raise_limit()
    try:
        old_size = threading.stack_size()
        try:
            threading.stack_size(STACK_SIZE)
            thread = threading.Thread(target=run, name="runnercheck-analysis", daemon=True)
        finally:
            threading.stack_size(old_size)
        thread.start()
        thread.join()
    finally:
        _restore_limit()
    if failure:
        raise failure[0]
    return outcome[0]


def _raise_limit() -> None:
    global _active, _saved_limit
    with _lock:
        if _active == 0:
            _saved_limit = sys.getrecursionlimit()
            sys.setrecursionlimit(max(_saved_limit, RECURSION_LIMIT))
        _active += 1


def _restore_limit() -> None:
    global _active
    with _lock:
        _active -= 1
        if _active == 0:
            sys.setrecursionlimit(_saved_limit)


def nesting(tree: ast.AST) -> int:
    """How many statements and expressions deep ``tree`` nests (the levels CPython's
    compiler counts against its limit), measured without recursion."""
    deepest = 0
    stack: list[tuple[ast.AST, int]] = [(tree, 0)]
    pop, push = stack.pop, stack.append
    counted, node_type = (ast.stmt, ast.expr), ast.AST
    while stack:
        node, depth = pop()
        if isinstance(node, counted):
            depth += 1
            if depth > deepest:
                deepest = depth
        # the children ``ast.iter_child_nodes`` yields, read without its generators
        for name in node._fields:
            value = getattr(node, name, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, node_type):
                        push((item, depth))
            elif isinstance(value, node_type):
                push((value, depth))
    return deepest


#: Statements that hold no other statement.
_SIMPLE = (
    ast.Expr,
    ast.Assign,
    ast.AugAssign,
    ast.AnnAssign,
    ast.Return,
    ast.Raise,
    ast.Assert,
    ast.Delete,
    ast.Pass,
    ast.Break,
    ast.Continue,
    ast.Import,
    ast.ImportFrom,
    ast.Global,
    ast.Nonlocal,
)
#: Statements whose own expressions all stand before the first statement of their body
#: (from their first decorator on), or in a handler's or a case's head.
_COMPOUND = (
    ast.If,
    ast.While,
    ast.For,
    ast.AsyncFor,
    ast.With,
    ast.AsyncWith,
    ast.FunctionDef,
    ast.AsyncFunctionDef,
    ast.ClassDef,
    ast.Try,
    ast.TryStar,
    ast.Match,
)


def _deepest(module: ast.Module, source: bytes) -> int | None:
    """The nesting of ``module`` (parsed from ``source``) when it is deeper than
    :data:`MAX_NESTING`, else None, walking the statements only where it must: each
    level of a statement or an expression holds at least one character of its own but
    for an expression statement (its expression's) and an unparenthesised tuple of one
    starred item (``a[*b]``), each of which stands right above a level that does, so
    what some lines hold nests at most twice as deep as those lines have bytes. A
    statement that bound keeps within the limit is not looked into; only what it does
    not keep there is walked whole."""
    # ``ends[n]``: the offset where line ``n + 1`` ends (lines end as Python reads them)
    ends = list(itertools.accumulate(map(len, source.splitlines(keepends=True)), initial=0))
    last = len(ends) - 1
    deepest = 0  # (of what was walked: the rest is bounded within the limit)

    def within(depth: int, first: int, end: int) -> bool:
        """Whether what lines ``first``..``end`` hold, ``depth`` statements deep (the
        first of them included), stays within the limit."""
        end = min(max(first, end), last)
        return depth + 2 * (ends[end] - ends[max(first, 1) - 1]) + 2 <= MAX_NESTING

    stack: list[tuple[ast.stmt, int]] = [(s, 1) for s in module.body]
    pop, push = stack.pop, stack.append
    while stack:
        stmt, depth = pop()
        decorators = getattr(stmt, "decorator_list", ())
        first = min([stmt.lineno, *(d.lineno for d in decorators)]) if decorators else stmt.lineno
        if within(depth - 1, first, stmt.end_lineno or stmt.lineno):
            continue
        if isinstance(stmt, _SIMPLE) or not isinstance(stmt, _COMPOUND):
            deepest = max(deepest, depth - 1 + nesting(stmt))
            continue
        # the lines of its own expressions: its head, each handler's, each case's
        heads: list[tuple[int, int]] = []
        if isinstance(stmt, ast.Match):
            heads.append((first, stmt.cases[0].pattern.lineno))
        else:
            heads.append((first, stmt.body[0].lineno))
        for handler in getattr(stmt, "handlers", ()):
            heads.append((handler.lineno, handler.body[0].lineno))
            stack.extend((inner, depth + 1) for inner in handler.body)
        for case in getattr(stmt, "cases", ()):
            heads.append((case.pattern.lineno, case.body[0].lineno))
            stack.extend((inner, depth + 1) for inner in case.body)
        if not all(within(depth, head, end) for head, end in heads):
            return _walked(module)
        for name in ("body", "orelse", "finalbody"):
            for inner in getattr(stmt, name, ()):
                push((inner, depth + 1))
    return deepest if deepest > MAX_NESTING else None


def _walked(module: ast.Module) -> int | None:
    depth = nesting(module)
    return depth if depth > MAX_NESTING else None


def too_deep(tree: ast.AST, source: bytes | None = None) -> str | None:
    """Why ``tree`` is not analysed (nested deeper than CPython compiles), or None.
    ``source``: the bytes ``tree`` was parsed from (most expressions are then bounded
    by their length instead of walked)."""
    if source is not None and isinstance(tree, ast.Module):
        found = _deepest(tree, source)
        depth = found if found is not None else 0
    else:
        depth = nesting(tree)
    if depth <= MAX_NESTING:
        return None
    return (
        f"nested {depth} levels deep, deeper than CPython compiles by default "
        f"({MAX_NESTING}): not analysed"
    )


def describe(exc: BaseException) -> str:
    """An exception as a reason that is never empty."""
    if isinstance(exc, RecursionError):
        return "nested too deeply to analyse (RecursionError)"
    if isinstance(exc, MemoryError):
        return "out of memory while analysing it (MemoryError)"
    text = str(exc).strip()
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def parse_failure(exc: BaseException) -> str:
    """Why Python's own parser gave up on a file (it raises these for deep nesting)."""
    if isinstance(exc, (RecursionError, MemoryError)):
        return f"nested too deeply for Python's parser ({type(exc).__name__})"
    return describe(exc)
