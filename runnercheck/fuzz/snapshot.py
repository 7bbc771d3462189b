"""Snapshots: plain, picklable pictures of objects that ranks send back for comparison.

A snapshot keeps what the round trip must preserve: the exact type of every value,
tensors' dtype, shape, device type and bytes, container contents, the fields of
dataclasses (and of other objects with a ``__dict__``). Ranks take snapshots of what
they rebuilt and send them to the process that compares (:mod:`runnercheck.fuzz.compare`);
they never need the original object.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import torch

#: Tensors with more elements than this keep only a digest of their bytes.
MAX_KEPT_ELEMENTS = 1 << 20


_TYPE_NAMES: dict[type, str] = {}


def type_name(tp: type) -> str:
    known = _TYPE_NAMES.get(tp) if isinstance(tp, type) else None
    if known is not None:
        return known
    module = getattr(tp, "__module__", "")
    name = getattr(tp, "__qualname__", None)
    if name is None:
        name = getattr(tp, "__name__", None)
    if name is None:
        name = repr(tp)
    text = name if module in ("builtins", "") else f"{module}.{name}"
    if isinstance(tp, type):
        _TYPE_NAMES[tp] = text
    return text


class Snap:
    """Base of all snapshot nodes."""

    kind: str = "?"
    type: str

    def key(self) -> str:
        """A canonical string: equal snapshots have equal keys (orders sets and dict keys)."""
        raise NotImplementedError


def same_plain(a: object, b: object) -> bool:
    """Whether two plain values are the same: NaN is NaN, -0.0 is not 0.0."""
    if isinstance(a, float) and isinstance(b, float):
        if math.isnan(a) and math.isnan(b):
            return True
        return a == b and math.copysign(1.0, a) == math.copysign(1.0, b)
    if isinstance(a, complex) and isinstance(b, complex):
        return same_plain(a.real, b.real) and same_plain(a.imag, b.imag)
    return a == b


# Equality of snapshots (``==``) is strict: equal snapshots are ones that
# :func:`runnercheck.fuzz.compare.differences` finds no difference between, so the
# comparison can skip what is equal at C speed and walk only what is not. Where the
# generated field-by-field equality would be looser than the comparison (plain values,
# members and mapping keys, compared there by value and by key), the class says so.


@dataclass(frozen=True)
class Plain(Snap):
    """None, bool, int, float, complex, str, bytes, dtypes, devices, enum members."""

    type: str
    value: Any

    kind = "plain"

    def key(self) -> str:
        return f"{self.type}:{self.value!r}"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Plain:
            return NotImplemented
        assert isinstance(other, Plain)
        if self.type != other.type:
            return False
        value = self.value
        if isinstance(value, (float, complex)):
            return same_plain(value, other.value)
        return bool(value == other.value)

    def __hash__(self) -> int:
        return hash(self.type)


@dataclass(frozen=True)
class TensorSnap(Snap):
    type: str
    dtype: str
    shape: tuple[int, ...]
    device: str
    contiguous: bool
    digest: str
    data: torch.Tensor | None = field(default=None, compare=False)

    kind = "tensor"

    def key(self) -> str:
        return f"{self.type}:{self.dtype}:{self.shape}:{self.device}:{self.digest}"

    def __reduce__(self) -> tuple[Any, ...]:
        """Pickled with the values as plain bytes (a rank sends every snapshot it takes
        to the process that compares; torch's own pickling of a tensor costs several
        times more on both ends)."""
        raw = None
        if self.data is not None:
            raw = _memory(self.data).tobytes() if self.data.numel() else b""
        fields = (self.type, self.dtype, self.shape, self.device, self.contiguous, self.digest)
        return _tensor_snap, (*fields, raw)


def _tensor_snap(
    type: str,
    dtype: str,
    shape: tuple[int, ...],
    device: str,
    contiguous: bool,
    digest: str,
    raw: bytes | None,
) -> TensorSnap:
    data = None
    if raw is not None:
        kind = getattr(torch, dtype)
        data = (
            torch.frombuffer(bytearray(raw), dtype=torch.uint8).view(kind).view(shape)
            if raw
            else torch.empty(shape, dtype=kind)
        )
    return TensorSnap(type, dtype, shape, device, contiguous, digest, data)


@dataclass(frozen=True)
class Items(Snap):
    """Ordered containers: list, tuple (and subclasses such as torch.Size)."""

    type: str
    items: tuple[Snap, ...]

    kind = "items"

    def key(self) -> str:
        return f"{self.type}[{','.join(item.key() for item in self.items)}]"


@dataclass(frozen=True)
class Members(Snap):
    """Unordered containers: set, frozenset (members sorted by key)."""

    type: str
    items: tuple[Snap, ...]

    kind = "members"

    def key(self) -> str:
        return f"{self.type}{{{','.join(item.key() for item in self.items)}}}"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Members:
            return NotImplemented
        assert isinstance(other, Members)
        return self.type == other.type and [m.key() for m in self.items] == [
            m.key() for m in other.items
        ]

    def __hash__(self) -> int:
        return hash(self.type)


@dataclass(frozen=True)
class Entries(Snap):
    """Mappings: (key, value) pairs in insertion order."""

    type: str
    entries: tuple[tuple[Snap, Snap], ...]

    kind = "entries"

    def key(self) -> str:
        inner = ",".join(sorted(f"{k.key()}:{v.key()}" for k, v in self.entries))
        return f"{self.type}{{{inner}}}"

    def __eq__(self, other: object) -> bool:
        if other.__class__ is not Entries:
            return NotImplemented
        assert isinstance(other, Entries)
        return (
            self.type == other.type
            and len(self.entries) == len(other.entries)
            and all(
                k.key() == k2.key() and v == v2
                for (k, v), (k2, v2) in zip(self.entries, other.entries, strict=True)
            )
        )

    def __hash__(self) -> int:
        return hash(self.type)


@dataclass(frozen=True)
class Record(Snap):
    """A dataclass (its fields) or another object (its ``__dict__`` / slots).

    ``driver_only`` and ``defaults`` are filled only on the expected side, by the
    process that knows the classes and the configuration."""

    type: str
    fields: tuple[tuple[str, Snap], ...]
    is_dataclass: bool = True
    driver_only: frozenset[str] = frozenset()
    defaults: tuple[tuple[str, Snap], ...] = ()

    kind = "record"

    def key(self) -> str:
        return f"{self.type}({','.join(f'{n}={s.key()}' for n, s in self.fields)})"

    def field_map(self) -> dict[str, Snap]:
        return dict(self.fields)


@dataclass(frozen=True)
class Missing(Snap):
    """An attribute the object does not have."""

    type: str = "<missing>"

    kind = "missing"

    def key(self) -> str:
        return "<missing>"


@dataclass(frozen=True)
class Opaque(Snap):
    """Anything else, by type and ``repr``."""

    type: str
    text: str

    kind = "opaque"

    def key(self) -> str:
        return f"{self.type}<{self.text}>"


_PLAIN = (type(None), bool, int, float, complex, str, bytes)
#: The names of exactly those types (a subclass is looked up on its own).
_PLAIN_NAMES = {kind: type_name(kind) for kind in _PLAIN}
_DICT_NAME = type_name(dict)
#: The values other than containers and tensors that :meth:`Snapshotter.take` sees as plain.
_OTHER_PLAIN = (enum.Enum, *_PLAIN, torch.dtype, torch.device)
_NONE = Plain(type_name(type(None)), None)
#: An attribute not there (a shared snapshot, and the marker of its absence).
_MISSING: Any = Missing()

#: Decides, for the expected side, which fields of a dataclass are driver-only.
DriverOnly = Callable[[type, dataclasses.Field[Any]], bool]


def _tensor(value: torch.Tensor, device_override: str | None) -> TensorSnap:
    device = "cpu" if value.is_cpu else value.device.type  # (the first: cheaper to ask)
    data = value.detach() if value.requires_grad else value
    # one contiguous copy, owned (later changes to the tensor do not reach it), hashed
    # in place
    if device != "cpu":
        kept = data.cpu().contiguous()
    else:
        kept = data.clone(memory_format=torch.contiguous_format)
    numel = kept.numel()
    return TensorSnap(
        type=type_name(type(value)),
        dtype=_dtype_name(value.dtype),
        shape=tuple(kept.shape),
        device=device_override or device,
        contiguous=value.is_contiguous(),
        digest=_digest(kept),
        data=kept if numel <= MAX_KEPT_ELEMENTS else None,
    )


def _digest(contiguous: torch.Tensor) -> str:
    """The digest of a contiguous CPU tensor's bytes."""
    blob = _memory(contiguous) if contiguous.numel() else b""
    return hashlib.blake2b(blob, digest_size=16).hexdigest()


