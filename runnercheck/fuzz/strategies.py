"""Hypothesis strategies for input classes, built from their dataclass annotations.

Supported annotations: ``None``, ``bool``, ``int``, ``float``, ``complex``, ``str``,
``bytes``, ``Any``, ``Literal``, enums, ``Optional``/``Union``/``X | Y``,
``List``/``Sequence``, ``Tuple`` (fixed and ``...``), ``Dict``/``Mapping``,
``Set``/``FrozenSet``, ``Annotated``, ``NewType``, nested dataclasses, named tuples,
classes whose ``__init__`` is fully annotated, ``torch.dtype``, ``torch.Size`` and
``torch.Tensor`` (many dtypes; 0-dim, empty, small and large-ish shapes; contiguous,
transposed, strided, offset and expanded layouts; zeros, random and special values
such as NaN, infinities, -0.0 and integer extremes).

Annotations written as strings or imported only under ``if TYPE_CHECKING:`` are
resolved by importing those names. Anything else needs a registered strategy, looked
up in this order: ``"Class.field"`` (any class in the MRO, short or qualified name),
the type object, then its name (``"LoRAMapping"`` or ``"pkg.mod.LoRAMapping"``).
Register in code with :func:`register_strategy`, or in ``[tool.runnercheck]``::

    fuzz_strategies = {"LoRAMapping" = "myengine.testing:lora_mappings"}

where the function returns a strategy (it is called without arguments).
"""

from __future__ import annotations

import ast
import builtins
import collections.abc as cabc
import dataclasses
import enum
import functools
import importlib
import inspect
import sys
import types
import typing
from collections.abc import Callable, Mapping
from typing import Any

import torch
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from runnercheck.errors import ConfigError, RunnerCheckError
from runnercheck.fuzz.cuda_standin import is_cuda_event, is_cuda_stream
from runnercheck.fuzz.draws import (
    BOOLS,
    BYTE_VALUES,
    Branch,
    Converted,
    Fixed,
    Instances,
    drawn,
    last_construction_error,
    one_of_values,
)
from runnercheck.fuzz.tensors import (
    ALL_DTYPES,
    FILLS,
    LAYOUTS,
    TensorOptions,
    make_tensor,
    tensor_codes,
    tensors,
)

__all__ = [
    "ALL_DTYPES",
    "FILLS",
    "LAYOUTS",
    "StrategyBuilder",
    "StrategyError",
    "TensorOptions",
    "field_annotations",
    "last_construction_error",
    "load_configured",
    "make_tensor",
    "register_strategy",
    "tensors",
    "unregister_strategy",
]

StrategyLike = SearchStrategy[Any] | Callable[[], SearchStrategy[Any]]

_REGISTRY: dict[object, StrategyLike] = {}

#: Characters never generated in mapping keys: the broadcast flattens nested dicts with it.
KEY_SEPARATOR = "%"

#: Deeper than this many nested dataclasses, optional values are None and collections
#: empty (so recursive types stay finite).
MAX_DEPTH = 4


class StrategyError(RunnerCheckError):
    """No strategy can be built for some field."""


def register_strategy(key: type | str, strategy: StrategyLike) -> None:
    """Generate values of ``key`` (a type, a type name, or ``"Class.field"``) with
    ``strategy`` (a Hypothesis strategy, or a function returning one)."""
    _REGISTRY[key] = strategy


def unregister_strategy(key: type | str) -> None:
    _REGISTRY.pop(key, None)


def load_configured(specs: Mapping[str, str]) -> dict[str, SearchStrategy[Any]]:
    """``fuzz_strategies`` from the configuration: ``{"key": "module:function"}``."""
    loaded: dict[str, SearchStrategy[Any]] = {}
    for key, spec in specs.items():
        module_name, _, attr = spec.partition(":")
        if not module_name or not attr:
            raise ConfigError(f"fuzz_strategies[{key!r}]: {spec!r} is not 'module:function'")
        try:
            target: Any = importlib.import_module(module_name)
            for part in attr.split("."):
                target = getattr(target, part)
        except Exception as exc:
            raise ConfigError(
                f"fuzz_strategies[{key!r}]: cannot load {spec!r}: {type(exc).__name__}: {exc}"
            ) from None
        strategy = _as_strategy(target)
        if strategy is None:
            raise ConfigError(f"fuzz_strategies[{key!r}]: {spec!r} does not give a strategy")
        loaded[key] = strategy
    return loaded


