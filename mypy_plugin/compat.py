"""Where mypy's plugin API differs between the supported versions (1.9 to the newest).

Each difference is detected by what the running mypy has, never by its version number:

* **The end of a module.** mypy 2.4 calls ``Plugin.get_additional_indirect_deps`` once a
  module is type-checked, before its messages are flushed: the plugin checks there what
  needs the module's inferred types (dict values) and the classes mypy's class hook never
  showed it (a custom metaclass, an enum, a class in a function mypy does not check),
  and returns the modules a runner depends on. Before 2.4 there is no such hook: once
  semantic analysis is complete the plugin adds one call to each module that defines
  a class, after its last class (:func:`add_module_end`), a call of a name no module
  defines (:data:`MODULE_END`), whose function hook runs when mypy checks that call;
  the dependencies go to the checker's own ``module_refs``, which mypy records as
  indirect dependencies in every version.
* **Plugin codes in the configuration.** Before mypy 1.19 the configuration file is
  parsed, and its ``disable_error_code`` / ``enable_error_code`` validated, before any
  plugin is loaded: mypy prints ``Invalid error code(s): execute-input-mismatch`` and
  drops that key of that section (the mypy codes listed with it too).
  :func:`restore_configured_codes` reads those keys again once the plugin's codes exist
  and applies them as mypy would have (1.19 validates them after loading plugins).
* **The checker's temporary type map** is a method returning a context manager before
  mypy 1.18 and an object that is one since (:func:`local_type_map`).
* **The recursion limit** mypy's command sets is ``mypy.defaults.RECURSION_LIMIT`` from
  1.20, a literal in ``mypy.main`` before (:data:`RECURSION_LIMIT`).
* **The names an expression reads**: ``mypy.traverser`` collects them from 1.19 (and
  the compiled traverser of 2.4 refuses a Python subclass); before, the plugin extends
  that traverser (:func:`name_expressions`).
"""

from __future__ import annotations

import io
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from functools import cache
from typing import Any, Final

from mypy import defaults
from mypy.nodes import (
    Block,
    CallExpr,
    ClassDef,
    Decorator,
    Expression,
    ExpressionStmt,
    ForStmt,
    FuncDef,
    IfStmt,
    MypyFile,
    NameExpr,
    OverloadedFuncDef,
    Statement,
    TryStmt,
    WhileStmt,
    WithStmt,
)
from mypy.options import Options
from mypy.plugin import Plugin
from mypy.traverser import TraverserVisitor
from mypy.types import CallableType, Instance, NoneType

#: What ``mypy``'s command sets ``sys.setrecursionlimit`` to (``2**14`` in every version).
RECURSION_LIMIT: Final[int] = getattr(defaults, "RECURSION_LIMIT", 2**14)

#: The name the call appended to a module refers to: no dot, so that mypy records no
#: module reference for it, and no module defines it.
MODULE_END: Final = "__runnercheck_module_end__"
#: Patches run in the order of their priority; mypy's own use 1 to 3.
_PATCH_PRIORITY: Final = 100

#: The configuration keys whose codes mypy before 1.19 validates before plugins load.
_CODE_KEYS: Final = ("disable_error_code", "enable_error_code")


def name_expressions(expr: Expression) -> list[NameExpr]:
    """Every name read in ``expr`` (nested expressions included)."""
    return _name_collector()(expr)


@cache
def _name_collector() -> Callable[[Expression], list[NameExpr]]:
    try:  # mypy 1.19 and later (the compiled traverser of 2.4 refuses Python subclasses)
        from mypy.traverser import all_name_and_member_expressions
    except ImportError:
        pass
    else:
        return lambda expr: all_name_and_member_expressions(expr)[0]

    class NameCollector(TraverserVisitor):
        def __init__(self) -> None:
            super().__init__()
            self.names: list[NameExpr] = []

        def visit_name_expr(self, o: NameExpr, /) -> None:
            self.names.append(o)
            super().visit_name_expr(o)

    def collect(expr: Expression) -> list[NameExpr]:
        collector = NameCollector()
        expr.accept(collector)
        return collector.names

    return collect


def local_type_map(checker: Any) -> AbstractContextManager[object]:
    """The checker's context manager that keeps the types it infers inside out of its
    type map (a no-op where the checker has none)."""
    local = getattr(checker, "local_type_map", None)
    if local is None:
        return nullcontext()
    return local if hasattr(local, "__enter__") else local()  # a method before mypy 1.18


def validates_codes_before_plugins() -> bool:
    """Whether this mypy checks the configuration's error codes while parsing it, before
    any plugin has declared its own (mypy before 1.19)."""
    from mypy import config_parser

    return hasattr(config_parser, "validate_codes")


