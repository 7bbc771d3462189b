"""Resolving ``fuzz`` targets: ``module:Class``, a module, or a path, to input classes.

An input class is a concrete dataclass with the contract's ``as_dict_method``
(instance method) and ``from_dict_method`` (classmethod). A module or path
target yields every input class *defined* in it (not the ones it imports).
A path is imported under its dotted module name (the directories above it that are
packages), with its root on ``sys.path``, so that other ranks can import it too.
"""

from __future__ import annotations

import dataclasses
import inspect
import sys
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from runnercheck.contract import Contract
from runnercheck.errors import UsageError
from runnercheck.files import walk
from runnercheck.fuzz import importing


@dataclass(frozen=True)
class Target:
    cls: type
    #: ``module:Qualname``, how reports and replay commands name the class.
    name: str
    #: Directories added to ``sys.path`` to import it (the other ranks add them too).
    sys_path: tuple[str, ...] = ()


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
    path = path.resolve()
    parts = [path.stem] if path.name != "__init__.py" else []
    directory = path.parent
    while (directory / "__init__.py").is_file():
        parts.insert(0, directory.name)
        directory = directory.parent
    return ".".join(parts), directory


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


def resolve(spec: str, contract: Contract) -> list[Target]:
    """The input classes a target names (UsageError if none)."""
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
        return found
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


def _resolve_path(path: Path, contract: Contract) -> list[Target]:
    if not path.exists():
        raise UsageError(f"{path}: no such file or directory")
    # the walker check and migrate use: regular files only (importing a FIFO would hang)
    files = sorted(source.path for source in walk([path]).files)
    found: list[Target] = []
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


def resolve_all(specs: list[str], contract: Contract) -> list[Target]:
    """All targets' classes, each once, in order."""
    seen: set[type] = set()
    result = []
    for spec in specs:
        for target in resolve(spec, contract):
            if target.cls not in seen:
                seen.add(target.cls)
                result.append(target)
    return result