def _tensor_matches(snap: TensorSnap, value: torch.Tensor, device_override: str | None) -> bool:
    """Whether ``_tensor(value, device_override) == snap``. A plain CPU tensor's bytes
    are hashed where they lie (copied first only where it is not contiguous, as for a
    snapshot); any other tensor is snapshotted. The bytes are always read: a tensor's
    version counter misses writes through ``.data``, through a numpy view, through its
    storage or by a collective."""
    if (
        type(value) is not torch.Tensor
        or not value.is_cpu
        or value.requires_grad
        or value.layout is not torch.strided
        or value.is_quantized
        or value.is_conj()
        or value.is_neg()
    ):
        return snap == _tensor(value, device_override)
    contiguous = value.is_contiguous()
    if not (
        snap.type == _TENSOR_NAME
        and snap.dtype == _dtype_name(value.dtype)
        and snap.shape == value.shape
        and snap.device == (device_override or "cpu")
        and snap.contiguous is contiguous
    ):
        return False
    kept = value if contiguous else value.clone(memory_format=torch.contiguous_format)
    known = snap.data
    if known is not None and kept.numel() * kept.element_size() > _HASHED_BYTES:
        # the bytes the digest was taken of, compared (several times faster than hashing)
        return bytes(_memory(kept)) == bytes(_memory(known))
    return snap.digest == _digest(kept)