def restore_configured_codes(options: Options) -> None:
    """Apply the configuration's ``disable_error_code`` / ``enable_error_code`` keys that
    a mypy which validates them before loading plugins dropped (see the module's
    docstring); the plugin's codes must be declared first. Global keys are applied as
    mypy applies them after the command line (enabling wins over disabling); a section's
    keys go to its per-module options, where the section did not keep them. Codes that
    are still unknown stay dropped (mypy has said so). A no-op on a mypy that validates
    codes after loading plugins, or without a config file."""
    if not options.config_file or not validates_codes_before_plugins():
        return
    from mypy.config_parser import parse_config_file
    from mypy.errorcodes import error_codes

    parsed = Options()
    quiet = io.StringIO()
    parse_config_file(parsed, lambda: None, options.config_file, stdout=quiet, stderr=quiet)
    restored = False
    for key in _CODE_KEYS:
        # The command line's codes were added to what the configuration kept.
        kept: list[str] = getattr(options, key)
        missing = [c for c in getattr(parsed, key) if c in error_codes and c not in kept]
        if not missing:
            continue
        kept.extend(missing)
        codes = {error_codes[code] for code in missing}
        if key == "disable_error_code":
            options.disabled_error_codes.update(codes)
        else:
            options.enabled_error_codes.update(codes)
        restored = True
    if restored:
        options.disabled_error_codes -= options.enabled_error_codes  # as mypy does
    for glob, section in parsed.per_module_options.items():
        for key in _CODE_KEYS:
            current = options.per_module_options.get(glob, {})
            had, wanted = current.get(key), section.get(key)
            kept = list(had) if isinstance(had, list) else []
            listed = wanted if isinstance(wanted, list) else []
            missing = [c for c in listed if c in error_codes and c not in kept]
            if missing:  # (mypy leaves an empty list where it dropped the key)
                options.per_module_options[glob] = {**current, key: kept + missing}
                restored = True
    if restored and getattr(options, "_per_module_cache", None) is not None:
        options.build_per_module_cache()


def has_module_end_hook() -> bool:
    """Whether this mypy calls ``get_additional_indirect_deps`` once a module is checked."""
    return hasattr(Plugin, "get_additional_indirect_deps")


def add_module_end(tree: MypyFile, function_type: Instance) -> None:
    """Add ``__runnercheck_module_end__()`` to ``tree``'s top level (once), right after the
    last top-level statement that defines a class (in a function or a block too): a call
    of a typed function (``() -> None``) that mypy type-checks after those statements
    (not at the very end, which a top-level ``sys.exit()`` makes unreachable). The name
    refers to a function no symbol table holds, so nothing resolves it again: call this
    once semantic analysis is done (``schedule_patch``), never where mypy re-analyses a
    module's top level (``dmypy``)."""
    if any(_is_module_end(stmt) for stmt in tree.defs):
        return
    last = max((i for i, stmt in enumerate(tree.defs) if _defines_class(stmt)), default=None)
    if last is None:
        return
    func = FuncDef(MODULE_END, [], Block([]), CallableType([], [], [], NoneType(), function_type))
    func._fullname = MODULE_END
    ref = NameExpr(MODULE_END)
    ref.node = func
    ref.fullname = MODULE_END
    call = CallExpr(ref, [], [], [])
    stmt = ExpressionStmt(call)
    after = tree.defs[last]
    for node in (stmt, call, ref):
        node.set_line(after.end_line or after.line)
    tree.defs.insert(last + 1, stmt)


def _defines_class(stmt: Statement) -> bool:
    """Whether a class statement is ``stmt`` or inside it."""
    stack: list[Statement] = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, ClassDef):
            return True
        if isinstance(node, Decorator):
            stack.append(node.func)
        elif isinstance(node, OverloadedFuncDef):
            stack.extend(item for item in [*node.items, node.impl] if item is not None)
        elif isinstance(node, (FuncDef, WithStmt)):
            stack.append(node.body)
        elif isinstance(node, Block):
            stack.extend(node.body)
        elif isinstance(node, IfStmt):
            stack.extend([*node.body, *([node.else_body] if node.else_body else [])])
        elif isinstance(node, (ForStmt, WhileStmt)):
            stack.extend([node.body, *([node.else_body] if node.else_body else [])])
        elif isinstance(node, TryStmt):
            stack.extend([node.body, *node.handlers])
            stack.extend(block for block in (node.else_body, node.finally_body) if block)
    return False


def schedule_module_end(api: Any, tree: MypyFile) -> None:
    """Have :func:`add_module_end` run on ``tree`` once semantic analysis of its
    import cycle is complete (``api``: mypy's semantic analyser)."""
    function_type = api.named_type("builtins.function")
    api.schedule_patch(_PATCH_PRIORITY, lambda: add_module_end(tree, function_type))


def _is_module_end(stmt: object) -> bool:
    return (
        isinstance(stmt, ExpressionStmt)
        and isinstance(stmt.expr, CallExpr)
        and isinstance(stmt.expr.callee, NameExpr)
        and stmt.expr.callee.fullname == MODULE_END
    )