def _as_strategy(obj: Any) -> SearchStrategy[Any] | None:
    if isinstance(obj, SearchStrategy):
        return obj
    if callable(obj):
        try:
            made = obj()
        except Exception:
            return None
        if isinstance(made, SearchStrategy):
            return made
    return None


# ------------------------------------------------------------------ annotations


class Unresolved:
    """Base of placeholder types for names an annotation uses but nothing defines."""

    name = "?"


def _unwrap_required(annotation: Any) -> Any:
    """``X`` for ``NotRequired[X]`` or ``Required[X]`` (the keys say which is which)."""
    while getattr(typing.get_origin(annotation), "_name", "") in ("NotRequired", "Required"):
        annotation = typing.get_args(annotation)[0]
    return annotation


def _seeded_generator(seed: int) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _cuda_event() -> Any:
    return torch.cuda.Event()


def _cuda_stream() -> Any:
    return torch.cuda.Stream()


def on_a_stub(tp: type) -> bool:
    """Whether ``tp`` derives from a stubbed package's class (see
    :mod:`runnercheck.fuzz.importing`)."""
    return any(vars(base).get("_runnercheck_stub") is True for base in tp.__mro__[1:])


def _filled(cls: type, **values: Any) -> Any:
    """An instance of ``cls`` holding ``values``, as a record base's constructor makes
    one (then its ``__post_init__``, if it has one)."""
    made: Any = object.__new__(cls)
    for name, value in values.items():
        object.__setattr__(made, name, value)
    post_init = getattr(made, "__post_init__", None)
    if callable(post_init):
        post_init()
    return made


def _is_typed_dict(tp: type) -> bool:
    """``typing``'s TypedDict, or ``typing_extensions``' (vLLM's ``LLMInputs``)."""
    if typing.is_typeddict(tp):
        return True
    extensions = sys.modules.get("typing_extensions")
    return bool(extensions is not None and extensions.is_typeddict(tp))


#: Callables a ``Callable[...]`` field holds: builtins, so that they pickle and compare.
_CALLABLES = (len, repr, print)


def recursive_alias(name: str) -> Any:
    """The alias a forward reference inside an imported alias names, as in
    ``NestedTensors = Union[List["NestedTensors"], torch.Tensor]``: the one module-level
    value of that name, among the modules loaded, that is a generic alias naming itself;
    None when there is no such value, or more than one."""
    found: list[Any] = []
    for module in list(sys.modules.values()):
        value = getattr(module, "__dict__", {}).get(name)
        if value is None or typing.get_origin(value) is None:
            continue
        if _names_itself(value, name) and not any(value is f for f in found):
            found.append(value)
    return found[0] if len(found) == 1 else None


def dotted_name(name: str) -> Any:
    """What a dotted forward reference inside an imported alias names, as the
    ``"torch.Tensor"`` of ``Union[list["NestedTensors"], "torch.Tensor"]``: an attribute
    of a module loaded under the name's leading part (None if none is)."""
    parts = name.split(".")
    for cut in range(len(parts) - 1, 0, -1):
        module = sys.modules.get(".".join(parts[:cut]))
        if module is None:
            continue
        value: Any = module
        for attr in parts[cut:]:
            value = getattr(value, attr, None)
            if value is None:
                return None
        return value
    return None


def _names_itself(alias: Any, name: str) -> bool:
    stack = list(typing.get_args(alias))
    seen = 0
    while stack and seen < 1000:
        seen += 1
        arg = stack.pop()
        if isinstance(arg, typing.ForwardRef) and arg.__forward_arg__ == name:
            return True
        if arg == name:
            return True
        stack.extend(typing.get_args(arg))
    return False


