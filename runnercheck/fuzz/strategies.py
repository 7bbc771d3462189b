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
import math
import sys
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

import torch
from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy

from runnercheck.errors import ConfigError, RunnerCheckError

StrategyLike = SearchStrategy[Any] | Callable[[], SearchStrategy[Any]]

_REGISTRY: dict[object, StrategyLike] = {}

#: Tensor dtypes generated, in shrinking order (the first is the "simplest").
ALL_DTYPES: tuple[torch.dtype, ...] = (
    torch.int64,
    torch.float32,
    torch.bool,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.uint8,
    torch.float16,
    torch.bfloat16,
    torch.float64,
)

#: Tensor layouts generated, in shrinking order.
LAYOUTS = ("contiguous", "transposed", "strided", "offset", "expanded")

#: How tensors are filled, in shrinking order.
FILLS = ("zeros", "random", "special")

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


# ------------------------------------------------------------------ tensors


@dataclass(frozen=True)
class TensorOptions:
    #: dtypes of tensors in broadcast positions (fields, mapping values).
    dtypes: tuple[torch.dtype, ...] = ALL_DTYPES
    #: dtypes of tensors inside lists/tuples/sets (pickled with the metadata).
    pickled_dtypes: tuple[torch.dtype, ...] = ALL_DTYPES
    #: Largest size of a dimension of an ordinary tensor.
    max_side: int = 5
    #: Elements of a large-ish tensor (about one in sixteen tensors).
    large: int = 1 << 14


def make_tensor(
    dtype: torch.dtype, shape: tuple[int, ...], layout: str, fill: str, seed: int
) -> torch.Tensor:
    """A tensor of ``shape`` whose memory layout is ``layout`` (see :data:`LAYOUTS`)."""
    ndim = len(shape)
    if layout == "transposed" and ndim < 2:
        layout = "strided"
    if layout in ("strided", "expanded") and ndim == 0:
        layout = "offset"
    if layout == "transposed":
        base = _filled(dtype, (*shape[:-2], shape[-1], shape[-2]), fill, seed)
        return base.transpose(-1, -2)
    if layout == "strided":
        base = _filled(dtype, (*shape[:-1], shape[-1] * 2), fill, seed)
        return base[..., ::2]
    if layout == "offset":
        if ndim == 0:
            return _filled(dtype, (2,), fill, seed)[1]
        base = _filled(dtype, (shape[0] + 1, *shape[1:]), fill, seed)
        return base[1:]
    if layout == "expanded":
        base = _filled(dtype, (1, *shape[1:]), fill, seed)
        return base.expand(*shape)
    return _filled(dtype, shape, fill, seed)


def _filled(dtype: torch.dtype, shape: tuple[int, ...], fill: str, seed: int) -> torch.Tensor:
    if fill == "zeros":
        return torch.zeros(shape, dtype=dtype)
    generator = torch.Generator().manual_seed(seed)
    if fill == "special":
        specials = _specials(dtype)
        index = torch.randint(0, len(specials), (math.prod(shape),), generator=generator)
        # index_select, not specials[index]: advanced indexing costs 20x more here
        return specials.index_select(0, index).reshape(shape)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    if dtype.is_floating_point:
        return (torch.randn(shape, generator=generator) * 100).to(dtype)
    info = torch.iinfo(dtype)
    return torch.randint(info.min, info.max, shape, generator=generator, dtype=torch.int64).to(
        dtype
    )


@functools.cache
def _specials(dtype: torch.dtype) -> torch.Tensor:
    """The special values of ``dtype`` (shared: never changed in place)."""
    if dtype == torch.bool:
        return torch.tensor([False, True])
    if dtype.is_floating_point:
        info = torch.finfo(dtype)
        values = [float("nan"), float("inf"), -float("inf"), -0.0, 0.0, 1.0, info.max]
        values += [info.min, info.tiny]
        return torch.tensor(values, dtype=torch.float64).to(dtype)
    iinfo = torch.iinfo(dtype)
    ints = sorted({iinfo.min, iinfo.max, 0, 1, -1 if iinfo.min < 0 else 2})
    return torch.tensor(ints, dtype=torch.int64).to(dtype)


def scaled(byte: int, count: int) -> int:
    """``byte`` (0-255) scaled onto ``range(count)``, evenly and in order: a byte
    shrinking towards 0 takes its value towards the first of the ``count``."""
    return byte * count >> 8


#: A tensor is drawn as this many bytes, one draw: its dtype, whether it is large,
#: its number of dimensions (or which large shape), three sides, its layout, its fill,
#: and four bytes of seed (big-endian; unused for zeros).
TENSOR_BYTES = 12

#: A size byte at least this makes a large-ish tensor (one in sixteen).
_LARGE_FROM = 240


