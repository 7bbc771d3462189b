"""How generated values are drawn from Hypothesis: as few draws as still shrink well.

A draw costs Hypothesis about the same whatever it holds (a span and a choice), so
an example costs about what its number of draws does. Three things cut them without
changing what an example shrinks to:

* A :class:`Fixed` value (a tensor, a bool, an enum member, a literal, a dtype) is
  decoded from a few bytes, one byte for each of its properties (:func:`value_of`).
  Hypothesis shrinks each byte of a draw on its own, so each property shrinks towards
  its first value on its own, as it did when it was a draw of its own.
* The fixed fields of a class share one draw of bytes (:class:`Instances`). A field
  with several branches (its default first) picks one with a byte there, and a fixed
  branch is decoded from the bytes after that one. Lowering such a pick leaves every
  other draw where it was, so it shrinks as a draw of its own would.
* A field makes a converted value or a nested instance itself, with no draw around it
  (:class:`Converted`; :meth:`Instances.make`).

The other fields (collections, numbers, strings, nested instances behind a default)
pick with an integer draw of their own, just before the draws of the branch they
pick: when lowering a pick leaves those draws behind, Hypothesis's shrinker deletes
the draws after it. A pick of theirs in the shared draw would leave its field's draws
to the next field instead, and minimal examples kept fields that do not matter
(``tests/fuzz/test_draws.py``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from hypothesis import reject
from hypothesis import strategies as st
from hypothesis.strategies import SearchStrategy


def value_of(byte: int, count: int) -> int:
    """``byte`` (0-255) as one of ``range(count)``: the bytes below ``count`` are the
    values themselves, and the bytes above repeat them (evenly, give or take one in
    256). The least byte that gives a value is the value, so a byte shrinking towards 0
    meets the values in the order an integer draw of them does, and Hypothesis's
    shrinker reaches a small value as it reaches a small integer: by trying 0 and 1 and
    by clearing high bits, each of which lands on a byte of some value."""
    return byte % count


#: The most values a byte picks among (:func:`value_of`).
BYTE_VALUES = 256


@dataclass(frozen=True)
class Fixed:
    """Values decoded from ``width`` bytes by ``decode``."""

    width: int
    decode: Callable[[bytes], Any]
    #: Its bytes as a draw of their own.
    code: SearchStrategy[bytes] = dataclasses.field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "code", st.binary(min_size=self.width, max_size=self.width))

    def make(self, draw: st.DrawFn) -> Any:
        return self.decode(draw(self.code))

    def strategy(self) -> SearchStrategy[Any]:
        return self.code.map(self.decode)


def one_of_values(values: tuple[Any, ...]) -> Fixed:
    """One of ``values`` (at most :data:`BYTE_VALUES`), the first the simplest."""
    return Fixed(1, lambda code: values[value_of(code[0], len(values))])


#: False or True, False the simplest.
BOOLS = one_of_values((False, True))


@dataclass(frozen=True)
class Converted:
    """Values made by ``convert`` from a draw of ``source`` (where a field makes one, it
    draws from the source and converts: no draw around them, as ``map`` has)."""

    source: SearchStrategy[Any]
    convert: Callable[[Any], Any]

    def make(self, draw: st.DrawFn) -> Any:
        return self.convert(draw(self.source))

    def strategy(self) -> SearchStrategy[Any]:
        return self.source.map(self.convert)


#: One way to make a value: ``("value", v)`` is ``v`` itself, ``("call", f)`` what
#: ``f()`` returns, ``("draw", strategy)`` a draw from the strategy, ``("fixed", f)``
#: a :class:`Fixed` value, ``("make", m)`` what ``m.make(draw)`` makes (a
#: :class:`Converted` value or one of :class:`Instances`).
Branch = tuple[str, Any]


def drawn(branch: Branch) -> SearchStrategy[Any]:
    """The strategy of one branch on its own."""
    kind, target = branch
    if kind == "value":
        return st.just(target)
    if kind == "call":
        return st.builds(target)
    if kind in ("fixed", "make"):
        strategy: SearchStrategy[Any] = target.strategy()
        return strategy
    return target


#: The last exception a constructor raised while generating (reported if nothing builds).
last_construction_error: list[BaseException] = []


@dataclass(frozen=True)
class Field:
    """One argument of :class:`Instances`: one of its ``branches``, the first the
    simplest (a field's default, where it has one)."""

    name: str
    branches: tuple[Branch, ...]
    #: Where the field's bytes start in its class's fixed draw; None for a field that
    #: draws on its own.
    offset: int | None
    #: The pick of a field that draws on its own and has several branches.
    pick: SearchStrategy[int] | None

    @staticmethod
    def is_fixed(branches: tuple[Branch, ...]) -> bool:
        return len(branches) <= BYTE_VALUES and all(
            kind in ("value", "call", "fixed") for kind, _ in branches
        )

    @staticmethod
    def width(branches: tuple[Branch, ...]) -> int:
        """The bytes a fixed field takes: its pick (if it has one), then its widest
        fixed branch."""
        widest = max((t.width for kind, t in branches if kind == "fixed"), default=0)
        return (len(branches) > 1) + widest

    def make(self, code: bytes, draw: st.DrawFn) -> Any:
        branches = self.branches
        if self.offset is None:
            index = draw(self.pick) if self.pick is not None else 0
            kind, target = branches[index]
            if kind == "make" and isinstance(target, Instances) and self.pick is not None:
                # drawn whole: a span the shrinker deletes when the pick is lowered
                return draw(target.strategy())
        else:
            at = self.offset
            index = 0
            if len(branches) > 1:
                index = value_of(code[at], len(branches))
                at += 1
            kind, target = branches[index]
            if kind == "fixed":
                return target.decode(code[at : at + target.width])
        if kind == "value":
            return target
        if kind == "call":
            return target()
        if kind in ("fixed", "make"):
            return target.make(draw)
        return draw(target)


class Instances:
    """Instances of ``cls`` from keyword arguments, each made by its field: the fixed
    fields from one draw of bytes, first, then each other field with its own draws."""

    def __init__(
        self,
        cls: type,
        fields: Mapping[str, tuple[Branch, ...]],
        construct: Callable[..., Any] | None = None,
    ) -> None:
        self.cls = cls
        #: How an instance is made from the keyword arguments (default: ``cls(**kw)``).
        self.construct = construct if construct is not None else cls
        made: list[Field] = []
        width = 0
        for name, branches in fields.items():
            if Field.is_fixed(branches):
                made.append(Field(name, branches, width, None))
                width += Field.width(branches)
            else:
                pick = st.integers(0, len(branches) - 1) if len(branches) > 1 else None
                made.append(Field(name, branches, None, pick))
        self.fields = tuple(made)
        self.code = st.binary(min_size=width, max_size=width) if width else None
        make = self.make

        @st.composite
        def build(draw: st.DrawFn) -> Any:
            return make(draw)

        self._strategy: SearchStrategy[Any] = build()

    def strategy(self) -> SearchStrategy[Any]:
        """The instances as a draw of their own."""
        return self._strategy

    def make(self, draw: st.DrawFn) -> Any:
        code = draw(self.code) if self.code is not None else b""
        kwargs = {f.name: f.make(code, draw) for f in self.fields}
        try:
            return self.construct(**kwargs)
        except Exception as exc:  # __post_init__ validation: try other values
            last_construction_error[:] = [exc]
            reject()
