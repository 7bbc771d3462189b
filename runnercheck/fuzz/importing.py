"""Importing the user's modules: held to a deadline, and with missing packages stubbed
when asked.

``fuzz`` has to import the classes it fuzzes, and a module can do anything while it is
imported: exit (``os._exit(7)``), kill or stop itself, stop its parent, or never
finish. Under :func:`guard` an import is first tried in a forked child held to the
deadline, so that each of those is one line naming the module instead of a silent exit
or a hang; only a module whose trial import finished is then imported here. (A child
that stops this process, its parent, holds no clock: the command's
:class:`~runnercheck.processes.Watchdog` ends the run at the deadline, and the trial
says what happened.)

With ``stubs`` (top-level package names, or ``"*"`` for every missing one imported by
the targets' own packages), a meta path finder placed after every other one serves a
stub module for each such package that is not installed, so that a class whose module
imports an engine's heavy dependencies can be fuzzed without them. Every stubbed
package is reported on stderr when first stubbed; the ranks stub the same packages
(:func:`stubbed` travels with each job). A stub module answers every attribute with a
stub class (usable as a base class, a decorator, a generic alias or a value).
"""

from __future__ import annotations

import ast
import contextlib
import importlib
import importlib.abc
import importlib.machinery
import importlib.util
import os
import signal
import sys
import time
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from types import FrameType, ModuleType
from typing import Any

from runnercheck.processes import Overrun

#: Seconds between two looks at a trial import.
_POLL = 0.02
#: Every missing top-level package imported by the targets' own modules.
ALL = "*"


@dataclass(frozen=True)
class Guard:
    #: Seconds an import may take (None: no trial import).
    deadline: float | None = None
    #: What ``--stub-imports`` named: package names, or ``("*",)``.
    stubs: tuple[str, ...] = ()


_ACTIVE: list[Guard] = []


@contextlib.contextmanager
def guard(deadline: float | None = None, stubs: Sequence[str] = ()) -> Iterator[Guard]:
    """Within the block, :func:`import_module` tries each import in a child first
    (``deadline``) and stubs the missing packages ``stubs`` names."""
    active = Guard(deadline, tuple(stubs))
    _ACTIVE.append(active)
    finder = install_stubs(active.stubs) if active.stubs else None
    try:
        yield active
    finally:
        _ACTIVE.remove(active)
        if finder is not None:
            finder.active = False


def import_module(name: str) -> ModuleType:
    """Import ``name``; under a :func:`guard`, after a trial import in a child held to
    its deadline. RuntimeError (one line) when the trial exits, dies or runs out of
    time."""
    active = _ACTIVE[-1] if _ACTIVE else None
    if active is not None and active.deadline is not None and name not in sys.modules:
        problem = _trial(name, active.deadline)
        if problem is not None:
            raise ImportTrialError(problem)
    return importlib.import_module(name)


class ImportTrialError(Exception):
    """The trial import of a module did not finish normally."""


def _trial(name: str, deadline: float) -> str | None:
    """Import ``name`` in a forked child; why it did not finish (None: it did, or it
    raised, which the import here reports with the real exception)."""
    try:
        pid = os.fork()
    except OSError:
        return None  # no trial possible: import here, as without a guard
    if pid == 0:  # the child: its own process group, quiet, exits whatever happens
        code = 0
        try:
            os.setpgid(0, 0)
            devnull = os.open(os.devnull, os.O_RDWR)
            os.dup2(devnull, 1)
            os.dup2(devnull, 2)
            importlib.import_module(name)
        except BaseException:
            code = 0  # an exception is reported by the import in the parent
        os._exit(code)
    end = time.monotonic() + deadline
    status = None
    try:
        while status is None:
            done, raw = os.waitpid(pid, os.WNOHANG | os.WUNTRACED)
            if done and os.WIFSTOPPED(raw):  # it stopped itself: it would never finish
                _kill_group(pid)
                _reap(pid)
                number = os.WSTOPSIG(raw)
                return (
                    f"it was stopped by signal {number} ({_signal_name(number)}) while being "
                    "imported"
                )
            if done:
                status = raw
            elif time.monotonic() > end:
                _kill_group(pid)
                os.waitpid(pid, 0)
                return f"it did not finish importing within the deadline of {deadline:g} s"
            else:
                time.sleep(_POLL)
    except Overrun as overrun:  # it stopped this process (its parent): the watchdog ended it
        _kill_group(pid)
        _reap(pid)
        return (
            f"it stopped runnercheck's own process (SIGSTOP) while being imported, and the "
            f"{overrun.limit} of {overrun.seconds:g} s passed"
        )
    _kill_group(pid)  # what the trial started in its group
    if os.WIFSIGNALED(status):
        number = os.WTERMSIG(status)
        return f"it was killed by signal {number} ({_signal_name(number)}) while being imported"
    code = os.WEXITSTATUS(status)
    if code != 0:
        return f"it exited with status {code} while being imported"
    return None


