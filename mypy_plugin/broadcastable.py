"""Which types can travel in a broadcast tensor dict.

Broadcastable: tensors, numbers, ``str``, ``bytes``, ``bool``, ``None``, enum
members, and containers (list, tuple, dict, set, their typing ABCs), dataclasses,
``msgspec.Struct`` records, named tuples and typed dicts whose items are
broadcastable; plus every class of the ``broadcastable_types`` setting (fully
qualified, subclasses included). ``Any``, plain ``object`` and classes with an
unknown base say nothing about the value, so they pass.
Everything else (functions, lambdas, classes, streams, locks, arbitrary
objects) is reported.
"""

from __future__ import annotations

from typing import Final

from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import TypeInfo, Var
from mypy.types import (
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    Overloaded,
    TupleType,
    Type,
    TypedDictType,
    TypeType,
    TypeVarType,
    UnionType,
    get_proper_type,
)

#: Leaf classes that are broadcast as they are (matched along the value's MRO).
DEFAULT_TYPES: Final = frozenset(
    {
        "builtins.int",
        "builtins.float",
        "builtins.complex",
        "builtins.bool",
        "builtins.str",
        "builtins.bytes",
        "builtins.bytearray",
        "numbers.Number",
        "enum.Enum",
        "torch.Tensor",
        "torch._tensor.Tensor",
        "torch.Size",
        "torch._C.Size",
        "torch.dtype",
        "torch._C.dtype",
        "torch.device",
        "torch._C.device",
        "numpy.ndarray",
        "numpy.generic",
    }
)

#: Containers whose type arguments must be broadcastable.
CONTAINERS: Final = frozenset(
    {
        "builtins.list",
        "builtins.tuple",
        "builtins.dict",
        "builtins.set",
        "builtins.frozenset",
        "collections.deque",
        "collections.OrderedDict",
        "collections.defaultdict",
        "collections.Counter",
        "typing.Sequence",
        "typing.MutableSequence",
        "typing.Mapping",
        "typing.MutableMapping",
        "typing.AbstractSet",
        "typing.MutableSet",
        "typing.Collection",
    }
)

#: Key of the metadata mypy's dataclasses plugin stores on a dataclass's TypeInfo.
_DATACLASS_METADATA = "dataclass"
#: msgspec's record base class: checked field by field, like a dataclass.
_MSGSPEC_STRUCT = "msgspec.Struct"
#: How deep nested types are followed (recursive aliases stop here).
_MAX_DEPTH = 32


class BroadcastableTypes:
    """Decides whether a type can be broadcast; ``extra`` is ``broadcastable_types``."""

    def __init__(self, extra: frozenset[str] = frozenset()) -> None:
        self.leaves = DEFAULT_TYPES | extra

    def offender(self, typ: Type) -> Type | None:
        """The first part of ``typ`` that cannot be broadcast (``typ`` itself, an item,
        a field's type), or None when all of it can."""
        return self._offender(typ, set(), 0)

    def _offender(self, typ: Type, seen: set[str], depth: int) -> Type | None:
        if depth > _MAX_DEPTH:
            return None  # a recursive alias or a deep nest: say nothing rather than guess
        depth += 1
        proper = get_proper_type(typ)
        if isinstance(proper, Instance):
            return self._instance_offender(proper, seen, depth)
        if isinstance(proper, (UnionType, TupleType)):
            for item in proper.items:
                found = self._offender(item, seen, depth)
                if found is not None:
                    return found
            return None
        if isinstance(proper, TypedDictType):
            for item in proper.items.values():
                found = self._offender(item, seen, depth)
                if found is not None:
                    return found
            return None
        if isinstance(proper, LiteralType):
            return self._offender(proper.fallback, seen, depth)
        if isinstance(proper, TypeVarType):
            return self._offender(proper.upper_bound, seen, depth)
        if isinstance(proper, (CallableType, Overloaded, TypeType)):
            return proper
        if isinstance(proper, NoneType):
            return None
        # Any, Never, and the types that only exist during analysis say nothing.
        return None

    def _instance_offender(self, inst: Instance, seen: set[str], depth: int) -> Type | None:
        info = inst.type
        if info.fullname == "builtins.object" or any(b.fallback_to_any for b in info.mro):
            return None  # nothing known about the value (or a base class is unknown)
        if any(base.fullname in self.leaves for base in info.mro):
            return None
        for base in info.mro:
            if base.fullname in CONTAINERS:
                mapped = map_instance_to_supertype(inst, base)
                for arg in mapped.args:
                    found = self._offender(arg, seen, depth)
                    if found is not None:
                        return found
                return None
        fields = _record_field_types(inst)
        if fields is not None:
            if info.fullname in seen:
                return None
            seen.add(info.fullname)
            for field_type in fields:
                found = self._offender(field_type, seen, depth)
                if found is not None:
                    return found
            return None
        return inst


def _record_field_types(inst: Instance) -> list[Type] | None:
    """The field types of a dataclass or a ``msgspec.Struct`` (None: neither)."""
    info: TypeInfo = inst.type
    if _DATACLASS_METADATA in info.metadata:
        attributes = info.metadata[_DATACLASS_METADATA].get("attributes", [])
        names = [a.get("name") for a in attributes if isinstance(a, dict)]
    elif info.has_base(_MSGSPEC_STRUCT):
        names = [
            name
            for owner in info.mro
            if owner.has_base(_MSGSPEC_STRUCT) and owner.fullname != _MSGSPEC_STRUCT
            for name, symbol in owner.names.items()
            if isinstance(symbol.node, Var) and not symbol.node.is_classvar
        ]
    else:
        return None
    types: list[Type] = []
    for name in names:
        if not isinstance(name, str):
            continue
        for owner in info.mro:
            symbol = owner.names.get(name)
            if symbol is None:
                continue
            if isinstance(symbol.node, Var) and symbol.node.type is not None:
                mapped = map_instance_to_supertype(inst, owner)
                types.append(expand_type_by_instance(symbol.node.type, mapped))
            break
    return types
