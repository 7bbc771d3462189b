"""Load an engine shape (a package holding ``worker.py`` and ``model_runner.py``) by name
or from any directory, e.g. a migrated copy of the legacy shape."""

import hashlib
import importlib
import importlib.machinery
import importlib.util
import sys
from pathlib import Path
from types import ModuleType
from typing import Optional

SHAPES = ("legacy", "merged")
_PACKAGE = __name__.rsplit(".", 1)[0]


class EngineLoadError(Exception):
    """The engine directory or worker class cannot be loaded."""


def shape_source_dir(shape: str) -> Path:
    """The directory holding the sources of a built-in shape."""
    if shape not in SHAPES:
        raise EngineLoadError(
            f"unknown engine shape {shape!r} (expected one of {', '.join(SHAPES)})"
        )
    return Path(__file__).resolve().parent / shape


#: Worker variants: ``module:Class`` inside the engine package.
WORKERS = {"default": "worker:Worker", "cpu": "cpu_worker:CPUWorker"}


def check_engine(shape: Optional[str], engine_dir: Optional[str], worker: str) -> None:
    """Fail early, without importing anything, when the engine cannot be found."""
    module_name, sep, class_name = WORKERS.get(worker, worker).partition(":")
    if not (sep and module_name and class_name):
        raise EngineLoadError(f"worker {worker!r}: expected default, cpu or module:Class")
    if engine_dir is None:
        path = shape_source_dir(shape or "")
    else:
        path = Path(engine_dir)
        if not path.is_dir():
            raise EngineLoadError(f"{engine_dir}: not a directory")
    if not (path / f"{module_name}.py").is_file():
        raise EngineLoadError(f"{path}: no {module_name}.py in the engine package")


def load_engine_package(
    shape: Optional[str] = None, engine_dir: Optional[str] = None
) -> ModuleType:
    """The engine package: a built-in shape, or the directory ``engine_dir`` loaded as a
    package under a private name (its modules import each other relatively)."""
    if engine_dir is None:
        if shape is None:
            raise EngineLoadError("give an engine shape or an engine directory")
        shape_source_dir(shape)
        return importlib.import_module(f"{_PACKAGE}.{shape}")
    path = Path(engine_dir).resolve()
    if not path.is_dir():
        raise EngineLoadError(f"{engine_dir}: not a directory")
    name = "_runnercheck_engine_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    if name in sys.modules:
        return sys.modules[name]
    init = path / "__init__.py"
    if init.is_file():
        spec = importlib.util.spec_from_file_location(
            name, init, submodule_search_locations=[str(path)]
        )
        assert spec is not None and spec.loader is not None
        module = importlib.util.module_from_spec(spec)
        sys.modules[name] = module
        try:
            spec.loader.exec_module(module)
        except Exception:
            del sys.modules[name]
            raise
    else:
        module = importlib.util.module_from_spec(
            importlib.machinery.ModuleSpec(name, None, is_package=True)
        )
        module.__path__ = [str(path)]
        sys.modules[name] = module
    return module


def load_worker_class(package: ModuleType, worker: str) -> type:
    """``worker`` is ``module:Class`` inside the package, e.g. ``worker:Worker``."""
    module_name, _, class_name = worker.partition(":")
    where = getattr(package, "__path__", ["?"])[0]
    if not (Path(where) / f"{module_name}.py").is_file():
        raise EngineLoadError(f"{where}: no {module_name}.py in the engine package")
    module = importlib.import_module(f"{package.__name__}.{module_name}")
    cls = getattr(module, class_name, None)
    if not isinstance(cls, type):
        raise EngineLoadError(f"{where}/{module_name}.py: no class {class_name}")
    return cls
