"""Names a statement binds and reads in its own function scope, read from ``ast``.

Comprehensions, lambdas and nested functions or classes have scopes of their own:
the names they bind stay inside, and the names they read from the enclosing
function count as reads of it. Used by the shape readers of
:mod:`~runnercheck.analysis.shapes` and :mod:`~runnercheck.analysis.requests`.
"""

from __future__ import annotations

import ast
from collections.abc import Iterable

from runnercheck.analysis.syntax import walk

_SCOPES = (ast.Lambda, ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)
_COMPREHENSIONS = (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)


def _inner_bound(node: ast.AST) -> set[str]:
    """Names bound inside a comprehension or lambda (its own scope)."""
    if isinstance(node, ast.Lambda):
        args = node.args
        return {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]} | {
            a.arg for a in (args.vararg, args.kwarg) if a is not None
        }
    names: set[str] = set()
    if isinstance(node, _COMPREHENSIONS):
        for generator in node.generators:
            names |= {n.id for n in walk(generator.target) if isinstance(n, ast.Name)}
    return names


def bound(node: ast.AST) -> set[str]:
    """Names ``node`` binds in the enclosing function (not inside nested scopes)."""
    found: set[str] = set()
    _bound(node, found)
    return found


def _bound(sub: ast.AST, found: set[str]) -> None:
    """:func:`bound` of ``sub``, into ``found`` (a function of its own, not a closure that
    calls itself: such a closure is a reference cycle, and keeps what it holds alive
    until the garbage collector runs)."""
    if isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
        found.add(sub.name)
        return
    if isinstance(sub, (ast.Lambda, *_COMPREHENSIONS)):
        for child in walk(sub):
            if isinstance(child, ast.NamedExpr) and isinstance(child.target, ast.Name):
                found.add(child.target.id)  # := leaks out of a comprehension
        return
    if isinstance(sub, ast.Name) and isinstance(sub.ctx, (ast.Store, ast.Del)):
        found.add(sub.id)
    elif isinstance(sub, (ast.Import, ast.ImportFrom)):
        for alias in sub.names:
            found.add((alias.asname or alias.name).split(".")[0])
    elif isinstance(sub, ast.ExceptHandler) and sub.name:
        found.add(sub.name)
    for child in ast.iter_child_nodes(sub):
        _bound(child, found)


def loaded(node: ast.AST) -> set[str]:
    """Names ``node`` reads from the enclosing function's scope (nested scopes
    included, less the names they bind themselves)."""
    found: set[str] = set()
    _loaded(node, frozenset(), found)
    return found


def _loaded(sub: ast.AST, hidden: frozenset[str], found: set[str]) -> None:
    """:func:`loaded` of ``sub`` with ``hidden`` bound by the scopes around it, into
    ``found``."""
    if isinstance(sub, (*_COMPREHENSIONS, ast.Lambda)):
        hidden = hidden | _inner_bound(sub)
    elif isinstance(sub, (ast.FunctionDef, ast.AsyncFunctionDef)):
        args = sub.args
        params = {a.arg for a in [*args.posonlyargs, *args.args, *args.kwonlyargs]}
        params |= {a.arg for a in (args.vararg, args.kwarg) if a is not None}
        hidden = hidden | params | bound_in(sub.body)
    if isinstance(sub, ast.Name) and isinstance(sub.ctx, ast.Load) and sub.id not in hidden:
        found.add(sub.id)
    for child in ast.iter_child_nodes(sub):
        _loaded(child, hidden, found)


def bound_in(statements: Iterable[ast.AST]) -> set[str]:
    out: set[str] = set()
    for statement in statements:
        out |= bound(statement)
    return out


def ordered_loads(node: ast.AST) -> list[str]:
    """The names ``node`` reads, each once, in source order."""
    wanted = loaded(node)
    first: dict[str, tuple[int, int]] = {}
    for sub in walk(node):
        if isinstance(sub, ast.Name) and sub.id in wanted:
            where = (sub.lineno, sub.col_offset)
            if sub.id not in first or where < first[sub.id]:
                first[sub.id] = where
    return sorted(first, key=lambda name: first[name])


def self_reads(node: ast.AST, self_name: str = "self") -> set[str]:
    """Attributes of ``self`` that ``node`` reads (``self.kv_cache_dtype`` -> that name)."""
    return {
        sub.attr
        for sub in walk(node)
        if isinstance(sub, ast.Attribute)
        and isinstance(sub.value, ast.Name)
        and sub.value.id == self_name
        and isinstance(sub.ctx, ast.Load)
    }
