"""The signature a runner's decorated method really has, and whether mypy compares it.

mypy keeps a decorated method as a :class:`~mypy.nodes.Decorator`: ``func`` is the
function as written (``func.type``: its declared signature) and ``var.type`` what the
decorators made of it, inferred when mypy checks the definition (None before that).

* A decorator typed to return its function's type (``Callable[[F], F]``, a ``ParamSpec``
  wrapper, ``torch.no_grad()`` with torch's stubs) leaves ``var.type`` equal to the
  declared signature.
* An untyped decorator, or one whose type is unknown (``torch`` not installed, an
  import mypy does not follow), makes ``var.type`` ``Any``. mypy then compares neither
  the method with the one it overrides nor its callers' arguments: the declared
  signature is still what the method runs with, so the checks read that one.
* A decorator that returns another callable makes that callable the method's type: the
  checks read what mypy inferred.

mypy's ``[override]`` check compares the decorated types, and skips a pair in which
either is ``Any``; :func:`mypy_compares` says when it ran, so that a mismatch it could
not see is the plugin's to report.
"""

from __future__ import annotations

from mypy.nodes import ARG_OPT, ARG_POS, Decorator, FuncDef, OverloadedFuncDef, TypeInfo
from mypy.types import AnyType, CallableType, FunctionLike, ProperType, get_proper_type

from mypy_plugin.members import Member, bound_to


def _decorated_type(member: Member) -> ProperType | None:
    """What mypy inferred for a decorated definition (None: not decorated, or not
    inferred yet)."""
    node = member.node
    if isinstance(node, Decorator) and node.var.type is not None:
        return get_proper_type(node.var.type)
    return None


def checked_signature(member: Member) -> CallableType | None:
    """The signature the runner checks read: the declared one, unless a decorator made
    the method another callable (then that one). None when there is nothing to read:
    an unannotated function, or a decorator that made it something other than one
    callable (an object, overloads)."""
    decorated = _decorated_type(member)
    if decorated is None or isinstance(decorated, AnyType):
        return member.signature
    return decorated if isinstance(decorated, CallableType) else None


def checked_signature_for(info: TypeInfo, member: Member) -> CallableType | None:
    """:func:`checked_signature` with the owner's type variables bound as ``info`` (a
    subclass of the owner) binds them."""
    return bound_to(info, member.owner, checked_signature(member))


def _mypy_type(member: Member) -> ProperType | None:
    """The type mypy's ``[override]`` check uses for ``member`` (None: unknown). A
    decorated definition mypy has not inferred yet (a base in an import cycle) is
    compared as declared, as mypy does when it cannot wait for it."""
    node = member.node
    if isinstance(node, Decorator):
        decorated = _decorated_type(member)
        if decorated is not None:
            return decorated
        node = node.func
    if isinstance(node, (FuncDef, OverloadedFuncDef)) and node.type is not None:
        return get_proper_type(node.type)
    return None


def mypy_compares(member: Member, base: Member) -> bool:
    """Whether mypy's ``[override]`` check compares ``member`` with ``base``, the
    definition it overrides: both typed callables, neither ``Any``."""
    mine, theirs = _mypy_type(member), _mypy_type(base)
    return isinstance(mine, FunctionLike) and isinstance(theirs, FunctionLike)


def parameter_at(signature: CallableType, name: str) -> int | None:
    """Index of parameter ``name`` in ``signature``, else of the first positional one
    after ``self`` (a callable type made by a decorator may have no names)."""
    if name in signature.arg_names:
        return signature.arg_names.index(name)
    kinds = signature.arg_kinds
    return 1 if len(kinds) > 1 and kinds[1] in (ARG_POS, ARG_OPT) else None


def parameter_text(signature: CallableType, index: int) -> str:
    """How a message names parameter ``index``."""
    name = signature.arg_names[index]
    return name if name is not None else f"argument {index}"