def _placeholder(name: str) -> type:
    return type(name, (Unresolved,), {"name": name})


def _type_checking_imports(module: types.ModuleType) -> dict[str, tuple[str, str | None]]:
    """Names imported under ``if TYPE_CHECKING:`` in ``module``: name -> (module, attribute)."""
    try:
        source = inspect.getsource(module)
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError):
        return {}
    found: dict[str, tuple[str, str | None]] = {}
    package = module.__package__ or ""
    for node in ast.walk(tree):
        if not isinstance(node, ast.If):
            continue
        test = node.test
        name = test.id if isinstance(test, ast.Name) else getattr(test, "attr", None)
        if name != "TYPE_CHECKING":
            continue
        for stmt in node.body:
            if isinstance(stmt, ast.ImportFrom):
                base = stmt.module or ""
                if stmt.level:
                    parts = package.split(".")
                    parent = ".".join(parts[: len(parts) - stmt.level + 1])
                    base = f"{parent}.{base}" if base else parent
                for alias in stmt.names:
                    found[alias.asname or alias.name] = (base, alias.name)
            elif isinstance(stmt, ast.Import):
                for alias in stmt.names:
                    found[alias.asname or alias.name.split(".")[0]] = (
                        alias.name if alias.asname else alias.name.split(".")[0],
                        None,
                    )
    return found


class _Names(dict[str, Any]):
    """Namespace for evaluating string annotations: module globals, builtins,
    ``TYPE_CHECKING`` imports (imported on demand), else a placeholder type."""

    def __init__(self, module: types.ModuleType | None, local: Mapping[str, Any]) -> None:
        super().__init__()
        self.module = module
        self.local = local
        self._checking: dict[str, tuple[str, str | None]] | None = None

    def __missing__(self, key: str) -> Any:
        if key in self.local:
            return self.local[key]
        module_dict = vars(self.module) if self.module is not None else {}
        if key in module_dict:
            return module_dict[key]
        if hasattr(builtins, key):
            return getattr(builtins, key)
        if key == "typing":
            return typing
        if self.module is not None:
            if self._checking is None:
                self._checking = _type_checking_imports(self.module)
            if key in self._checking:
                module_name, attr = self._checking[key]
                try:
                    imported: Any = importlib.import_module(module_name)
                    return getattr(imported, attr) if attr else imported
                except Exception:
                    pass
        return _placeholder(key)


def _evaluate(annotation: Any, owner: type) -> Any:
    """Turn string annotations and forward references (also nested ones, as in
    ``Optional["LoRAMapping"]``) into objects, with placeholders for unknown names."""
    module = sys.modules.get(owner.__module__)
    names = _Names(module, vars(owner))
    if isinstance(annotation, str):
        annotation = typing.ForwardRef(annotation)
    try:
        return typing._eval_type(  # type: ignore[attr-defined]
            annotation, {"__builtins__": builtins}, names
        )
    except Exception:
        if isinstance(annotation, typing.ForwardRef):
            return _placeholder(annotation.__forward_arg__)
        return annotation


def field_annotations(cls: type) -> dict[str, Any]:
    """Each dataclass field's annotation, evaluated in the module of the class declaring it."""
    declared: dict[str, tuple[Any, type]] = {}
    for klass in reversed(cls.__mro__):
        for name, annotation in vars(klass).get("__annotations__", {}).items():
            declared[name] = (annotation, klass)
    result: dict[str, Any] = {}
    for f in dataclasses.fields(cls):
        annotation, owner = declared.get(f.name, (f.type, cls))
        result[f.name] = _evaluate(annotation, owner)
    return result


def _is_named_tuple(tp: Any) -> bool:
    return isinstance(tp, type) and issubclass(tp, tuple) and hasattr(tp, "_fields")


def annotation_text(annotation: Any) -> str:
    if isinstance(annotation, type):
        if issubclass(annotation, Unresolved):
            return annotation.name
        return annotation.__qualname__
    return str(annotation).replace("typing.", "")