#: A tensor with more bytes than this is compared with the bytes a snapshot kept of it.
_HASHED_BYTES = 256


#: Dtypes numpy lacks (bfloat16, ...): their bytes are read as bytes at once.
_NOT_IN_NUMPY: set[torch.dtype] = set()


def _memory(tensor: torch.Tensor) -> Any:
    """The bytes of a contiguous CPU tensor, in place (a buffer): through numpy where
    it has the dtype (the cheap way), else as bytes first."""
    if tensor.dtype not in _NOT_IN_NUMPY:
        try:
            return tensor.numpy()
        except TypeError:  # bfloat16 and other dtypes numpy lacks
            _NOT_IN_NUMPY.add(tensor.dtype)
        except RuntimeError:
            pass
    # flat by its strides, not by reshape: a contiguous tensor may have any stride
    # along a side of length 1, and a reshape that changes nothing keeps it
    return tensor.as_strided((tensor.numel(),), (1,)).view(torch.uint8).numpy()


_DTYPE_NAMES: dict[torch.dtype, str] = {}
_TENSOR_NAME = type_name(torch.Tensor)


def _dtype_name(dtype: torch.dtype) -> str:
    name = _DTYPE_NAMES.get(dtype)
    if name is None:
        name = _DTYPE_NAMES[dtype] = str(dtype).removeprefix("torch.")
    return name


