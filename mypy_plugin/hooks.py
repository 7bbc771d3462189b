"""The mypy plugin class: thin hooks that hand over to the checks.

When the checks run
-------------------
The checks need complete types (MROs, analysed signatures, the inferred types
of expressions), so they run in mypy's type-checking pass, not during semantic
analysis. mypy has no "class checked" hook, but after checking a class body it
type-checks the implicit ``Base.__init_subclass__()`` call that the class
statement makes (``TypeChecker.check_init_subclass``), at the class's line and
inside the class's scope. A method hook on ``__init_subclass__`` therefore runs
once per class statement with the checker's API; it returns mypy's own result
unchanged and runs :class:`~mypy_plugin.runner_checks.RunnerChecker` and
:class:`~mypy_plugin.input_checks.InputChecker` on that class (found as
:mod:`mypy_plugin.classes` says, also inside functions). The classes that mypy
makes no such call for (a custom metaclass, even an ``ABCMeta`` subclass; a class
in a function mypy does not check) are checked when mypy has finished their module.

mypy checks method bodies after the class statements (and ``dmypy`` may re-check a
module's top level alone), so the values of ``as_broadcastable_tensor_dict`` get
their types from the checker's type map when the body was checked, else by
evaluating the value expression when every variable it reads has a type; the rest
are checked when mypy has finished the module (``get_additional_indirect_deps`` is
called then, before the module's messages are flushed).

Cache correctness
-----------------
* ``report_config_data``: a fingerprint of the effective settings, the plugin's
  version and its sources; a change rechecks everything.
* ``get_additional_indirect_deps``: a runner's module depends on the modules of
  its input type's classes and of its bases, so an edit there re-checks the runner
  in an incremental run even when the runner's module does not import them.
* ``get_base_class_hook`` (semantic analysis): for ``dmypy``, the module of each
  runner depends on every change inside those classes (wildcard triggers).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path
from typing import Any

from mypy.errors import Errors
from mypy.nodes import MypyFile, TypeInfo
from mypy.options import Options
from mypy.plugin import (
    CheckerPluginInterface,
    ClassDefContext,
    MethodContext,
    Plugin,
    ReportConfigContext,
)
from mypy.server.trigger import make_wildcard_trigger
from mypy.types import Type

from mypy_plugin import errors, fatal
from mypy_plugin.broadcastable import BroadcastableTypes
from mypy_plugin.classes import (
    checker_for,
    class_of_init_subclass_call,
    errors_of_build,
    module_classes,
)
from mypy_plugin.config import (
    PluginSettings,
    config_fingerprint,
    read_settings,
    source_digest,
)
from mypy_plugin.input_checks import DictValue, InputChecker, defines_input_methods
from mypy_plugin.report import Reporter, module_end_scope
from mypy_plugin.runner_checks import RunnerChecker
from mypy_plugin.runner_input import input_classes, input_type, is_named, runner_base
from runnercheck.errors import ConfigError

_INIT_SUBCLASS = ".__init_subclass__"


@dataclass(frozen=True)
class _Pending:
    """Dict values of an input class to check once its module's bodies are checked."""

    api: CheckerPluginInterface
    info: TypeInfo
    values: list[DictValue]


def _runnercheck_version() -> str:
    try:
        return version("runnercheck")
    except PackageNotFoundError:  # pragma: no cover - running from a bare checkout
        return "unknown"


