"""One mypy run's checking: the class checks, the checks left for a module's end, and
the state they share (verdicts on types, pending dict values, classes seen).

Imported by :mod:`mypy_plugin.hooks` when mypy first type-checks a module, so that a
run that only reads its cache pays nothing for it.
"""

from __future__ import annotations

from dataclasses import dataclass

from mypy.errors import Errors
from mypy.nodes import Context, MypyFile, TypeInfo
from mypy.plugin import CheckerPluginInterface, MethodContext, Plugin

from mypy_plugin import errors
from mypy_plugin.broadcastable import BroadcastableTypes
from mypy_plugin.classes import (
    checker_for,
    class_of_init_subclass_call,
    errors_of_build,
    module_classes,
)
from mypy_plugin.config import PluginSettings
from mypy_plugin.input_checks import DictValue, InputChecker, defines_input_methods
from mypy_plugin.report import Reporter, class_scope, module_end_file, module_scope
from mypy_plugin.runner_checks import RunnerChecker
from mypy_plugin.runner_input import runner_base


@dataclass(frozen=True)
class _Pending:
    """Dict values of an input class to check once its module's bodies are checked."""

    api: CheckerPluginInterface
    info: TypeInfo
    values: list[DictValue]


class CheckRun:
    """The checks of one run, for ``plugin`` (whose settings and module table it uses)."""

    def __init__(self, plugin: Plugin, settings: PluginSettings) -> None:
        self.plugin = plugin
        self.settings = settings
        self._reported_no_scope = False
        #: Modules whose changes must re-check a module's runners, per module.
        self.indirect_deps: dict[str, set[str]] = {}
        #: Input classes per module whose dict values are checked once the module's
        #: function bodies are (mypy checks them after the class statements).
        self._pending_values: dict[str, dict[str, _Pending]] = {}
        #: Verdicts on types, shared by every class of the run (each type decided once).
        self._types = BroadcastableTypes(settings.broadcastable_types)
        self._generation: object = None
        #: What the runner checks decide once per run.
        self._known: dict[object, object] = {}
        #: mypy's error store, from the first hook that shows it (for the classes
        #: checked after their module, which no hook shows).
        self.errors: Errors | None = None
        #: Classes the class hook has seen, and mypy's checker, per module being checked.
        self._reached: dict[str, set[TypeInfo]] = {}
        self._checkers: dict[str, CheckerPluginInterface] = {}
        self._fine_grained = bool(getattr(plugin.options, "fine_grained_incremental", False))

    def class_checked(self, ctx: MethodContext) -> None:
        """The class hook: mypy has checked the body of a class statement."""
        if getattr(ctx.api, "tscope", None) is None:
            if not self._reported_no_scope:
                self._reported_no_scope = True
                ctx.api.fail(
                    "runnercheck plugin internal error: cannot tell which class mypy is "
                    "checking (its type checker has no tscope); runner checks are off",
                    ctx.context,
                    code=errors.INTERNAL,
                )
            return
        info = class_of_init_subclass_call(ctx)
        if info is None:
            return
        self._same_build(ctx.api)
        self.errors = getattr(ctx.api, "errors", None) or self.errors
        self._reached.setdefault(info.module_name, set()).add(info)
        self._checkers[info.module_name] = ctx.api
        self._check_class(ctx.api, info)

    def module_done(
        self, file: MypyFile, checker: CheckerPluginInterface | None = None
    ) -> set[str]:
        """mypy has finished ``file`` (bodies included) and not flushed its messages yet:
        check what needed the inferred types of expressions in function bodies, and the
        classes the class hook never saw; return the module's extra dependencies.
        ``checker``: mypy's checker of ``file``, where the caller has it."""
        api = self._checkers.pop(file.fullname, None) or checker
        unreached = self._unreached(file)
        try:
            if unreached and api is None:
                api = self._checker_for(file)
            if api is not None and (unreached or self._pending_values.get(file.fullname)):
                with module_end_file(api):
                    for info in unreached or ():
                        with class_scope(api, info):
                            self._check_class(api, info, at_module_end=True)
                    for pending in self._pending_values.pop(file.fullname, {}).values():
                        self._check_values_late(pending)
        except Exception as exc:  # never crash mypy: report it where mypy's checker is
            _report_module_internal(api, file, exc)
        self._pending_values.pop(file.fullname, None)
        deps = self.indirect_deps.pop(file.fullname, set())
        deps.discard(file.fullname)
        return deps

    def _check_class(
        self, api: CheckerPluginInterface, info: TypeInfo, at_module_end: bool = False
    ) -> None:
        """The checks of one class. Its dict values wait for the module's end (their
        types are known then), except under ``dmypy``, which may re-check a class
        statement alone."""
        pending = self._pending_values.get(info.module_name)
        if pending:
            pending.pop(info.fullname, None)  # a class checked again (dmypy)
        try:
            is_input = defines_input_methods(info, self.settings)
            base = runner_base(info, self.settings.runner_bases) if info.mro else None
            if not is_input and base is None:
                return  # most classes: neither a runner nor an input
            reporter = Reporter(api, self.settings)
            if is_input:
                checker = InputChecker(info, self.settings, reporter, self._types)
                untyped = checker.run(values_now=at_module_end or self._fine_grained)
                if untyped:
                    module_pending = self._pending_values.setdefault(info.module_name, {})
                    module_pending[info.fullname] = _Pending(api, info, untyped)
            if base is not None:
                runner = RunnerChecker(info, self.settings, reporter, self._known)
                runner.run(base)
                if runner.dependencies:
                    deps = self.indirect_deps.setdefault(info.module_name, set())
                    deps.update(runner.dependencies)
        except Exception as exc:  # never crash mypy: report it and go on
            _report_internal(api, info, exc)

    def _unreached(self, file: MypyFile) -> list[TypeInfo] | None:
        """The classes of ``file`` that the class hook did not see (a custom metaclass,
        a class in a function mypy did not check) and that the checks concern; None
        when mypy reports nothing for the module, or when there is nowhere to report."""
        reached = self._reached.pop(file.fullname, set())
        if file.is_stub or (self.errors is not None and file.path in self.errors.ignored_files):
            return None
        unreached = [
            info for info in module_classes(file) if info not in reached and self._concerns(info)
        ]
        if not unreached:
            return None
        if self.errors is None and self.plugin._modules is not None:
            self.errors = errors_of_build(self.plugin._modules)
        if self.errors is None or file.path in self.errors.ignored_files:
            return None
        return unreached

    def _checker_for(self, file: MypyFile) -> CheckerPluginInterface | None:
        """A type checker for ``file`` (when no class hook ran in it)."""
        options = self.plugin.options.clone_for_module(file.fullname)
        if options.ignore_errors or self.errors is None:
            return None
        api = checker_for(self.errors, self.plugin._modules or {}, options, file, self.plugin)
        self._same_build(api)
        return api

    def _concerns(self, info: TypeInfo) -> bool:
        """Whether ``info`` is a runner or defines an input method (the classes checked)."""
        if defines_input_methods(info, self.settings):
            return True
        return bool(info.mro) and runner_base(info, self.settings.runner_bases) is not None

    def _check_values_late(self, pending: _Pending) -> None:
        api, info = pending.api, pending.info
        reporter = Reporter(api, self.settings, hold=True)
        try:
            checker = InputChecker(info, self.settings, reporter, self._types)
            member = checker.member(self.settings.config.as_dict_method)
            if member is not None:
                checker.check_values(member, pending.values)
        except Exception as exc:
            with class_scope(api, info):
                _report_internal(api, info, exc)
        if reporter.held:
            with class_scope(api, info):  # as if mypy were inside the class again
                reporter.release()

    def _same_build(self, api: CheckerPluginInterface) -> None:
        """Forget the verdicts on types when a new build starts in the same process
        (``dmypy`` keeps the plugin between runs and updates classes in place). mypy's
        error store gets a fresh message map exactly then (``Errors.reset``)."""
        errors_store = getattr(api, "errors", None)
        marker = getattr(errors_store, "error_info_map", api)
        if marker is not self._generation:
            self._generation = marker
            self._types.clear()
            self._known.clear()


def _report_internal(api: CheckerPluginInterface, info: TypeInfo, exc: Exception) -> None:
    api.fail(
        f'runnercheck plugin internal error while checking "{info.fullname}": '
        f"{type(exc).__name__}: {exc} (please report it)",
        info.defn,
        code=errors.INTERNAL,
    )


def _report_module_internal(
    api: CheckerPluginInterface | None, file: MypyFile, exc: Exception
) -> None:
    """A surprise at a module's end, reported at its first line (nowhere without a
    checker of the module: the class hook has reported what it met there)."""
    if api is None:
        return
    try:
        with module_end_file(api), module_scope(api):
            api.fail(
                f'runnercheck plugin internal error at the end of module "{file.fullname}": '
                f"{type(exc).__name__}: {exc} (please report it)",
                Context(line=1),
                code=errors.INTERNAL,
            )
    except Exception:  # mypy's error store itself is out of reach
        pass