class Snapshotter:
    """Takes snapshots. ``driver_only`` and ``with_defaults`` serve the expected side;
    ``tensor_device`` overrides tensors' device type (the comparing process generates on
    the CPU what ranks place on ``--device``)."""

    def __init__(
        self,
        driver_only: DriverOnly | None = None,
        with_defaults: bool = False,
        tensor_device: str | None = None,
    ) -> None:
        self.driver_only = driver_only
        self.with_defaults = with_defaults
        self.tensor_device = tensor_device
        self._stack: set[int] = set()
        #: Per dataclass: its fields, those driver-only, and its fields' defaults
        #: (snapshots of plain defaults, taken once; factories, called each time).
        self._plans: dict[type, _Plan] = {}

    def __call__(self, value: Any) -> Snap:
        return self.take(value)

    def take(self, value: Any) -> Snap:
        if value is None:  # the commonest value of all: one snapshot serves
            return _NONE
        kind = type(value)
        name = _PLAIN_NAMES.get(kind)
        if name is not None:  # the common case first (subclasses, such as enums, below)
            return Plain(name, value)
        if isinstance(value, torch.Tensor):
            return _tensor(value, self.tensor_device)
        if isinstance(value, enum.Enum):
            return Plain(type_name(type(value)), value.name)
        if isinstance(value, _PLAIN):
            return Plain(type_name(type(value)), value)
        if isinstance(value, (torch.dtype, torch.device)):
            return Plain(type_name(type(value)), str(value))
        key = id(value)
        if key in self._stack:
            return Opaque(type_name(type(value)), "<cycle>")
        self._stack.add(key)
        try:
            # the exact types met most, and dataclasses met before, without the checks
            if kind is list or kind is tuple:
                return Items(type_name(kind), tuple(map(self.take, value)))
            if kind is dict:
                take = self.take
                return Entries(type_name(kind), tuple((take(k), take(v)) for k, v in value.items()))
            plan = self._plans.get(kind)
            if plan is not None:
                return self._record(value, plan)
            return self._container(value)
        finally:
            self._stack.discard(key)

    def matches(self, snap: Snap, value: Any) -> bool:
        """Whether ``snap == self.take(value)``: whether ``value`` still has the snapshot
        ``snap``, found by the same walk with nothing built where it can (the bytes of a
        plain CPU tensor hashed where they lie, not copied first). It stops at the first
        difference; a caller that needs the differences takes a new snapshot."""
        if value is None:
            return snap is _NONE or snap == _NONE
        kind = type(value)
        name = _PLAIN_NAMES.get(kind)
        if name is not None:
            if type(snap) is not Plain or snap.type != name:
                return False
            known = snap.value
            if isinstance(known, (float, complex)):
                return same_plain(known, value)
            return bool(known == value)
        if isinstance(value, torch.Tensor):
            if type(snap) is not TensorSnap:
                return False
            return _tensor_matches(snap, value, self.tensor_device)
        if isinstance(value, _OTHER_PLAIN):  # rarer plain values: as snapshots
            return snap == self.take(value)
        key = id(value)
        if key in self._stack:
            return snap == Opaque(type_name(kind), "<cycle>")
        self._stack.add(key)
        try:
            if kind is list or kind is tuple:
                if type(snap) is not Items or snap.type != type_name(kind):
                    return False
                return len(snap.items) == len(value) and all(map(self.matches, snap.items, value))
            if kind is dict:
                if type(snap) is not Entries or snap.type != _DICT_NAME:
                    return False
                return len(snap.entries) == len(value) and all(
                    self._key_matches(k_snap, k) and self.matches(v_snap, v)
                    for (k_snap, v_snap), (k, v) in zip(snap.entries, value.items(), strict=True)
                )
            plan = self._plans.get(kind)
            if plan is not None:
                return self._record_matches(snap, value, plan)
            return snap == self._container(value)
        finally:
            self._stack.discard(key)

    def _key_matches(self, snap: Snap, key: Any) -> bool:
        """Whether a mapping's key has the snapshot's key (mappings compare keys by
        :meth:`Snap.key`)."""
        if type(key) in _PLAIN_NAMES:  # equal snapshots of these have equal keys
            return self.matches(snap, key)
        return snap.key() == self.take(key).key()

    def _record_matches(self, snap: Snap, value: Any, plan: _Plan) -> bool:
        if type(snap) is not Record or plan.factories:  # factories: made at each take
            return snap == self._record(value, plan)
        if (
            snap.type != plan.type
            or not snap.is_dataclass
            or snap.driver_only != plan.driver_only
            or snap.defaults != plan.fixed_defaults
            or len(snap.fields) != len(plan.names)
        ):
            return False
        matches = self.matches
        for (name, field_snap), expected in zip(snap.fields, plan.names, strict=True):
            if name != expected:
                return False
            got = getattr(value, name, _MISSING)
            if got is None:  # the commonest field of all, and its one snapshot
                if field_snap is not _NONE and field_snap != _NONE:
                    return False
            elif got is _MISSING:
                if field_snap != _MISSING:
                    return False
            elif not matches(field_snap, got):
                return False
        return True

    def _container(self, value: Any) -> Snap:
        name = type_name(type(value))
        if isinstance(value, (list, tuple)):
            return Items(name, tuple(self.take(v) for v in value))
        if isinstance(value, (set, frozenset)):
            members = sorted((self.take(v) for v in value), key=lambda s: s.key())
            return Members(name, tuple(members))
        if isinstance(value, Mapping):
            return Entries(name, tuple((self.take(k), self.take(v)) for k, v in value.items()))
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            return self._dataclass(value)
        attrs = _attributes(value)
        if attrs is not None:
            return Record(name, tuple((k, self.take(v)) for k, v in sorted(attrs.items())), False)
        try:
            text = repr(value)
        except Exception as exc:  # a broken __repr__ is still a picture
            text = f"<repr failed: {type(exc).__name__}>"
        return Opaque(name, text)

    def _dataclass(self, value: Any) -> Record:
        cls = type(value)
        plan = self._plans.get(cls)
        if plan is None:
            plan = self._plans[cls] = self._plan(cls)
        return self._record(value, plan)

    def _record(self, value: Any, plan: _Plan) -> Record:
        take = self.take
        fields = []
        for name in plan.names:
            got = getattr(value, name, _MISSING)
            # None (the commonest field of all) and a missing attribute without a call
            fields.append((name, _NONE if got is None else got if got is _MISSING else take(got)))
        return Record(plan.type, tuple(fields), True, plan.driver_only, self._defaults(plan))

    def _defaults(self, plan: _Plan) -> tuple[tuple[str, Snap], ...]:
        if not plan.factories:  # every default snapshotted once, with the plan
            return plan.fixed_defaults
        defaults: list[tuple[str, Snap]] = []
        for name, snap in plan.defaults:
            if snap is None:  # made by a factory, each time
                made = _made(plan.factories[name])
                if made is _NO_DEFAULT:
                    continue
                snap = self.take(made)
            defaults.append((name, snap))
        return tuple(defaults)

    def _plan(self, cls: type) -> _Plan:
        names: list[str] = []
        driver_only: set[str] = set()
        defaults: list[tuple[str, Snap | None]] = []
        factories: dict[str, Callable[[], Any]] = {}
        for f in dataclasses.fields(cls):
            names.append(f.name)
            if self.driver_only is not None and self.driver_only(cls, f):
                driver_only.add(f.name)
            if not self.with_defaults:
                continue
            if f.default is not dataclasses.MISSING:
                defaults.append((f.name, self.take(f.default)))
            elif f.default_factory is not dataclasses.MISSING:
                defaults.append((f.name, None))
                factories[f.name] = f.default_factory
        fixed = tuple((name, snap) for name, snap in defaults if snap is not None)
        return _Plan(
            type_name(cls), tuple(names), frozenset(driver_only), tuple(defaults), factories, fixed
        )