class RunnercheckPlugin(Plugin):
    def __init__(self, options: Options) -> None:
        super().__init__(options)
        try:
            self.settings: PluginSettings = read_settings(options.config_file, Path.cwd())
        except ConfigError as exc:
            fatal(str(exc))
        self._config_data = config_fingerprint(
            _runnercheck_version(), source_digest(), self.settings.to_data()
        )
        self._runner_names: dict[str, bool] = {}
        self._reported_no_scope = False
        self._indirect_deps: dict[str, set[str]] = {}
        #: Input classes per module whose dict values are checked once the module's
        #: function bodies are (mypy checks them after the class statements).
        self._pending_values: dict[str, dict[str, _Pending]] = {}
        #: Verdicts on types, shared by every class of the run (each type decided once).
        self._types = BroadcastableTypes(self.settings.broadcastable_types)
        self._generation: object = None
        #: mypy's error store, from the first hook that shows it (for the classes
        #: checked after their module, which no hook shows).
        self._errors: Errors | None = None
        #: Classes the class hook has seen, and mypy's checker, per module being checked.
        self._reached: dict[str, set[TypeInfo]] = {}
        self._checkers: dict[str, CheckerPluginInterface] = {}

    # --------------------------------------------------------------- mypy hooks
    def report_config_data(self, ctx: ReportConfigContext) -> Any:
        return self._config_data

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname.endswith(_INIT_SUBCLASS):
            return self._class_checked
        return None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        if self._designates_runner(fullname):
            return self._runner_analyzed
        if fullname.rsplit(".", 1)[-1] in self.settings.input_bases or (
            fullname in self.settings.input_bases
        ):
            return self._input_analyzed
        return None

    def get_additional_indirect_deps(self, file: MypyFile) -> set[str]:
        # mypy calls this once a module is fully type-checked (bodies included), before
        # its error messages are flushed: the moment for the checks that need the
        # inferred types of expressions in function bodies, and for the classes that
        # the class hook never saw.
        self._check_unreached(file)
        self._checkers.pop(file.fullname, None)
        for pending in self._pending_values.pop(file.fullname, {}).values():
            self._check_values_late(pending)
        deps = self._indirect_deps.pop(file.fullname, set())
        deps.discard(file.fullname)
        return deps

    # ------------------------------------------------------------- the checks
    def _class_checked(self, ctx: MethodContext) -> Type:
        if getattr(ctx.api, "tscope", None) is None:
            if not self._reported_no_scope:
                self._reported_no_scope = True
                ctx.api.fail(
                    "runnercheck plugin internal error: cannot tell which class mypy is "
                    "checking (its type checker has no tscope); runner checks are off",
                    ctx.context,
                    code=errors.INTERNAL,
                )
            return ctx.default_return_type
        info = class_of_init_subclass_call(ctx)
        if info is None:
            return ctx.default_return_type
        self._same_build(ctx.api)
        self._errors = getattr(ctx.api, "errors", None) or self._errors
        self._reached.setdefault(info.module_name, set()).add(info)
        self._checkers[info.module_name] = ctx.api
        self._check_class(ctx.api, info)
        return ctx.default_return_type

    def _check_class(self, api: CheckerPluginInterface, info: TypeInfo) -> None:
        reporter = Reporter(api, self.settings)
        try:
            pending = self._pending_values.setdefault(info.module_name, {})
            pending.pop(info.fullname, None)
            if defines_input_methods(info, self.settings):
                untyped = InputChecker(info, self.settings, reporter, self._types).run()
                if untyped:
                    pending[info.fullname] = _Pending(api, info, untyped)
            runner = RunnerChecker(info, self.settings, reporter)
            runner.run()
            if runner.dependencies:
                self._indirect_deps.setdefault(info.module_name, set()).update(runner.dependencies)
        except Exception as exc:  # never crash mypy: report it and go on
            _report_internal(api, info, exc)

    def _check_unreached(self, file: MypyFile) -> None:
        """Check the classes of ``file`` that the class hook did not see (a custom
        metaclass, a class in a function mypy did not check), now that mypy has
        finished the module."""
        reached = self._reached.pop(file.fullname, set())
        if file.is_stub or (self._errors is not None and file.path in self._errors.ignored_files):
            return  # mypy reports nothing for this module
        unreached = [
            info for info in module_classes(file) if info not in reached and self._concerns(info)
        ]
        if not unreached:
            return
        api = self._checkers.get(file.fullname)
        try:
            if self._errors is None and self._modules is not None:
                self._errors = errors_of_build(self._modules)
            errors = self._errors
            if errors is None or file.path in errors.ignored_files:
                return  # nowhere to report, or mypy reports nothing for this module
            if api is None:
                options = self.options.clone_for_module(file.fullname)
                if options.ignore_errors:
                    return
                api = checker_for(errors, self._modules or {}, options, file, self)
            self._same_build(api)
            for info in unreached:
                with module_end_scope(api, info):
                    self._check_class(api, info)
        except Exception:  # pragma: no cover - mypy's internals moved; stay silent
            return

    def _concerns(self, info: TypeInfo) -> bool:
        """Whether ``info`` is a runner or defines an input method (the classes checked)."""
        if defines_input_methods(info, self.settings):
            return True
        return bool(info.mro) and runner_base(info, self.settings.runner_bases) is not None

    def _check_values_late(self, pending: _Pending) -> None:
        api, info = pending.api, pending.info
        try:
            with module_end_scope(api, info):
                try:
                    reporter = Reporter(api, self.settings)
                    checker = InputChecker(info, self.settings, reporter, self._types)
                    member = checker.member(self.settings.config.as_dict_method)
                    if member is not None:
                        checker.check_values(member, pending.values)
                except Exception as exc:
                    _report_internal(api, info, exc)
        except Exception:  # pragma: no cover - mypy's internals moved; stay silent
            return

    def _same_build(self, api: CheckerPluginInterface) -> None:
        """Forget the verdicts on types when a new build starts in the same process
        (``dmypy`` keeps the plugin between runs and updates classes in place). mypy's
        error store gets a fresh message map exactly then (``Errors.reset``)."""
        errors_store = getattr(api, "errors", None)
        marker = getattr(errors_store, "error_info_map", api)
        if marker is not self._generation:
            self._generation = marker
            self._types.clear()

    # ----------------------------------------------------------- dependencies
    def _designates_runner(self, fullname: str) -> bool:
        """Whether a base class named ``fullname`` makes its subclasses runners (cached
        once the class is known: a class's ancestors do not change within a run)."""
        known = self._runner_names.get(fullname)
        if known is not None:
            return known
        bases = self.settings.runner_bases
        if fullname in bases or fullname.rsplit(".", 1)[-1] in bases:
            self._runner_names[fullname] = True
            return True
        try:
            symbol = self.lookup_fully_qualified(fullname)
        except Exception:  # an incomplete module during semantic analysis
            return False
        node = symbol.node if symbol is not None else None
        if not isinstance(node, TypeInfo) or not node.mro:
            return False
        answer = is_named(node, bases) or runner_base(node, bases) is not None
        self._runner_names[fullname] = answer
        return answer

    def _input_analyzed(self, ctx: ClassDefContext) -> None:
        self._errors = getattr(ctx.api, "errors", None) or self._errors

    def _runner_analyzed(self, ctx: ClassDefContext) -> None:
        self._input_analyzed(ctx)
        info = ctx.cls.info
        try:
            base = runner_base(info, self.settings.runner_bases)
            if base is None:
                return
            t = input_type(info, base)
            classes = [info] + ([cls for _, cls in input_classes(t)] if t is not None else [])
        except Exception:
            # Semantic analysis may still hold incomplete types here; the checks
            # themselves run (and report surprises) in the type-checking pass.
            return
        for cls in classes:
            for ancestor in cls.mro:
                if ancestor.fullname != "builtins.object":
                    ctx.api.add_plugin_dependency(make_wildcard_trigger(ancestor.fullname))


def _report_internal(api: CheckerPluginInterface, info: TypeInfo, exc: Exception) -> None:
    api.fail(
        f'runnercheck plugin internal error while checking "{info.fullname}": '
        f"{type(exc).__name__}: {exc} (please report it)",
        info.defn,
        code=errors.INTERNAL,
    )
