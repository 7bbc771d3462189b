"""Reporting the plugin's errors through mypy's type checker."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from typing import Any

from mypy.errorcodes import ErrorCode
from mypy.messages import format_type
from mypy.nodes import Context, TypeInfo
from mypy.plugin import CheckerPluginInterface
from mypy.types import Type

from mypy_plugin.config import PluginSettings
from mypy_plugin.errors import RULE_CODES


class Reporter:
    """Sends errors to mypy, honouring ``select``/``ignore`` of the settings."""

    def __init__(
        self, api: CheckerPluginInterface, settings: PluginSettings, hold: bool = False
    ) -> None:
        self.api = api
        self.settings = settings
        #: With ``hold``, errors wait here for :meth:`release` (made in the right scope
        #: only when there is something to report).
        self.held: list[tuple[ErrorCode, str, Context]] | None = [] if hold else None

    def fmt(self, typ: Type) -> str:
        """A type as mypy's own messages show it (quoted)."""
        return format_type(typ, self.api.options)

    def error(self, code: ErrorCode, message: str, context: Context) -> None:
        """Report ``message`` at ``context``. Errors belong to the module's top-level
        target, which ``dmypy`` re-checks (and the plugin with it) when they must be
        regenerated."""
        if not self.settings.reports(RULE_CODES[code]):
            return
        if self.held is not None:
            self.held.append((code, message, context))
        else:
            self.api.fail(message, context, code=code)

    def silences(self, mypy_code: str, line: int) -> bool:
        """Whether ``line`` of the checked module carries ``# type: ignore[...]`` naming
        mypy's ``mypy_code`` (a bare ``# type: ignore`` silences the plugin's codes too)."""
        checker: Any = self.api
        ignored = getattr(getattr(checker, "errors", None), "ignored_lines", None)
        if not isinstance(ignored, dict):
            return False
        codes = ignored.get(getattr(checker, "path", None), {}).get(line)
        return codes is not None and mypy_code in codes

    def release(self) -> None:
        """Report the errors held so far."""
        held, self.held = self.held or [], None
        for code, message, context in held:
            self.api.fail(message, context, code=code)


@contextmanager
def module_end_file(api: CheckerPluginInterface) -> Iterator[None]:
    """Report into the checker's module after its type-checking passes are over (file,
    per-module options); :func:`class_scope` then says which class."""
    checker: Any = api
    errors = checker.errors
    saved = (errors.file, errors.target_module, errors.options, errors.scope)
    errors.set_file(checker.path, checker.tree.fullname, checker.options, scope=checker.tscope)
    try:
        yield
    finally:
        file, module, options, scope = saved
        errors.set_file(file, module, options, scope=scope)


def class_scope(api: CheckerPluginInterface, info: TypeInfo) -> AbstractContextManager[None]:
    """Inside :func:`module_end_file`: as if the checker were inside ``info`` again (the
    target that errors belong to)."""
    checker: Any = api
    tscope = checker.tscope
    if (
        getattr(tscope, "module", None) == checker.tree.fullname
        and not getattr(tscope, "classes", None)
        and getattr(tscope, "function", None) is None
    ):
        # still at the module's top level (before mypy 2.4 the module's end is a call
        # there, see mypy_plugin.compat): enter the class, as a class statement does; a
        # saved scope would end the module's scope on its way out
        entered: AbstractContextManager[None] = tscope.class_scope(info)
        return entered
    scope: AbstractContextManager[None] = tscope.saved_scope((checker.tree.fullname, info, None))
    return scope


def module_scope(api: CheckerPluginInterface) -> AbstractContextManager[None]:
    """Inside :func:`module_end_file`: at the checker's module's top level (where it is
    already, before mypy 2.4)."""
    checker: Any = api
    tscope = checker.tscope
    if getattr(tscope, "module", None) == checker.tree.fullname:
        return nullcontext()
    scope: AbstractContextManager[None] = tscope.saved_scope((checker.tree.fullname, None, None))
    return scope
