"""Finding a class's contract members and reading their signatures."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Literal

from mypy.expandtype import expand_type_by_instance
from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    ARG_NAMED,
    ARG_POS,
    Decorator,
    FuncDef,
    OverloadedFuncDef,
    SymbolNode,
    TypeInfo,
    Var,
)
from mypy.types import CallableType, Instance, TupleType, Type
from mypy.typevars import fill_typevars

MemberKind = Literal["method", "classmethod", "staticmethod", "property", "attribute"]

_REQUIRED_KINDS = (ARG_POS, ARG_NAMED)


@dataclass(frozen=True)
class Member:
    """One definition of ``name`` in ``owner`` (a class of some MRO)."""

    owner: TypeInfo
    name: str
    node: SymbolNode

    @property
    def qualname(self) -> str:
        return f"{self.owner.name}.{self.name}"

    @property
    def func(self) -> FuncDef | None:
        """The function definition (for decorated methods, the undecorated one)."""
        node = self.node
        if isinstance(node, Decorator):
            return node.func
        if isinstance(node, FuncDef):
            return node
        if isinstance(node, OverloadedFuncDef) and isinstance(node.impl, (FuncDef, Decorator)):
            return node.impl.func if isinstance(node.impl, Decorator) else node.impl
        return None

    @property
    def kind(self) -> MemberKind:
        node = self.node
        if isinstance(node, Decorator):
            if node.var.is_property or node.func.is_property:
                return "property"
            node = node.func
        if isinstance(node, (FuncDef, OverloadedFuncDef)):
            if node.is_property:
                return "property"
            if node.is_class:
                return "classmethod"
            if node.is_static:
                return "staticmethod"
            return "method"
        if isinstance(node, Var) and node.is_property:
            return "property"
        return "attribute"

    @property
    def signature(self) -> CallableType | None:
        """The declared signature, or None when the function is not annotated."""
        func = self.func
        if func is None or not isinstance(func.type, CallableType):
            return None
        return func.type

    def required_after_first(self) -> list[str]:
        """Names of the required parameters after ``self``/``cls`` (all of them for a
        staticmethod)."""
        func = self.func
        if func is None:
            return []
        skip = 0 if func.is_static else 1
        return [
            name or f"#{index}"
            for index, (name, kind) in enumerate(zip(func.arg_names, func.arg_kinds, strict=True))
            if index >= skip and kind in _REQUIRED_KINDS
        ]


def definitions(info: TypeInfo, name: str) -> Iterator[Member]:
    """Every definition of ``name`` along ``info``'s MRO, most derived first
    (``object``'s are left out: no contract member lives there)."""
    for base in info.mro:
        if base.fullname == "builtins.object":
            continue
        symbol = base.names.get(name)
        if symbol is not None and symbol.node is not None:
            yield Member(base, name, symbol.node)


def find_member(info: TypeInfo, name: str) -> Member | None:
    """The definition of ``name`` that ``info`` uses."""
    for base in info.mro:
        symbol = base.names.get(name)
        if symbol is not None and symbol.node is not None:
            return None if base.fullname == "builtins.object" else Member(base, name, symbol.node)
    return None


def overridden(info: TypeInfo, member: Member) -> Member | None:
    """The definition that ``member`` overrides along ``info``'s MRO, if any."""
    seen_owner = False
    for candidate in definitions(info, member.name):
        if seen_owner:
            return candidate
        seen_owner = candidate.owner is member.owner
    return None


def instance_of(info: TypeInfo) -> Instance:
    """``info`` filled with its own type variables (``Runner[T]``)."""
    filled = fill_typevars(info)
    return filled.partial_fallback if isinstance(filled, TupleType) else filled


def bound_to(
    info: TypeInfo, owner: TypeInfo, signature: CallableType | None
) -> CallableType | None:
    """``signature`` (of a method of ``owner``) with the owner's type variables replaced
    by what ``info`` (a subclass of the owner) binds them to."""
    if signature is None or owner is info or not owner.type_vars:
        return signature  # nothing to replace
    mapped = map_instance_to_supertype(instance_of(info), owner)
    expanded = expand_type_by_instance(signature, mapped)
    return expanded if isinstance(expanded, CallableType) else None


def parameter_type(signature: CallableType, index: int) -> Type | None:
    return signature.arg_types[index] if index < len(signature.arg_types) else None