def tensor_from_bytes(
    code: bytes, dtypes: tuple[torch.dtype, ...], options: TensorOptions
) -> torch.Tensor:
    """The tensor that :data:`TENSOR_BYTES` bytes describe (see :func:`tensors`)."""
    dtype = dtypes[scaled(code[0], len(dtypes))]
    if code[1] >= _LARGE_FROM:
        n = options.large
        shape: tuple[int, ...] = ((n,), (n // 64, 64), (64, n // 64))[scaled(code[2], 3)]
    else:
        sides = options.max_side + 1
        shape = tuple(scaled(byte, sides) for byte in code[3 : 3 + scaled(code[2], 4)])
    layout = LAYOUTS[scaled(code[6], len(LAYOUTS))]
    fill = FILLS[scaled(code[7], len(FILLS))]
    seed = int.from_bytes(code[8:12], "big") if fill != "zeros" else 0
    return make_tensor(dtype, shape, layout, fill, seed)


@dataclass(frozen=True)
class Converted:
    """Values made by ``convert`` from a draw of ``source``. Where a class's field takes
    such a value, it draws from the source itself and converts what it drew: one draw
    fewer than drawing :meth:`strategy` (a draw costs Hypothesis the same whatever it
    holds), the same choices and the same value."""

    source: SearchStrategy[Any]
    convert: Callable[[Any], Any]

    def make(self, draw: st.DrawFn) -> Any:
        return self.convert(draw(self.source))

    def strategy(self) -> SearchStrategy[Any]:
        return self.source.map(self.convert)


_TENSOR_CODES = st.binary(min_size=TENSOR_BYTES, max_size=TENSOR_BYTES)


def tensor_codes(dtypes: Iterable[torch.dtype], options: TensorOptions) -> Converted:
    """Tensors of ``dtypes`` (see :func:`tensors`): their bytes, and the decoding."""
    return Converted(
        _TENSOR_CODES, functools.partial(_tensor_from_bytes_of, tuple(dtypes), options)
    )


def tensors(
    dtypes: Iterable[torch.dtype] = ALL_DTYPES, options: TensorOptions | None = None
) -> SearchStrategy[torch.Tensor]:
    """Tensors of ``dtypes`` in many shapes, layouts and fills (generated on the CPU).

    A tensor is one draw of :data:`TENSOR_BYTES` bytes, one byte for each of its
    properties (a draw costs Hypothesis the same whatever it holds, and a tensor drawn
    property by property took seven). Hypothesis shrinks each byte towards 0 on its
    own, and each property is its byte scaled in order (:func:`scaled`), so a tensor
    still shrinks towards the simplest, each property on its own: its dtype (in the
    order given); not large (one in sixteen is); its number of dimensions and each
    one's size, fewest and smallest first; its layout (contiguous first); its fill
    (zeros first); and the seed its values come from (0 first, unused for zeros)."""
    return tensor_codes(dtypes, options or TensorOptions()).strategy()


def _tensor_from_bytes_of(
    dtypes: tuple[torch.dtype, ...], options: TensorOptions, code: bytes
) -> torch.Tensor:
    return tensor_from_bytes(code, dtypes, options)


# ------------------------------------------------------------------ annotations


class Unresolved:
    """Base of placeholder types for names an annotation uses but nothing defines."""

    name = "?"


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
        #: The branches of the unions, converted values and instances built here, by
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
                strategy = self.for_annotation(annotations[f.name], where, depth + 1, True)
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
        return self._made(Instances.of(cls, parts))

    def _remember(
        self, strategy: SearchStrategy[Any], branches: tuple[Branch, ...]
    ) -> SearchStrategy[Any]:
        self._known[id(strategy)] = (strategy, branches)
        return strategy

    def _made(self, maker: Converted | Instances) -> SearchStrategy[Any]:
        """``maker``'s strategy, which a field or a union makes with ``maker`` itself."""
        return self._remember(maker.strategy(), (("make", maker),))

    def _converted(self, converted: Converted) -> SearchStrategy[Any]:
        return self._made(converted)

    def _instances(
        self, cls: type, parts: Mapping[str, SearchStrategy[Any]]
    ) -> SearchStrategy[Any]:
        """Instances of ``cls`` whose arguments ``parts`` draw."""
        return self._made(Instances.of(cls, {n: (self._branch(s),) for n, s in parts.items()}))

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
            raise self._fail(_placeholder(tp), where, "the name is not defined at run time")
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
            return st.sampled_from(args)
        if origin is typing.Union or (hasattr(types, "UnionType") and origin is types.UnionType):
            ordered = sorted(args, key=lambda a: a is not type(None))  # None first: shrinks there
            if depth > MAX_DEPTH and type(None) in args:
                return st.none()
            branches: tuple[Branch, ...] = tuple(
                ("value", None) if a is type(None) else self._branch(sub(a)) for a in ordered
            )
            return self._remember(st.one_of(*(_as_drawn(b) for b in branches)), branches)
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
                return self._converted(
                    Converted(st.lists(sub(args[0], False), max_size=size), tuple)
                )
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
        if isinstance(origin, type) and dataclasses.is_dataclass(origin):
            return self._dataclass(origin, depth)
        raise self._fail(tp, where, "unsupported generic annotation")

    def _class(self, tp: type, where: str, depth: int, broadcast: bool) -> SearchStrategy[Any]:
        if issubclass(tp, Unresolved):
            raise self._fail(tp, where, "the name is not defined at run time")
        if issubclass(tp, torch.Tensor):
            dtypes = self.tensor_options.dtypes if broadcast else self.tensor_options.pickled_dtypes
            return self._converted(tensor_codes(dtypes, self.tensor_options))
        if tp is torch.dtype:
            return st.sampled_from(ALL_DTYPES)
        if tp is torch.Size:
            return self._converted(Converted(st.lists(st.integers(0, 8), max_size=3), torch.Size))
        if tp is bool:
            return st.booleans()
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
            return st.sampled_from(list(tp))
        if dataclasses.is_dataclass(tp):
            return self._dataclass(tp, depth)
        if _is_named_tuple(tp):
            hints = typing.get_type_hints(tp)
            parts = {
                n: self.for_annotation(hints.get(n, Any), where, depth + 1, False)
                for n in getattr(tp, "_fields", ())
            }
            return self._instances(tp, parts)
        if tp in (list, tuple, dict, set, frozenset):
            return self._generic(tp, tp, (), where, depth, broadcast)
        return self._by_init(tp, where, depth)

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
            parts[name] = self.for_annotation(
                hints[name], f"{where} ({tp.__qualname__}.{name})", depth + 1, False
            )
        return self._instances(tp, parts)


def _keys() -> SearchStrategy[str]:
    return st.text(
        alphabet=st.characters(exclude_characters=KEY_SEPARATOR, exclude_categories=["Cs"]),
        max_size=6,
    )


#: The last exception a constructor raised while generating (reported if nothing builds).
last_construction_error: list[BaseException] = []


#: One way to make a value: ``("value", v)`` is ``v`` itself, ``("call", f)`` what
#: ``f()`` returns, ``("draw", strategy)`` a draw from the strategy, ``("make", m)``
#: what ``m.make(draw)`` makes (a :class:`Converted` or an :class:`Instances`) where
#: drawing ``m.strategy()`` would add a draw around the same ones.
Branch = tuple[str, Any]


def _as_drawn(branch: Branch) -> SearchStrategy[Any]:
    kind, target = branch
    if kind == "value":
        return st.just(target)
    if kind == "call":
        return st.builds(target)
    if kind == "make":
        return typing.cast(SearchStrategy[Any], target.strategy())
    return typing.cast(SearchStrategy[Any], target)


def _make(branch: Branch, draw: st.DrawFn) -> Any:
    kind, target = branch
    if kind == "value":
        return target
    if kind == "call":
        return target()
    if kind == "make":
        return target.make(draw)
    return draw(target)


@dataclass(frozen=True)
class Instances:
    """Instances of ``cls`` from keyword arguments, each one of its ``fields``'
    branches (a field's default is its first, so that examples shrink to it and
    minimal examples show only the fields that matter).

    The fields with more than one branch pick theirs together, with one draw of a byte
    each (:attr:`picks`; a draw costs Hypothesis the same whatever it holds), and each
    byte shrinks on its own towards its field's first branch (:func:`scaled`). Then
    each field makes its value: a value or a call takes no draw, the others draw."""

    cls: type
    fields: tuple[tuple[str, tuple[Branch, ...]], ...]
    picks: SearchStrategy[bytes] | None

    @staticmethod
    def of(cls: type, fields: Mapping[str, tuple[Branch, ...]]) -> Instances:
        width = sum(1 for branches in fields.values() if len(branches) > 1)
        picks = st.binary(min_size=width, max_size=width) if width else None
        return Instances(cls, tuple(fields.items()), picks)

    def make(self, draw: st.DrawFn) -> Any:
        code = iter(draw(self.picks) if self.picks is not None else b"")
        kwargs = {}
        for name, branches in self.fields:
            count = len(branches)
            branch = branches[scaled(next(code), count)] if count > 1 else branches[0]
            kwargs[name] = _make(branch, draw)
        try:
            return self.cls(**kwargs)
        except Exception as exc:  # __post_init__ validation: try other values
            last_construction_error[:] = [exc]
            reject()

    def strategy(self) -> SearchStrategy[Any]:
        make = self.make

        @st.composite
        def build(draw: st.DrawFn) -> Any:
            return make(draw)

        return build()
