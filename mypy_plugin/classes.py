"""Which class mypy's checker is at, and the classes it never shows the plugin.

After checking a class body, mypy type-checks the implicit ``Base.__init_subclass__()``
call of the class statement, and the plugin's method hook runs there (see
:mod:`mypy_plugin.hooks`). The class is the innermost class of the checker's scope,
or, for a class defined inside a function (which that scope leaves out), the entry
mypy keeps for it in the module's symbol table under ``Name@line``.

mypy makes no such call for a class with a metaclass other than ``type`` and
``abc.ABCMeta`` (a subclass of ``ABCMeta`` included), for enums, named tuples and
typed dicts, nor for a class inside a function whose body mypy does not check.
Those classes are listed by :func:`module_classes` and checked once mypy has
finished their module, by a type checker made for it when mypy's own is out of reach.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from typing import Any

from mypy.checker import TypeChecker
from mypy.errors import Errors
from mypy.nodes import CallExpr, MemberExpr, MypyFile, NameExpr, TypeInfo
from mypy.options import Options
from mypy.plugin import MethodContext, Plugin


def class_of_init_subclass_call(ctx: MethodContext) -> TypeInfo | None:
    """The class whose statement made the implicit ``__init_subclass__`` call that mypy
    checks, or None for any other call of ``__init_subclass__``."""
    call = ctx.context
    if not (
        isinstance(call, CallExpr)
        and isinstance(call.callee, MemberExpr)
        and isinstance(call.callee.expr, NameExpr)
    ):
        return None
    name = call.callee.expr.name
    tscope: Any = getattr(ctx.api, "tscope", None)
    classes = getattr(tscope, "classes", None)
    if classes:
        info = classes[-1]
        if isinstance(info, TypeInfo) and info.name == name and info.defn.line == call.line:
            return info
    if getattr(tscope, "function", None) is None:
        return None
    # A class inside a function: mypy stores it in the module's table as "Name@line".
    tree = getattr(ctx.api, "tree", None)
    symbol = tree.names.get(f"{name}@{call.line}") if isinstance(tree, MypyFile) else None
    node = symbol.node if symbol is not None else None
    return node if isinstance(node, TypeInfo) and node.defn.line == call.line else None


def module_classes(file: MypyFile) -> Iterator[TypeInfo]:
    """Every class defined by a class statement of ``file``: at the top level, in class
    bodies and in functions (not the types mypy makes up, such as intersections)."""
    module = file.fullname
    seen: set[int] = set()
    tables = [file.names]
    while tables:
        for symbol in tables.pop().values():
            info = symbol.node
            if not isinstance(info, TypeInfo) or info.module_name != module or id(info) in seen:
                continue
            seen.add(id(info))
            tables.append(info.names)
            if not info.is_newtype and "<" not in info.name:
                yield info


def errors_of_build(modules: dict[str, MypyFile]) -> Errors | None:
    """mypy's error store, found through the objects that hold the build's module table
    (the build manager, its semantic analyser and type checkers all hold both). A scan
    of the heap: used once per run at most, when no hook has shown the store before a
    class needs checking (an incremental run in which only such a module changed)."""
    for holder in gc.get_referrers(modules):
        errors = getattr(holder, "errors", None)
        if isinstance(errors, Errors):
            return errors
    return None


def checker_for(
    errors: Errors, modules: dict[str, MypyFile], options: Options, file: MypyFile, plugin: Plugin
) -> TypeChecker:
    """A type checker for ``file`` that reports through mypy's ``errors``, to check its
    classes after mypy has checked the module (types are complete by then)."""
    return TypeChecker(errors, modules, options, file, file.path, plugin, {})
