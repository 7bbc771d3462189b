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

The values of ``as_broadcastable_tensor_dict`` are checked when mypy has finished
the module (``get_additional_indirect_deps`` is called then, before the module's
messages are flushed): their types are in the checker's type map by then. Under
``dmypy``, which may re-check a module's top level alone, they are checked with the
class, each value expression evaluated once every variable it reads has a type (the
rest wait for the module's end).

mypy before 2.4 has no hook once a module is checked: there the module's end is a
call the plugin adds to each module that defines a class, after its last top-level
statement that defines one, once semantic analysis is done; its function hook runs
when mypy checks that call, with the class statements and their method bodies checked
(:mod:`mypy_plugin.compat`, which also holds the other differences between the mypy
releases the plugin supports). Not under ``dmypy``: there, before 2.4, the classes
mypy's class hook never shows are not checked.

Cost
----
A run that finds its cache fresh imports the hooks, the rule catalog and the
fingerprint, nothing else. The checks (:mod:`mypy_plugin.session`) are imported
when mypy first checks a module; each distinct type is decided once per run
(:mod:`mypy_plugin.walk`).

Cache correctness
-----------------
* ``report_config_data``: a fingerprint of the text of the files the settings come
  from, the plugin's version and its sources (:mod:`mypy_plugin.fingerprint`); a
  change rechecks everything.
* ``get_additional_indirect_deps``: a runner's module depends on the modules of
  its input type's classes and of its bases, so an edit there re-checks the runner
  in an incremental run even when the runner's module does not import them (before
  mypy 2.4 the module's end adds them to the checker's ``module_refs``, which mypy
  records the same way).
* ``get_base_class_hook`` (semantic analysis): for ``dmypy`` (and
  ``--cache-fine-grained``), the module of each runner depends on every change
  inside those classes (wildcard triggers).
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from mypy.nodes import MypyFile, TypeInfo
from mypy.options import Options
from mypy.plugin import (
    ClassDefContext,
    FunctionContext,
    MethodContext,
    Plugin,
    ReportConfigContext,
)
from mypy.server.trigger import make_wildcard_trigger
from mypy.types import Type

import runnercheck
from mypy_plugin import errors, fatal
from mypy_plugin.compat import (
    MODULE_END,
    has_module_end_hook,
    restore_configured_codes,
    schedule_module_end,
)
from mypy_plugin.fingerprint import config_fingerprint, settings_sources, source_digest
from mypy_plugin.runner_input import input_classes, input_type, is_named, runner_base

if TYPE_CHECKING:
    from mypy_plugin.config import PluginSettings
    from mypy_plugin.session import CheckRun

_INIT_SUBCLASS = ".__init_subclass__"


