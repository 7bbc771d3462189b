"""Which types can travel in a broadcast tensor dict.

Broadcastable: tensors, numbers, ``str``, ``bytes``, ``bool``, ``None``, enum
members, and containers (list, tuple, dict, set, their typing ABCs), dataclasses,
``msgspec.Struct`` records, named tuples and typed dicts whose items are
broadcastable; plus every class of the ``broadcastable_types`` setting (fully
qualified, subclasses included). ``Any``, plain ``object`` and classes with an
unknown base say nothing about the value, so they pass.
Everything else (functions, lambdas, classes, streams, locks, arbitrary
objects) is reported, at any depth, with the route to it (``dict value -> list
item -> union member 2 -> field "hook"``). The search is :class:`mypy_plugin.walk.Walk`: each distinct
type is decided once per run, and recursive types cost no more than others.
"""

from __future__ import annotations

from typing import Final, Literal

from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import TypeInfo, Var
from mypy.typeops import get_all_type_vars
from mypy.types import (
    CallableType,
    Instance,
    LiteralType,
    NoneType,
    Overloaded,
    ProperType,
    TupleType,
    Type,
    TypeAliasType,
    TypedDictType,
    TypeType,
    TypeVarType,
    UnionType,
    UnpackType,
    get_proper_type,
)

from mypy_plugin.members import instance_of
from mypy_plugin.walk import Children, Decision, Expand, Found, Walk

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

#: Containers whose first two type arguments are a key and a value.
MAPPINGS: Final = frozenset(
    {
        "builtins.dict",
        "collections.OrderedDict",
        "collections.defaultdict",
        "typing.Mapping",
        "typing.MutableMapping",
    }
)

#: Key of the metadata mypy's dataclasses plugin stores on a dataclass's TypeInfo.
_DATACLASS_METADATA = "dataclass"
#: Key of the metadata mypy stores on a named tuple's TypeInfo.
_NAMEDTUPLE_METADATA = "namedtuple"
#: msgspec's record base class: checked field by field, like a dataclass.
_MSGSPEC_STRUCT = "msgspec.Struct"

#: What a class says about its instances: nothing known or broadcast as it is
#: ("opaque"), a container (its container base), a record, or something else ("bad").
ClassKind = Literal["opaque", "record", "bad"] | TypeInfo

#: A bad part of a type, and the route to it from the type.
Offence = Found[ProperType]


class BroadcastableTypes:
    """Decides whether a type can be broadcast; ``extra`` is ``broadcastable_types``.

    One instance serves a whole mypy run: its verdicts are kept until :meth:`clear`
    (call it when the types may have changed, as between two ``dmypy`` runs)."""

    def __init__(self, extra: frozenset[str] = frozenset()) -> None:
        self.leaves = DEFAULT_TYPES | extra
        self._kinds: dict[TypeInfo, ClassKind] = {}
        self._used_type_vars: dict[TypeInfo, list[bool]] = {}
        self._plans: dict[TypeInfo, list[tuple[str, TypeInfo, Type]]] = {}
        self._walk: Walk[ProperType] = Walk(self._decide)

    @property
    def expanded(self) -> int:
        """How many types were walked so far (each distinct one once, when all is good)."""
        return self._walk.expanded

    def clear(self) -> None:
        self._kinds.clear()
        self._used_type_vars.clear()
        self._plans.clear()
        self._walk.clear()

    def offence(self, typ: Type) -> Offence | None:
        """The first part of ``typ`` that cannot be broadcast (``typ`` itself, an item,
        a field's type) and the route to it, or None when all of it can."""
        return self._walk(typ)

    def offender(self, typ: Type) -> Type | None:
        """The first part of ``typ`` that cannot be broadcast, or None."""
        found = self.offence(typ)
        return found.leaf if found is not None else None

    # ------------------------------------------------------------- one node
    def _decide(self, node: object) -> Decision[ProperType]:
        if isinstance(node, TypeAliasType):
            alias = node

            def expansion() -> Children:
                yield None, get_proper_type(alias)

            return Expand(node, node.alias, expansion, lambda: _unlabelled(alias.args))
        assert isinstance(node, Type)
        proper = get_proper_type(node)
        if isinstance(proper, Instance):
            return self._decide_instance(proper)
        if isinstance(proper, UnionType):
            return _expand(proper, _union_members(proper.items))
        if isinstance(proper, TupleType):
            return _expand(proper, _tuple_items(proper))
        if isinstance(proper, TypedDictType):
            items = ((f'key "{key}"', value) for key, value in proper.items.items())
            return _expand(proper, items)
        if isinstance(proper, LiteralType):
            return self._decide_instance(proper.fallback)
        if isinstance(proper, TypeVarType):
            # A constrained type variable is each of its constraints in turn.
            return _expand(proper, _unlabelled(proper.values or [proper.upper_bound]))
        if isinstance(proper, UnpackType):
            return _expand(proper, _unlabelled([proper.type]))
        if isinstance(proper, (CallableType, Overloaded, TypeType)):
            return Found(proper)
        if isinstance(proper, NoneType):
            return None
        # Any, Never, and the types that only exist during analysis say nothing.
        return None

    def _decide_instance(self, inst: Instance) -> Decision[ProperType]:
        kind = self._kind(inst.type)
        if kind == "opaque":
            return None
        if kind == "bad":
            return Found(inst)
        if kind == "record":
            return Expand(
                inst,
                inst.type,
                lambda: _fields(inst, self._plan(inst.type)),
                lambda: self._record_arguments(inst),
            )
        assert isinstance(kind, TypeInfo)
        if not inst.args and inst.type is kind:
            return None  # a bare container: its items are Any
        return _expand(inst, _container_items(inst, kind))

    def _plan(self, info: TypeInfo) -> list[tuple[str, TypeInfo, Type]]:
        plan = self._plans.get(info)
        if plan is None:
            plan = self._plans[info] = _field_plan(info)
        return plan

    def _kind(self, info: TypeInfo) -> ClassKind:
        known = self._kinds.get(info)
        if known is None:
            known = self._kinds[info] = self._classify(info)
        return known

    def _classify(self, info: TypeInfo) -> ClassKind:
        if info.fullname == "builtins.object":
            return "opaque"
        for base in info.mro:
            if base.fallback_to_any or base.fullname in self.leaves:
                return "opaque"  # nothing known (a base class is unknown), or a leaf
        for base in info.mro:
            if base.fullname in CONTAINERS:
                return base
        if _is_record(info):
            return "record"
        return "bad"

    def _record_arguments(self, inst: Instance) -> Children:
        """The type arguments of a record class that its fields use (walked when the
        class is already being walked further up with other arguments)."""
        used = self._used_type_vars.get(inst.type)
        if used is None:
            generic = instance_of(inst.type)
            fields = _fields(generic, self._plan(inst.type))
            ids = {
                tv.id
                for _, field in fields
                if isinstance(field, Type)
                for tv in get_all_type_vars(field)
            }
            used = [tv.id in ids for tv in inst.type.defn.type_vars]
            self._used_type_vars[inst.type] = used
        for index, (arg, wanted) in enumerate(zip(inst.args, used, strict=False)):
            if wanted:
                yield f"{inst.type.name} type argument {index + 1}", arg