def _reap(pid: int) -> None:
    try:
        os.waitpid(pid, 0)
    except ChildProcessError:  # reaped already
        pass


def _kill_group(pid: int) -> None:
    try:
        os.killpg(pid, signal.SIGKILL)
    except OSError:
        pass


def _signal_name(number: int) -> str:
    try:
        return signal.Signals(number).name
    except ValueError:
        return "unknown signal"


# ------------------------------------------------------------------ stubs


class _StubMeta(type):
    """Stub classes: any attribute is another stub class, subscripting gives the class
    itself (``Foo[int]``), calling with one callable is a decorator that changes
    nothing, any other call gives an instance."""

    def __getattr__(cls, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        child = stub_class(name, f"{cls.__qualname__}.{name}", cls.__module__)
        setattr(cls, name, child)
        return child

    def __getitem__(cls, item: Any) -> Any:
        return cls

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if len(args) == 1 and not kwargs and callable(args[0]) and _is_stub(cls):
            return args[0]
        return super().__call__(*args, **kwargs)

    def __or__(cls, other: Any) -> Any:
        return cls

    def __ror__(cls, other: Any) -> Any:
        return cls


def _accept_anything(self: Any, *args: Any, **kwargs: Any) -> None:
    """A stub's constructor: takes whatever the real class would (a subclass passes
    its own arguments up with ``super().__init__(...)``)."""


def _subclass_with_keywords(cls: type, **kwargs: Any) -> None:
    """A subclass of a stub may pass class keywords (``msgspec.Struct, frozen=True``)."""


def _any_pydantic_schema(cls: type, source: Any, handler: Any) -> Any:
    """A stub as a pydantic field type (an engine's request models name the API
    package's classes): the field takes any value."""
    from pydantic_core import core_schema

    return core_schema.any_schema()


def stub_class(name: str, qualname: str, module: str) -> type:
    namespace = {
        "__qualname__": qualname,
        "__module__": module,
        "__init__": _accept_anything,
        "__init_subclass__": classmethod(_subclass_with_keywords),
        "__get_pydantic_core_schema__": classmethod(_any_pydantic_schema),
        "_runnercheck_stub": True,
    }
    return _StubMeta(name, (), namespace)


def _is_stub(cls: type) -> bool:
    """A stub class itself, not a class of the user's code derived from one."""
    return cls.__dict__.get("_runnercheck_stub", False) is True


#: The version a stubbed package reports (``triton.__version__``): a release number,
#: so that version comparisons parse.
STUB_VERSION = "0.0.0"


class StubModule(ModuleType):
    """A module of a package that is not installed: every attribute is a stub class,
    and ``__version__`` is :data:`STUB_VERSION`."""

    def __getattr__(self, name: str) -> Any:
        if name == "__version__":
            return STUB_VERSION
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        value = stub_class(name, name, self.__name__)
        setattr(self, name, value)
        return value


class _StubLoader(importlib.abc.Loader):
    def create_module(self, spec: importlib.machinery.ModuleSpec) -> ModuleType:
        module = StubModule(spec.name)
        module.__path__ = []  # a package: its submodules are stubs too
        return module

    def exec_module(self, module: ModuleType) -> None:
        return None


class StubFinder(importlib.abc.MetaPathFinder):
    """After every other finder: a stub for the missing packages it is told to stub."""

    def __init__(self, names: Sequence[str]) -> None:
        self.names = {n for n in names if n != ALL}
        self.everything = ALL in names
        #: Top-level packages stubbed so far, in order.
        self.stubbed: list[str] = []
        #: The top-level packages whose imports may be stubbed under "*".
        self.importers: set[str] = set()
        self.active = True

    def find_spec(self, fullname: str, path: Any = None, target: Any = None) -> Any:
        top = fullname.partition(".")[0]
        if top in self.stubbed:
            return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)
        if not self.active or "." in fullname:
            return None
        wanted = top in self.names or (self.everything and self._imported_by_a_target())
        if not wanted:
            return None
        self.stubbed.append(top)
        print(
            f"runnercheck fuzz: stubbed the missing package {top!r} "
            "(--stub-imports): its names are placeholders",
            file=sys.stderr,
            flush=True,
        )
        return importlib.machinery.ModuleSpec(fullname, _StubLoader(), is_package=True)

    def _imported_by_a_target(self) -> bool:
        """Whether the module running the import statement is one of the targets' own
        (not an installed library probing for an optional package), and the import is
        not itself a probe: an import under ``except ImportError`` (a platform's
        ``import libtpu``) or ``importlib.util.find_spec`` must still find nothing."""
        frame: FrameType | None = sys._getframe(2)
        importing = False
        while frame is not None:
            name = frame.f_globals.get("__name__", "")
            if frame.f_code.co_name == "_find_and_load":
                importing = True
            if not name.startswith("importlib") and "importlib._bootstrap" not in (
                frame.f_code.co_filename
            ):
                if not importing or _probe(frame):
                    return False
                top = name.partition(".")[0]
                return not self.importers or top in self.importers or top in self.stubbed
            frame = frame.f_back
        return False