class RunnercheckPlugin(Plugin):
    def __init__(self, options: Options) -> None:
        super().__init__(options)
        self._cwd = Path.cwd()
        self._fine_grained = bool(
            getattr(options, "fine_grained_incremental", False)
            or getattr(options, "cache_fine_grained", False)
        )
        self._config_data = config_fingerprint(
            runnercheck.__version__,
            source_digest(),
            settings_sources(options.config_file, self._cwd),
        )
        self._settings: PluginSettings | None = None
        self._runner_names: dict[str, bool] = {}
        self._input_names: dict[str, bool] = {}
        #: The module whose runners' dependencies were recorded, and those runners
        #: (mypy may run the base class hooks several times during semantic analysis).
        self._deps_module: MypyFile | None = None
        self._deps_done: set[TypeInfo] = set()
        self._checks: CheckRun | None = None
        #: A surprise met before any hook could report it (reported at the first class).
        self._startup_problem: str | None = None
        self._checks_failed = False
        #: Before mypy 2.4 (no hook once a module is checked): a call added to each
        #: module that defines a class stands for it (mypy_plugin.compat), except under
        #: dmypy, which re-analyses a module's top level.
        self._module_end_call = not has_module_end_hook() and not self._fine_grained
        self._module_ends: set[int] = set()
        try:
            # the plugin's codes are declared (mypy_plugin.errors) by now
            restore_configured_codes(options)
        except Exception as exc:
            self._startup_problem = (
                "cannot apply the configuration's disable_error_code/enable_error_code to "
                f"the plugin's codes: {type(exc).__name__}: {exc}"
            )

    @property
    def settings(self) -> PluginSettings:
        """The settings, read and validated on first use: mypy asks for a hook that
        needs them (or finishes checking a module) before it writes any cache, so a
        bad configuration stops every run that checks anything, and a run that reads
        all of its cache (same fingerprint: same settings files) needs none."""
        if self._settings is None:
            from mypy_plugin.config import read_settings
            from runnercheck.errors import ConfigError

            try:
                self._settings = read_settings(self.options.config_file, self._cwd)
            except ConfigError as exc:
                fatal(str(exc))
        return self._settings

    def checks(self) -> CheckRun:
        """The run's checks, loaded when mypy first type-checks something (a run that
        only reads its cache never imports them)."""
        if self._checks is None:
            from mypy_plugin.session import CheckRun

            self._checks = CheckRun(self, self.settings)
        return self._checks

    # --------------------------------------------------------------- mypy hooks
    def report_config_data(self, ctx: ReportConfigContext) -> Any:
        return self._config_data

    def get_method_hook(self, fullname: str) -> Callable[[MethodContext], Type] | None:
        if fullname.endswith(_INIT_SUBCLASS):
            return self._class_checked
        return None

    def get_function_hook(self, fullname: str) -> Callable[[FunctionContext], Type] | None:
        return self._module_end if fullname == MODULE_END else None

    def get_customize_class_mro_hook(
        self, fullname: str
    ) -> Callable[[ClassDefContext], None] | None:
        # called for every class statement during semantic analysis
        return self._module_has_class if self._module_end_call else None

    def get_base_class_hook(self, fullname: str) -> Callable[[ClassDefContext], None] | None:
        if not self._fine_grained:
            return None  # the dependencies it records serve dmypy (and its cache) only
        if self._designates_runner(fullname):
            return self._runner_analyzed
        inputs = self._input_names.get(fullname)
        if inputs is None:
            bases = self.settings.input_bases
            inputs = fullname in bases or fullname.rsplit(".", 1)[-1] in bases
            self._input_names[fullname] = inputs
        return self._input_analyzed if inputs else None

    def get_additional_indirect_deps(self, file: MypyFile) -> set[str]:
        # mypy calls this once a module is fully type-checked (bodies included), before
        # its error messages are flushed.
        checks = self._loaded_checks()
        return checks.module_done(file) if checks is not None else set()

    def _module_has_class(self, ctx: ClassDefContext) -> None:
        tree = getattr(ctx.api, "cur_mod_node", None)
        if not isinstance(tree, MypyFile) or tree.is_stub or id(tree) in self._module_ends:
            return
        self._module_ends.add(id(tree))
        try:
            schedule_module_end(ctx.api, tree)
        except Exception as exc:
            self._startup_problem = self._startup_problem or (
                f"cannot mark the end of module {tree.fullname} ({type(exc).__name__}: "
                f"{exc}); classes without a class hook there are not checked"
            )

    def _module_end(self, ctx: FunctionContext) -> Type:
        """The call :func:`~mypy_plugin.compat.add_module_end` added: mypy has checked
        the module's class statements (before mypy 2.4)."""
        checks = self._loaded_checks()
        tree = getattr(ctx.api, "tree", None)
        if checks is not None and isinstance(tree, MypyFile):
            try:
                deps = checks.module_done(tree, ctx.api)
                refs = getattr(ctx.api, "module_refs", None)
                if isinstance(refs, set):
                    refs.update(deps)  # recorded as indirect dependencies
            except Exception as exc:
                _internal(ctx, f"{type(exc).__name__}: {exc}")
        return ctx.default_return_type

    def _class_checked(self, ctx: MethodContext) -> Type:
        checks = self._loaded_checks()
        if self._startup_problem is not None:
            _internal(ctx, self._startup_problem)
            self._startup_problem = None
        if checks is None:
            return ctx.default_return_type
        try:
            checks.class_checked(ctx)
        except Exception as exc:  # never crash mypy: report it and go on
            _internal(ctx, f"{type(exc).__name__}: {exc}")
        return ctx.default_return_type

    def _loaded_checks(self) -> CheckRun | None:
        """:meth:`checks`, or None when they cannot be loaded (a mypy whose internals
        moved): said once, at the next class mypy checks, and the checks are off."""
        if self._checks is None and not self._checks_failed:
            try:
                return self.checks()
            except Exception as exc:
                self._checks_failed = True
                self._startup_problem = (
                    f"cannot load its checks ({type(exc).__name__}: {exc}); "
                    "the runner checks are off"
                )
        return self._checks

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
        checks = self.checks()
        checks.errors = getattr(ctx.api, "errors", None) or checks.errors

    def _runner_analyzed(self, ctx: ClassDefContext) -> None:
        self._input_analyzed(ctx)
        info = ctx.cls.info
        module = getattr(ctx.api, "cur_mod_node", None)
        if module is not self._deps_module or module is None:
            self._deps_module, self._deps_done = module, set()
        elif info in self._deps_done:
            return  # recorded in this module's dependencies already
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
        if all(cls.mro for cls in classes):
            self._deps_done.add(info)  # complete: a later pass would add the same


def _internal(ctx: MethodContext | FunctionContext, problem: str) -> None:
    ctx.api.fail(
        f"runnercheck plugin internal error: {problem} (please report it)",
        ctx.context,
        code=errors.INTERNAL,
    )