def _expand(node: ProperType, children: Children) -> Expand:
    """A node without an identity of its own (not an alias, not a record)."""
    return Expand(node, None, lambda: children, lambda: children)


def _unlabelled(items: list[Type]) -> Children:
    for item in items:
        yield None, item


def _union_members(items: list[Type]) -> Children:
    """A union's members, each named by its place (``union member 2``), so that a route
    through a union says which member holds the bad part."""
    for index, item in enumerate(items):
        yield f"union member {index + 1}", item


def _tuple_items(tup: TupleType) -> Children:
    metadata = tup.partial_fallback.type.metadata.get(_NAMEDTUPLE_METADATA, {})
    names = metadata.get("fields") if isinstance(metadata, dict) else None
    for index, item in enumerate(tup.items):
        if isinstance(names, list) and index < len(names):
            yield f'field "{names[index]}"', item
        else:
            yield f"tuple item {index}", item


def _container_items(inst: Instance, base: TypeInfo) -> Children:
    mapped = map_instance_to_supertype(inst, base)
    mapping = base.fullname in MAPPINGS
    for index, arg in enumerate(mapped.args):
        if mapping and index < 2:
            yield f"{base.name} {'key' if index == 0 else 'value'}", arg
        elif base.fullname == "collections.Counter":
            yield f"{base.name} key", arg
        else:
            yield f"{base.name} item", arg


def _is_record(info: TypeInfo) -> bool:
    return _DATACLASS_METADATA in info.metadata or info.has_base(_MSGSPEC_STRUCT)


def _field_names(info: TypeInfo) -> list[str]:
    if _DATACLASS_METADATA in info.metadata:
        attributes = info.metadata[_DATACLASS_METADATA].get("attributes", [])
        return [
            name
            for a in attributes
            if isinstance(a, dict)
            for name in [a.get("name")]
            if isinstance(name, str)
        ]
    return [
        name
        for owner in info.mro
        if owner.has_base(_MSGSPEC_STRUCT) and owner.fullname != _MSGSPEC_STRUCT
        for name, symbol in owner.names.items()
        if isinstance(symbol.node, Var) and not symbol.node.is_classvar
    ]


def _field_plan(info: TypeInfo) -> list[tuple[str, TypeInfo, Type]]:
    """(label, declaring class, declared type) of each field of a dataclass or a
    ``msgspec.Struct``."""
    plan: list[tuple[str, TypeInfo, Type]] = []
    for name in _field_names(info):
        for owner in info.mro:
            symbol = owner.names.get(name)
            if symbol is None:
                continue
            if isinstance(symbol.node, Var) and symbol.node.type is not None:
                plan.append((f'field "{name}"', owner, symbol.node.type))
            break
    return plan


def _fields(inst: Instance, plan: list[tuple[str, TypeInfo, Type]]) -> Children:
    """(label, type) of each field of ``inst``'s record class, with the class's type
    arguments filled in."""
    for label, owner, declared in plan:
        if owner.type_vars:
            declared = expand_type_by_instance(declared, map_instance_to_supertype(inst, owner))
        yield label, declared
