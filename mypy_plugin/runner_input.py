"""Which classes are model runners, and the input type ``T`` each one runs on."""

from __future__ import annotations

from mypy.maptype import map_instance_to_supertype
from mypy.nodes import (
    IndexExpr,
    MemberExpr,
    NameExpr,
    RefExpr,
    StarExpr,
    TupleExpr,
    TypeInfo,
)
from mypy.types import (
    AnyType,
    Instance,
    ProperType,
    TupleType,
    Type,
    TypeOfAny,
    TypeVarType,
    UnionType,
    get_proper_type,
)

from mypy_plugin.members import instance_of


def is_named(info: TypeInfo, names: frozenset[str]) -> bool:
    """Whether a configured name (short, or fully qualified) designates ``info``."""
    return info.name in names or info.fullname in names


def runner_base(info: TypeInfo, runner_bases: frozenset[str]) -> TypeInfo | None:
    """The most derived configured runner base among ``info``'s strict ancestors
    (None: ``info`` is no runner; a configured base itself is none either)."""
    for base in info.mro[1:]:
        if is_named(base, runner_bases):
            return base
    return None


def input_type(info: TypeInfo, base: TypeInfo) -> Type | None:
    """The runner's ``T``: ``base``'s first type argument as ``info`` binds it, through
    any generic intermediate classes (None when ``base`` is not generic)."""
    if not base.type_vars:
        return None
    mapped = map_instance_to_supertype(instance_of(info), base)
    return mapped.args[0] if mapped.args else None


#: The ``Any`` a class statement writes: ``Base[Any]``, and ``Base`` without arguments.
#: (An ``Any`` that stands for an unfollowed import, or for an error mypy reports, is
#: none of the runner's doing.)
_WRITTEN_ANY = (TypeOfAny.explicit, TypeOfAny.from_omitted_generics)


def unbound_base(info: TypeInfo, base: TypeInfo) -> tuple[Instance, AnyType] | None:
    """The base class, as ``info``'s class statement writes it, that leaves the runner
    base's type variable ``Any``, and that ``Any`` (None: ``T`` is bound).

    Only where the ``Any`` is written: a direct base that would pass a type variable on
    to ``base`` (``base`` itself, or a generic intermediate) and receives ``Any`` for
    it. A runner passing its own type variable on (``R(ModelRunnerBase[T],
    Generic[T])``) binds ``T``; a subclass of an unbound runner inherits the ``Any`` and
    is not reported again."""
    for written in info.bases:
        if base not in written.type.mro:
            continue
        declared = input_type(written.type, base)
        if not isinstance(get_proper_type(declared), TypeVarType):
            continue  # bound by the base class itself (or already Any there)
        received = get_proper_type(map_instance_to_supertype(written, base).args[0])
        if isinstance(received, AnyType) and received.type_of_any in _WRITTEN_ANY:
            return written, received
    return None


def input_classes(typ: Type) -> list[tuple[ProperType, TypeInfo]]:
    """The classes whose members make up ``typ``, each once: the class of an instance,
    the upper bound of a type variable (each constraint of a constrained one), each
    item of a union (nothing for ``Any``). Iterative, and every type is expanded once,
    so a large union or a chain of aliases costs its size."""
    found: list[tuple[ProperType, TypeInfo]] = []
    seen: set[Type] = set()
    stack: list[Type] = [typ]
    while stack:
        current = stack.pop()
        if current in seen:
            continue
        seen.add(current)
        proper = get_proper_type(current)
        if isinstance(proper, Instance):
            found.append((proper, proper.type))
        elif isinstance(proper, TypeVarType):
            stack.extend(reversed(proper.values or [proper.upper_bound]))
        elif isinstance(proper, TupleType):
            found.append((proper.partial_fallback, proper.partial_fallback.type))
        elif isinstance(proper, UnionType):
            stack.extend(reversed(proper.items))
    return found


#: The forms of ``Unpack`` (``X[Unpack[Ts]]``; ``X[*Ts]`` is a star expression).
_UNPACK = frozenset({"typing.Unpack", "typing_extensions.Unpack"})


def unpacked_argument(info: TypeInfo, written: TypeInfo) -> str | None:
    """The text of an unpacked type variable tuple that ``info``'s class statement passes
    to ``written`` (``Unpack[Ts]``, ``*Ts``), or None. mypy replaces such an argument of a
    class that is not variadic by ``Any``, as if none were written."""
    for expr in info.defn.base_type_exprs:
        if not (isinstance(expr, IndexExpr) and isinstance(expr.base, RefExpr)):
            continue
        if expr.base.fullname != written.fullname:
            continue
        index = expr.index
        for argument in index.items if isinstance(index, TupleExpr) else [index]:
            if isinstance(argument, StarExpr) and isinstance(argument.expr, RefExpr):
                return f"*{_name(argument.expr)}"
            if (
                isinstance(argument, IndexExpr)
                and isinstance(argument.base, RefExpr)
                and argument.base.fullname in _UNPACK
                and isinstance(argument.index, RefExpr)
            ):
                return f"{_name(argument.base)}[{_name(argument.index)}]"
    return None


def _name(ref: RefExpr) -> str:
    """The name as written (``Ts``, ``typing.Unpack``)."""
    if isinstance(ref, MemberExpr) and isinstance(ref.expr, RefExpr):
        return f"{_name(ref.expr)}.{ref.name}"
    return ref.name if isinstance(ref, (NameExpr, MemberExpr)) else ref.fullname
