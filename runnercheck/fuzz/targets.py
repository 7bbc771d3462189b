"""Resolving ``fuzz`` targets: ``module:Class``, a module, or a path, to input classes.

An input class is a concrete dataclass with the contract's ``as_dict_method``
(instance method) and ``from_dict_method`` (classmethod). A module or path
target yields every input class *defined* in it (not the ones it imports).
A path is imported under its dotted module name (the directories above it that are
packages), with its root on ``sys.path``, so that other ranks can import it too.

A path (a directory or a ``.py`` file) is swept: the static analysis names the input
classes there (:mod:`runnercheck.fuzz.facts`), only the modules that hold one are
imported, and a class whose module cannot be imported, or that is no input class once
imported, is an :class:`Unrunnable` with the reason instead of ending the run (when the
analysis finds none, every module there is imported and searched, as for a module).
The composed steps the analysis finds there (a worker's input and its runner's model
input rebuilt from one merged dict) follow the classes, each a :class:`SweptStep`.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from runnercheck.contract import Contract
from runnercheck.errors import UsageError
from runnercheck.files import walk
from runnercheck.fuzz import importing
from runnercheck.fuzz.facts import InputClass, analyse, module_name_for


@dataclass(frozen=True)
class Target:
    cls: type
    #: ``module:Qualname``, how reports and replay commands name the class.
    name: str
    #: Directories added to ``sys.path`` to import it (the other ranks add them too).
    sys_path: tuple[str, ...] = ()
    #: Found by sweeping a path: a class that cannot run is one line, not the run's end.
    swept: bool = False


@dataclass(frozen=True)
class SweptStep:
    """A composed step the analysis found in a swept path: the ``module:Class`` of each
    input class rebuilt from one merged dict, joined with ``+`` in that order."""

    spec: str


@dataclass(frozen=True)
class Unrunnable:
    """An input class a swept path holds that cannot run, and why."""

    name: str
    reason: str


def is_input_class(obj: object, contract: Contract) -> bool:
    if not (isinstance(obj, type) and dataclasses.is_dataclass(obj)):
        return False
    if inspect.isabstract(obj):
        return False
    as_dict = getattr(obj, contract.as_dict_method, None)
    from_dict: object = None
    for klass in obj.__mro__:
        if contract.from_dict_method in vars(klass):
            from_dict = vars(klass)[contract.from_dict_method]
            break
    return callable(as_dict) and isinstance(from_dict, classmethod)


def _import(module_name: str) -> ModuleType:
    importing.allow_importer(module_name)
    try:
        return importing.import_module(module_name)
    except importing.ImportTrialError as exc:
        raise UsageError(f"cannot import module {module_name!r}: {exc}") from None
    except ModuleNotFoundError as exc:
        if exc.name and module_name.startswith(exc.name):
            raise UsageError(f"cannot import module {module_name!r}: no such module") from None
        hint = ""
        if exc.name:
            top = exc.name.partition(".")[0]
            hint = f" (--stub-imports {top} fuzzes it with that package stubbed)"
        raise UsageError(f"cannot import module {module_name!r}: {exc}{hint}") from None
    except SystemExit as exc:  # the module called sys.exit() (or exit()) while imported
        raise UsageError(
            f"cannot import module {module_name!r}: it exited with status {_status(exc)} "
            "while being imported"
        ) from None
    except Exception as exc:
        raise UsageError(
            f"cannot import module {module_name!r}: {type(exc).__name__}: {exc}"
        ) from None


def _status(exc: SystemExit) -> str:
    code = exc.code
    if code is None:
        return "0"
    return str(code) if isinstance(code, int) else f"1 ({code})"


def _module_name_for(path: Path) -> tuple[str, Path]:
    """The dotted module name of a ``.py`` file and the directory to put on sys.path."""
    return module_name_for(path)


def _classes_in(module: ModuleType, contract: Contract, sys_path: tuple[str, ...]) -> list[Target]:
    found = []
    for obj in vars(module).values():
        if (
            isinstance(obj, type)
            and obj.__module__ == module.__name__
            and is_input_class(obj, contract)
        ):
            found.append(Target(obj, f"{module.__name__}:{obj.__qualname__}", sys_path))
    return found


def resolve(spec: str, contract: Contract) -> list[Target | Unrunnable | SweptStep]:
    """The input classes a target names (UsageError if none); for a path, also the
    composed steps the analysis finds there, after the classes."""
    path = Path(spec)
    if spec.endswith(".py") or path.is_dir() or (path.exists() and ":" not in spec):
        return _resolve_path(path, contract)
    module_name, colon, qualname = spec.partition(":")
    if not module_name:
        raise UsageError(f"target {spec!r}: expected module:Class, a module or a path")
    module = _import(module_name)
    if not colon:
        found = _classes_in(module, contract, ())
        if not found:
            raise UsageError(f"module {module_name!r} defines no input class")
        return [*found]
    obj: object = module
    for part in qualname.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise UsageError(f"module {module_name!r} has no attribute {qualname!r}")
    if not is_input_class(obj, contract):
        raise UsageError(
            f"{spec}: not an input class (a concrete dataclass with "
            f"{contract.as_dict_method}() and classmethod {contract.from_dict_method}())"
        )
    assert isinstance(obj, type)
    return [Target(obj, f"{module_name}:{qualname}")]


def _resolve_path(path: Path, contract: Contract) -> list[Target | Unrunnable | SweptStep]:
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    # the walker check and migrate use: regular files only (importing a FIFO would hang)
    files = sorted(source.path for source in walk([path]).files)
    facts = analyse(files, contract)
    if facts.classes:
        swept: list[Target | Unrunnable | SweptStep] = []
        swept.extend(_sweep(files, facts.classes.values(), contract))
        swept.extend(_steps(facts.steps, swept))
        return swept
    found: list[Target | Unrunnable | SweptStep] = []
    for file in files:
        module_name, root = _module_name_for(file)
        if not module_name:
            continue
        root_text = str(root)
        if root_text not in sys.path:
            sys.path.insert(0, root_text)
        module = _import(module_name)
        found.extend(_classes_in(module, contract, (root_text,)))
    if not found:
        raise UsageError(f"{path}: defines no input class")
    return found


def _sweep(
    files: list[Path], known: Iterable[InputClass], contract: Contract
) -> list[Target | Unrunnable]:
    """The input classes the analysis found in ``files``, each module imported once: a
    class that cannot run is an :class:`Unrunnable` with the reason."""
    by_module: dict[str, list[InputClass]] = {}
    for found in known:
        by_module.setdefault(found.module, []).append(found)
    roots = {module_name_for(file)[0]: str(module_name_for(file)[1]) for file in files}
    out: list[Target | Unrunnable] = []
    for module_name in sorted(by_module, key=lambda m: by_module[m][0].path):
        classes = sorted(by_module[module_name], key=lambda c: c.line)
        root_text = roots.get(module_name)
        if root_text is None:
            continue
        if root_text not in sys.path:
            sys.path.insert(0, root_text)
        try:
            module = _import(module_name)
        except UsageError as exc:
            out.extend(Unrunnable(c.key, str(exc)) for c in classes)
            continue
        seen: set[str] = set()
        for found in classes:
            seen.add(found.name)
            obj = getattr(module, found.name, None)
            if is_input_class(obj, contract):
                assert isinstance(obj, type)
                out.append(Target(obj, found.key, (root_text,), swept=True))
            else:
                out.append(Unrunnable(found.key, _why_not(obj, contract)))
        for target in _classes_in(module, contract, (root_text,)):
            if target.cls.__qualname__ not in seen:  # one the analysis could not read
                out.append(Target(target.cls, target.name, target.sys_path, swept=True))
    return out


def _steps(
    steps: Iterable[tuple[str, ...]], classes: list[Target | Unrunnable | SweptStep]
) -> list[SweptStep | Unrunnable]:
    """The composed steps of a swept path; one with a part that cannot run is an
    :class:`Unrunnable` naming that part."""
    cannot = {c.name: c.reason for c in classes if isinstance(c, Unrunnable)}
    out: list[SweptStep | Unrunnable] = []
    for parts in steps:
        spec = "+".join(parts)
        broken = next((p for p in parts if p in cannot), None)
        if broken is not None:
            out.append(Unrunnable(spec, f"its part {broken} cannot run"))
        else:
            out.append(SweptStep(spec))
    return out


def _why_not(obj: object, contract: Contract) -> str:
    """Why a class the analysis names is no input class once imported."""
    if not isinstance(obj, type):
        return "the module has no such class once imported"
    if not dataclasses.is_dataclass(obj):
        return "not a dataclass once imported"
    if inspect.isabstract(obj):
        missing = ", ".join(sorted(getattr(obj, "__abstractmethods__", ())))
        return f"abstract once imported ({missing} not implemented)"
    return (
        f"no {contract.as_dict_method}() and classmethod {contract.from_dict_method}() "
        "once imported"
    )


def resolve_all(specs: list[str], contract: Contract) -> list[Target]:
    """All targets' classes, each once, in order (UsageError for a class of a swept
    path that cannot run)."""
    seen: set[type] = set()
    result = []
    for spec in specs:
        for target in resolve(spec, contract):
            if isinstance(target, SweptStep):
                continue
            if isinstance(target, Unrunnable):
                raise UsageError(f"{target.name}: {target.reason}")
            if target.cls not in seen:
                seen.add(target.cls)
                result.append(target)
    return result