@dataclass(frozen=True)
class _Plan:
    type: str
    names: tuple[str, ...]
    driver_only: frozenset[str]
    #: (name, snapshot), the snapshot None where a factory makes the default.
    defaults: tuple[tuple[str, Snap | None], ...]
    factories: dict[str, Callable[[], Any]]
    #: The defaults where no factory makes any: the same every time.
    fixed_defaults: tuple[tuple[str, Snap], ...] = ()


_NO_DEFAULT = object()


def _made(factory: Callable[[], Any]) -> Any:
    try:
        return factory()
    except Exception:
        return _NO_DEFAULT


def _attributes(value: Any) -> dict[str, Any] | None:
    try:
        attrs = vars(value)
    except TypeError:
        attrs = None
    if isinstance(attrs, dict) and not isinstance(value, type):
        return dict(attrs)
    slots = [
        slot
        for klass in type(value).__mro__
        for slot in getattr(klass, "__slots__", ())
        if isinstance(slot, str) and not slot.startswith("__")
    ]
    if slots and not callable(value):
        return {s: getattr(value, s) for s in slots if hasattr(value, s)}
    return None


_PLAIN_SNAPSHOTTER = Snapshotter()


def snapshot(value: Any) -> Snap:
    """A snapshot without driver-only or default information (what ranks send back)."""
    return _PLAIN_SNAPSHOTTER.take(value)


def unchanged(snap: Snap, value: Any) -> bool:
    """Whether ``snapshot(value) == snap``, without taking it where it can
    (:meth:`Snapshotter.matches`)."""
    return _PLAIN_SNAPSHOTTER.matches(snap, value)