#: Exceptions whose handler makes the import in its ``try`` a probe.
_PROBE_HANDLERS = frozenset({"ImportError", "ModuleNotFoundError", "Exception", "BaseException"})
#: Per file: the line ranges of ``try`` bodies that a probe handler guards.
_guarded_lines: dict[str, list[tuple[int, int]]] = {}


def _probe(frame: FrameType) -> bool:
    """Whether the statement ``frame`` runs lies in a ``try`` that catches ImportError
    (or what holds it): its code expects the import to fail where the package is
    missing."""
    filename = frame.f_code.co_filename
    if filename not in _guarded_lines:
        _guarded_lines[filename] = _probe_ranges(filename)
    line = frame.f_lineno
    return any(first <= line <= last for first, last in _guarded_lines[filename])


def _probe_ranges(filename: str) -> list[tuple[int, int]]:
    import linecache

    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return []
    ranges = []
    for node in ast.walk(tree):
        if (
            isinstance(node, ast.Try)
            and node.body
            and any(_catches_import_error(h.type) for h in node.handlers)
        ):
            ranges.append((node.body[0].lineno, node.body[-1].end_lineno or node.lineno))
    return ranges


def _catches_import_error(kind: ast.expr | None) -> bool:
    if kind is None:
        return True
    if isinstance(kind, ast.Tuple):
        return any(_catches_import_error(e) for e in kind.elts)
    name = kind.attr if isinstance(kind, ast.Attribute) else getattr(kind, "id", "")
    return name in _PROBE_HANDLERS


_find_spec = importlib.util.find_spec


def _find_spec_of_installed(name: str, package: str | None = None) -> Any:
    """``importlib.util.find_spec`` while stubbing: a stubbed package is not found, also
    once an import has stubbed it (a platform probe after the engine imported it)."""
    spec = _find_spec(name, package)
    if spec is not None and isinstance(spec.loader, _StubLoader):
        return None
    return spec


def install_stubs(names: Sequence[str]) -> StubFinder:
    """The stub finder (one per process), now also stubbing ``names``."""
    for finder in sys.meta_path:
        if isinstance(finder, StubFinder):
            finder.names |= {n for n in names if n != ALL}
            finder.everything = finder.everything or ALL in names
            finder.active = True
            return finder
    finder = StubFinder(names)
    sys.meta_path.append(finder)
    importlib.util.find_spec = _find_spec_of_installed
    return finder


def allow_importer(module_name: str) -> None:
    """Under ``"*"``, imports made by ``module_name``'s top-level package may be stubbed."""
    for finder in sys.meta_path:
        if isinstance(finder, StubFinder):
            finder.importers.add(module_name.partition(".")[0])


def stubbed() -> tuple[str, ...]:
    """The packages stubbed in this process so far (a rank stubs them too)."""
    for finder in sys.meta_path:
        if isinstance(finder, StubFinder):
            return tuple(finder.stubbed)
    return ()


def stub_in_rank(names: Sequence[str]) -> None:
    """In a rank: stub exactly the packages the driver's process stubbed, silently (the
    driver's process has said so)."""
    if not names:
        return
    finder = install_stubs(())
    for name in names:
        if name not in finder.stubbed:
            finder.stubbed.append(name)