_SEQUENCES = (list, cabc.Sequence, cabc.MutableSequence, cabc.Iterable, cabc.Collection)
_MAPPINGS = (dict, cabc.Mapping, cabc.MutableMapping)
_SETS = (set, cabc.Set, cabc.MutableSet)


class StrategyBuilder:
    """Builds the strategy for an input class; ``overrides`` come from the configuration
    and take precedence over code registrations."""

    def __init__(
        self,
        overrides: Mapping[str, StrategyLike] | None = None,
        tensor_options: TensorOptions | None = None,
        max_size: int = 3,
    ) -> None:
        self.overrides = dict(overrides or {})
        self.tensor_options = tensor_options or TensorOptions()
        self.max_size = max_size
        self._building: dict[type, SearchStrategy[Any]] = {}
        #: Whether a field stays on the driver (the static analysis proves it): one that
        #: cannot be generated keeps its default instead of stopping the class.
        self.stays_on_driver: Callable[[type, str], bool] | None = None
        #: The branches of the unions, fixed and converted values and instances built here, by
        #: the id of their strategy (kept, so that the id stays theirs).
        self._known: dict[int, tuple[SearchStrategy[Any], tuple[Branch, ...]]] = {}

    # -- lookups

    def _lookup(self, *keys: object) -> SearchStrategy[Any] | None:
        for key in keys:
            for table in (self.overrides, _REGISTRY):
                try:
                    found = table.get(key)  # type: ignore[call-overload]
                except TypeError:  # unhashable annotation
                    found = None
                if found is not None:
                    strategy = _as_strategy(found)
                    if strategy is None:
                        raise StrategyError(f"strategy registered for {key!r} is not a strategy")
                    return strategy
        return None

    def _type_keys(self, tp: Any) -> list[object]:
        keys: list[object] = [tp]
        if isinstance(tp, type):
            if issubclass(tp, Unresolved):
                keys += [tp.name, tp.name.rsplit(".", 1)[-1]]
            else:
                keys += [tp.__name__, tp.__qualname__, f"{tp.__module__}.{tp.__qualname__}"]
        return keys

    # -- entry points

    def for_class(self, cls: type) -> SearchStrategy[Any]:
        found = self._lookup(*self._type_keys(cls))
        if found is not None:
            return found
        if not dataclasses.is_dataclass(cls):
            raise StrategyError(f"{cls.__qualname__} is not a dataclass")
        return self._dataclass(cls, 0)

    def _dataclass(self, cls: type, depth: int) -> SearchStrategy[Any]:
        if cls in self._building:
            return self._building[cls]
        self._building[cls] = st.deferred(lambda: self._dataclass(cls, depth))
        try:
            annotations = field_annotations(cls)
            parts: dict[str, tuple[Branch, ...]] = {}
            for f in dataclasses.fields(cls):
                if not f.init:
                    continue
                where = f"{cls.__qualname__}.{f.name}"
                field_keys = [f"{k.__name__}.{f.name}" for k in cls.__mro__]
                field_keys += [f"{k.__module__}.{k.__qualname__}.{f.name}" for k in cls.__mro__]
                strategy = self._lookup(*field_keys)
                if strategy is not None:
                    parts[f.name] = (("draw", strategy),)
                    continue
                try:
                    strategy = self.for_annotation(annotations[f.name], where, depth + 1, True)
                except StrategyError:
                    kept = self._driver_default(cls, f)
                    if kept is None:
                        raise
                    parts[f.name] = kept
                    continue
                branches = self._branches(strategy)
                # the default first: examples shrink to it, so minimal examples show only
                # the fields that matter
                if f.default is not dataclasses.MISSING:
                    branches = (("value", f.default), *branches)
                elif f.default_factory is not dataclasses.MISSING:
                    branches = (("call", f.default_factory), *branches)
                parts[f.name] = branches
        finally:
            del self._building[cls]
        return self._made(Instances(cls, parts))

    def _driver_default(self, cls: type, f: dataclasses.Field[Any]) -> tuple[Branch, ...] | None:
        """The default of a field that stays on the driver (None: it has none, or it
        is not known to stay there)."""
        if self.stays_on_driver is None or not self.stays_on_driver(cls, f.name):
            return None
        if f.default is not dataclasses.MISSING:
            return (("value", f.default),)
        if f.default_factory is not dataclasses.MISSING:
            return (("call", f.default_factory),)
        return None

    def _remember(
        self, strategy: SearchStrategy[Any], branches: tuple[Branch, ...]
    ) -> SearchStrategy[Any]:
        self._known[id(strategy)] = (strategy, branches)
        return strategy

    def _made(self, maker: Converted | Instances) -> SearchStrategy[Any]:
        """``maker``'s strategy; a field makes its values with ``maker`` itself."""
        return self._remember(maker.strategy(), (("make", maker),))

    def _fixed(
        self, fixed: Fixed, strategy: SearchStrategy[Any] | None = None
    ) -> SearchStrategy[Any]:
        """``strategy`` (by default the draw of ``fixed``'s bytes); a class's fixed
        field decodes its values with ``fixed`` from the class's one draw of bytes."""
        drawn_alone = fixed.strategy() if strategy is None else strategy
        return self._remember(drawn_alone, (("fixed", fixed),))

    def _sampled(self, values: tuple[Any, ...]) -> SearchStrategy[Any]:
        strategy = st.sampled_from(values)
        if not 0 < len(values) <= BYTE_VALUES:
            return strategy
        return self._fixed(one_of_values(values), strategy)

    def _instances(
        self,
        cls: type,
        parts: Mapping[str, SearchStrategy[Any]],
        construct: Callable[..., Any] | None = None,
    ) -> SearchStrategy[Any]:
        """Instances of ``cls`` whose arguments ``parts`` draw (made by ``construct``,
        ``cls`` by default)."""
        fields = {n: (self._branch(s),) for n, s in parts.items()}
        return self._made(Instances(cls, fields, construct))

    def _branches(self, strategy: SearchStrategy[Any]) -> tuple[Branch, ...]:
        """A union's branches (so that a field picks among them and its default at
        once), what makes a converted value or an instance (so that a field makes it
        with no draw around it), else the strategy itself."""
        known = self._known.get(id(strategy))
        if known is not None and known[0] is strategy:
            return known[1]
        return (("draw", strategy),)

    def _branch(self, strategy: SearchStrategy[Any]) -> Branch:
        """One branch for ``strategy`` (a union inside a union is drawn as it is)."""
        branches = self._branches(strategy)
        return branches[0] if len(branches) == 1 else ("draw", strategy)

    def for_annotation(
        self, annotation: Any, where: str, depth: int = 0, broadcast: bool = True
    ) -> SearchStrategy[Any]:
        """The strategy for one annotation; ``where`` names the field in errors;
        ``broadcast`` says whether a tensor here travels as a tensor (else pickled)."""
        found = self._lookup(*self._type_keys(annotation))
        if found is not None:
            return found
        try:
            return self._builtin(annotation, where, depth, broadcast)
        except StrategyError:
            raise
        except Exception as exc:  # typing internals on exotic annotations
            raise StrategyError(
                f"cannot generate {where} ({annotation_text(annotation)}): "
                f"{type(exc).__name__}: {exc}"
            ) from None

    def _fail(self, annotation: Any, where: str, reason: str) -> StrategyError:
        text = annotation_text(annotation)
        return StrategyError(
            f"cannot generate {where} ({text}): {reason}; register a strategy for "
            f"{text!r} or {where!r} (fuzz_strategies in [tool.runnercheck], or "
            f"runnercheck.fuzz.register_strategy)"
        )

    def _builtin(self, tp: Any, where: str, depth: int, broadcast: bool) -> SearchStrategy[Any]:
        sub = lambda a, b=broadcast: self.for_annotation(a, where, depth, b)  # noqa: E731
        if isinstance(tp, typing.ForwardRef):
            tp = tp.__forward_arg__
        if isinstance(tp, str):
            tp = _placeholder(tp)
        if tp is Any or tp is object:
            return st.one_of(st.none(), st.booleans(), st.integers(), st.text(max_size=4))
        if tp is None or tp is type(None):
            return st.none()
        if isinstance(tp, typing.TypeVar):
            return sub(tp.__bound__ if tp.__bound__ is not None else Any)
        if isinstance(tp, typing.NewType):
            return sub(tp.__supertype__)
        origin = typing.get_origin(tp)
        args = typing.get_args(tp)
        if origin is typing.Annotated:
            return sub(args[0])
        if origin is typing.Literal:
            return self._sampled(args)
        if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
            ordered = sorted(args, key=lambda a: a is not type(None))  # None first: shrinks there
            if depth > MAX_DEPTH and type(None) in args:
                return st.none()
            branches: tuple[Branch, ...] = tuple(
                ("value", None) if a is type(None) else self._branch(sub(a)) for a in ordered
            )
            return self._remember(st.one_of(*(drawn(b) for b in branches)), branches)
        if origin is not None:
            return self._generic(tp, origin, args, where, depth, broadcast)
        if isinstance(tp, type):
            return self._class(tp, where, depth, broadcast)
        raise self._fail(tp, where, "unsupported annotation")

    def _generic(
        self, tp: Any, origin: Any, args: tuple[Any, ...], where: str, depth: int, broadcast: bool
    ) -> SearchStrategy[Any]:
        size = 0 if depth > MAX_DEPTH else self.max_size

        def sub(a: Any, b: bool = broadcast) -> SearchStrategy[Any]:
            return self.for_annotation(a, where, depth, b)

        if origin is tuple:
            if len(args) == 2 and args[1] is Ellipsis:
                return self._made(Converted(st.lists(sub(args[0], False), max_size=size), tuple))
            if args == ((),):
                return st.just(())
            return st.tuples(*(sub(a, False) for a in args))
        if origin is frozenset:
            return st.frozensets(sub(args[0] if args else Any, False), max_size=size)
        if origin in _SETS:
            return st.sets(sub(args[0] if args else Any, False), max_size=size)
        if origin in _MAPPINGS or (isinstance(origin, type) and issubclass(origin, dict)):
            key_tp, value_tp = args if len(args) == 2 else (Any, Any)
            keys = _keys() if key_tp is str else sub(key_tp, False)
            return st.dictionaries(keys, sub(value_tp, broadcast), max_size=size)
        if origin in _SEQUENCES:
            return st.lists(sub(args[0] if args else Any, False), max_size=size)
        if origin is type:
            raise self._fail(tp, where, "classes are not generated")
        if origin is cabc.Callable:  # a callback the driver keeps (a value that pickles)
            return st.sampled_from(_CALLABLES)
        if isinstance(origin, type) and dataclasses.is_dataclass(origin):
            return self._dataclass(origin, depth)
        raise self._fail(tp, where, "unsupported generic annotation")

    def _typed_dict(self, tp: type, where: str, depth: int, broadcast: bool) -> SearchStrategy[Any]:
        """A ``TypedDict``: its required keys always, the others sometimes."""
        hints = {k: _unwrap_required(_evaluate(a, tp)) for k, a in tp.__annotations__.items()}
        required = getattr(tp, "__required_keys__", frozenset(hints))
        strategies = {
            key: self.for_annotation(hint, f"{where} ({tp.__name__}.{key})", depth + 1, broadcast)
            for key, hint in hints.items()
        }
        return st.fixed_dictionaries(
            {k: v for k, v in strategies.items() if k in required},
            optional={k: v for k, v in strategies.items() if k not in required},
        )

    def _class(self, tp: type, where: str, depth: int, broadcast: bool) -> SearchStrategy[Any]:
        if issubclass(tp, Unresolved):
            name = getattr(tp, "name", tp.__name__)
            alias = recursive_alias(name)
            if alias is None:
                alias = dotted_name(name)
            if alias is None:
                raise self._fail(tp, where, "the name is not defined at run time")
            if depth > MAX_DEPTH:  # the alias's other branches end the value here
                return st.nothing()
            return self.for_annotation(alias, where, depth + 1, broadcast)
        if issubclass(tp, torch.Tensor):
            dtypes = self.tensor_options.dtypes if broadcast else self.tensor_options.pickled_dtypes
            return self._fixed(tensor_codes(dtypes, self.tensor_options))
        if tp is torch.dtype:
            return self._sampled(ALL_DTYPES)
        if is_cuda_event(tp):  # torch.cuda's own (a stand-in without a CUDA device)
            return st.builds(_cuda_event)
        if is_cuda_stream(tp):
            return st.builds(_cuda_stream)
        if tp is torch.Generator:  # a request's sampling generator, seeded
            return st.builds(_seeded_generator, st.integers(0, 2**31 - 1))
        if tp is torch.Size:
            return self._made(Converted(st.lists(st.integers(0, 8), max_size=3), torch.Size))
        if tp is bool:
            return self._fixed(BOOLS, st.booleans())
        if tp is int:
            return st.integers()
        if tp is float:
            return st.floats()
        if tp is complex:
            return st.complex_numbers()
        if tp is str:
            return st.text(max_size=8)
        if tp is bytes:
            return st.binary(max_size=8)
        if issubclass(tp, enum.Enum):
            return self._sampled(tuple(tp))
        if dataclasses.is_dataclass(tp):
            return self._dataclass(tp, depth)
        if _is_typed_dict(tp):
            return self._typed_dict(tp, where, depth, broadcast)
        if _is_named_tuple(tp):
            hints = typing.get_type_hints(tp)
            parts = {
                n: self.for_annotation(hints.get(n, Any), where, depth + 1, False)
                for n in getattr(tp, "_fields", ())
            }
            return self._instances(tp, parts)
        if tp in (list, tuple, dict, set, frozenset):
            return self._generic(tp, tp, (), where, depth, broadcast)
        if on_a_stub(tp):
            return self._record(tp, where, depth)
        return self._by_init(tp, where, depth)

    def _record(self, tp: type, where: str, depth: int) -> SearchStrategy[Any]:
        """A class built on a stubbed package's class (a ``msgspec.Struct`` whose package
        is stubbed): its annotated fields, set on an instance as the real base would."""
        declared: dict[str, Any] = {}
        for klass in reversed(tp.__mro__):
            for name, annotation in vars(klass).get("__annotations__", {}).items():
                declared[name] = _evaluate(annotation, klass)
        parts = {
            name: self.for_annotation(hint, f"{where} ({tp.__qualname__}.{name})", depth + 1, False)
            for name, hint in declared.items()
            if not name.startswith("_") and typing.get_origin(hint) is not typing.ClassVar
        }
        return self._instances(tp, parts, functools.partial(_filled, tp))

    def _by_init(self, tp: type, where: str, depth: int) -> SearchStrategy[Any]:
        try:
            signature = inspect.signature(tp)
            hints = typing.get_type_hints(vars(tp).get("__init__", tp.__init__))  # type: ignore[misc]
        except (TypeError, ValueError, NameError) as exc:
            raise self._fail(tp, where, f"its constructor cannot be read ({exc})") from None
        parts: dict[str, SearchStrategy[Any]] = {}
        for name, param in signature.parameters.items():
            if param.kind in (param.VAR_POSITIONAL, param.VAR_KEYWORD):
                continue
            if name not in hints:
                if param.default is not param.empty:
                    continue
                raise self._fail(tp, where, f"constructor parameter {name!r} has no annotation")
            # a tensor the object holds may travel as a tensor: helpers of the input's
            # dict put such values under keys of their own (vLLM's sampling metadata)
            parts[name] = self.for_annotation(
                hints[name], f"{where} ({tp.__qualname__}.{name})", depth + 1, True
            )
        return self._instances(tp, parts)


def _keys() -> SearchStrategy[str]:
    return st.text(
        alphabet=st.characters(exclude_characters=KEY_SEPARATOR, exclude_categories=["Cs"]),
        max_size=6,
    )
