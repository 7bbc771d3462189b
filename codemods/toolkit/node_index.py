"""The nodes of a LibCST subtree, listed by one walk and asked many times.

The planners ask the same methods and statements many questions (the broadcasts in it,
the assignments, the ``self.<attr>`` reads, whether a node lies inside it). Each
question used to be a walk of its own. LibCST trees are immutable, so the nodes under
a node never change: :func:`nodes` walks a subtree once, in the order LibCST's visit
meets its nodes, and every later question about that subtree or any node inside it is
a slice of that list.

A walk reads each node's children from its fields (:func:`children`): LibCST's
``node.children`` builds a copy of the node to list them.

An index leaves out whitespace, comments and punctuation (:data:`TRIVIA`): about two
thirds of a parsed module's nodes, which no question of the codemods asks about (a
search for one of them, or a replacement of one, would find nothing); :func:`within`
still answers for them, by a walk.

The index is kept by node identity for the process (it holds the nodes it lists, so an
identity is never another node's while it is kept), up to :data:`KEPT_NODES` nodes;
:func:`forget` drops it (``migrate`` does at the end of a run).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from operator import attrgetter
from typing import Any

import libcst as cst

from codemods.toolkit import unparsed
from codemods.toolkit.unparsed import NeedsBody, UnparsedBlock

#: Per node class, its fields that hold nodes, in the order LibCST visits them (read
#: from the field names its ``_visit_and_replace_children`` passes to the visit).
_CHILD_FIELDS: dict[type[cst.CSTNode], tuple[str, ...] | None] = {}
#: Per node class, what reads those fields at once (a tuple of their values).
_READERS: dict[type[cst.CSTNode], Callable[[cst.CSTNode], tuple[Any, ...]] | None] = {}
#: Per value type met in a node's field, whether it is a node (``isinstance`` against
#: LibCST's abstract node class is slow).
_IS_NODE: dict[type, bool] = {}


def _is_node(kind: type) -> bool:
    found = _IS_NODE.get(kind)
    if found is None:
        found = _IS_NODE[kind] = issubclass(kind, cst.CSTNode)
    return found


def _unparsed(node: cst.CSTNode) -> tuple[()]:
    """An unparsed block's children as an index lists them: none (it is a hole in the
    index: :attr:`SubtreeIndex.holes`)."""
    return ()


_CHILD_FIELDS[UnparsedBlock] = ()
_READERS[UnparsedBlock] = _unparsed


def _child_fields(node: cst.CSTNode) -> tuple[str, ...] | None:
    """The node class's child fields in visiting order; None where they cannot be
    read (then ``node.children`` is used). Checked against ``node.children`` on the
    class's first node."""
    cls = type(node)
    if cls in _CHILD_FIELDS:
        return _CHILD_FIELDS[cls]
    order: tuple[str, ...] | None = None
    try:
        names = {f.name for f in dataclasses.fields(cls)}
        constants = cls._visit_and_replace_children.__code__.co_consts
        order = tuple(dict.fromkeys(c for c in constants if isinstance(c, str) and c in names))
    except (AttributeError, TypeError):
        pass
    if order is not None and [id(c) for c in _gather(node, _reader(order))] != [
        id(c) for c in node.children
    ]:
        order = None
    _CHILD_FIELDS[cls] = order
    _READERS[cls] = None if order is None else _reader(order)
    return order


def _reader(order: tuple[str, ...]) -> Callable[[cst.CSTNode], tuple[Any, ...]]:
    if len(order) > 1:
        return attrgetter(*order)
    if order:
        name = order[0]
        return lambda node: (getattr(node, name),)
    return lambda node: ()


def _gather(node: cst.CSTNode, read: Callable[[cst.CSTNode], tuple[Any, ...]]) -> list[cst.CSTNode]:
    """The nodes in the fields ``read`` reads (a sequence field of LibCST's nodes holds
    nodes only)."""
    out: list[cst.CSTNode] = []
    for value in read(node):
        kind = type(value)
        if kind is list or kind is tuple:
            out.extend(value)
        else:
            is_one = _IS_NODE.get(kind)
            if is_one is None:
                is_one = _is_node(kind)
            if is_one:
                out.append(value)
    return out


def children(node: cst.CSTNode) -> Sequence[cst.CSTNode]:
    """``node.children`` (in lexical order), read from its fields: LibCST's property
    builds a copy of the node to list them. An unparsed block's raise
    :class:`.NeedsBody`."""
    read = _READERS.get(type(node))
    if read is _unparsed:
        raise NeedsBody.of([node])  # type: ignore[list-item]  # (only its class reads so)
    if read is None:
        if _child_fields(node) is None:
            return node.children
        read = _READERS[type(node)]
        assert read is not None
    return _gather(node, read)


#: Whitespace, comments and punctuation: each holds nodes of these kinds only (its
#: whitespace, comment and line break), and an index does not list them.
TRIVIA: frozenset[type[cst.CSTNode]] = frozenset(
    {
        cst.SimpleWhitespace,
        cst.ParenthesizedWhitespace,
        cst.TrailingWhitespace,
        cst.EmptyLine,
        cst.Newline,
        cst.Comment,
        cst.Comma,
        cst.Dot,
        cst.Colon,
        cst.Semicolon,
        cst.AssignEqual,
        cst.LeftParen,
        cst.RightParen,
        cst.LeftSquareBracket,
        cst.RightSquareBracket,
        cst.LeftCurlyBrace,
        cst.RightCurlyBrace,
    }
)


class SubtreeIndex:
    """The nodes under a root (itself first) in the order a visit meets them, but for
    :data:`TRIVIA` under it: the nodes under the node at position ``i`` are
    ``order[i:ends[i]]``; ``where`` gives a node's position (its first, where one node
    object is met at two places of a tree built from shared parts: then ``repeats``)."""

    __slots__ = ("ends", "holes", "order", "repeats", "where")
    order: list[cst.CSTNode]
    ends: list[int]
    where: dict[int, int]
    repeats: bool
    #: the positions of the unparsed blocks it lists
    holes: list[int]

    def __init__(self, root: cst.CSTNode) -> None:
        order: list[cst.CSTNode] = []
        ends: list[int] = []
        known, readers, trivia = _WHERE, _READERS, TRIVIA
        stack: list[cst.CSTNode | int] = [root]
        pop, push, extend = stack.pop, stack.append, stack.extend
        listed, opened = order.append, ends.append
        holes: list[int] = []
        while stack:
            item = pop()
            if type(item) is int:  # every node under the one at this position is listed
                ends[item] = len(order)
                continue
            assert not isinstance(item, int)
            other = known.get(id(item))
            if other is not None:  # listed by another index: copied, not walked
                start = other.where[id(item)]
                stop = other.ends[start]
                shift = len(order) - start
                order.extend(other.order[start:stop])
                ends.extend([end + shift for end in other.ends[start:stop]])
                if other.holes:
                    holes += [hole + shift for hole in other.holes if start <= hole < stop]
                continue
            opened(0)
            push(len(order))
            listed(item)
            # its children (what :func:`children` gives) but trivia, pushed last first
            read = readers.get(type(item))
            if read is _unparsed:
                holes.append(len(order) - 1)
            found = children(item) if read is None else _gather(item, read)
            extend([child for child in reversed(found) if child.__class__ not in trivia])
        count = len(order)
        self.order = order
        self.ends = ends
        # the first position of each node: the last one written
        self.where = dict(zip(map(id, reversed(order)), range(count - 1, -1, -1), strict=True))
        self.repeats = len(self.where) < count
        self.holes = holes
        known.update(dict.fromkeys(self.where, self))

    def holes_in(self, start: int) -> list[int]:
        """The positions of the unparsed blocks in the subtree at ``start``."""
        end = self.ends[start]
        return [hole for hole in self.holes if start <= hole < end]

    def unparsed(self, start: int) -> list[UnparsedBlock]:
        """The unparsed blocks in the subtree at ``start``."""
        found = [self.order[i] for i in self.holes_in(start)]
        return found  # type: ignore[return-value]  # (the order holds them at those places)

    def holds(self, start: int, node: cst.CSTNode) -> bool:
        """Whether ``node`` lies in the subtree at ``start``."""
        end = self.ends[start]
        position = self.where.get(id(node))
        if position is None:
            return False
        if start <= position < end:
            return True
        return self.repeats and any(found is node for found in self.order[start:end])


#: Every indexed node's identity -> the latest index that lists it.
_WHERE: dict[int, SubtreeIndex] = {}
#: How many nodes the indexes may list before they are dropped (and made again on use).
KEPT_NODES = 200_000


def _located(root: cst.CSTNode) -> tuple[SubtreeIndex, int]:
    found = _WHERE.get(id(root))
    if found is not None:
        return found, found.where[id(root)]
    if len(_WHERE) > KEPT_NODES:
        _WHERE.clear()
    return SubtreeIndex(root), 0


def nodes(root: cst.CSTNode) -> list[cst.CSTNode]:
    """The nodes under ``root`` (itself included) in the order a visit meets them, but
    for :data:`TRIVIA` under it; raises :class:`.NeedsBody` where an unparsed block
    lies under it."""
    index, start = _located(root)
    if index.holes and (blocks := index.unparsed(start)):
        raise NeedsBody.of(blocks)
    return index.order[start : index.ends[start]]


def searched(
    root: cst.CSTNode,
    kinds: type[cst.CSTNode] | tuple[type[cst.CSTNode], ...],
    words: Sequence[str] = (),
) -> list[cst.CSTNode]:
    """:func:`nodes` for a search of nodes of ``kinds`` (whose text names one of
    ``words``, when given): an unparsed block under ``root`` that cannot hold one
    (:func:`.unparsed.may_hold`) is passed over."""
    index, start = _located(root)
    if index.holes:
        wanted = kinds if isinstance(kinds, tuple) else (kinds,)
        blocks = [b for b in index.unparsed(start) if unparsed.may_hold(b, wanted, words)]
        if blocks:
            raise NeedsBody.of(blocks)
    return index.order[start : index.ends[start]]


def read(
    root: cst.CSTNode, kinds: type[cst.CSTNode] | tuple[type[cst.CSTNode], ...]
) -> list[cst.CSTNode]:
    """The nodes of ``kinds`` under ``root`` for a search that only reads them: where
    an unparsed block under ``root`` may hold one, its nodes are parsed one statement
    at a time (:func:`.unparsed.copies`, nodes that are not in ``root``'s tree) and take
    the block's place in the order."""
    index, start = _located(root)
    wanted = kinds if isinstance(kinds, tuple) else (kinds,)
    out: list[cst.CSTNode] = []
    at = start
    for hole in index.holes_in(start):
        block = index.order[hole]
        assert isinstance(block, UnparsedBlock)
        out += of_kind(index.order[at:hole], kinds)
        if unparsed.may_hold(block, wanted):
            out += unparsed.copies(block, wanted)
        at = hole + 1
    return out + of_kind(index.order[at : index.ends[start]], kinds)


def span(
    root: cst.CSTNode, *, identities: bool = False
) -> tuple[list[cst.CSTNode], list[int], int, int]:
    """The index that lists ``root``'s subtree: its ``order`` and ``ends`` and the
    positions ``[start, end)`` of the subtree (for walks that skip subtrees); raises
    :class:`.NeedsBody` where an unparsed block lies under it, unless the walk reads
    only which listed nodes hold which (``identities``: an unparsed block holds no
    node anyone has)."""
    index, start = _located(root)
    if index.holes and not identities and (blocks := index.unparsed(start)):
        raise NeedsBody.of(blocks)
    return index.order, index.ends, start, index.ends[start]


def indexed(node: cst.CSTNode) -> bool:
    """Whether an index lists ``node`` (asking about it walks nothing)."""
    return id(node) in _WHERE


def within(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``root`` or lies under it."""
    if node.__class__ in TRIVIA and node is not root:  # (not listed: looked for by a walk)
        stack = [root]
        while stack:
            item = stack.pop()
            if item is node:
                return True
            if isinstance(item, UnparsedBlock):  # (what it holds is read by no one)
                stack += [item.header, *item.leading, *item.footer]
            else:
                stack.extend(children(item))
        return False
    index, start = _located(root)
    return index.holds(start, node)


def of_kind(
    nodes: Sequence[cst.CSTNode], kinds: type[cst.CSTNode] | tuple[type[cst.CSTNode], ...]
) -> list[cst.CSTNode]:
    """The nodes ``isinstance(node, kinds)`` keeps, told by their class: LibCST's node
    classes are abstract-base classes, so ``isinstance`` on one a node is not an instance
    of costs a call into ``abc`` per node; a class of LibCST's is looked up in the set
    of those that are subclasses of ``kinds`` instead (any other class is asked
    ``isinstance``)."""
    found = _KINDS.get(kinds)
    if found is None:
        known = _node_classes()
        found = _KINDS[kinds] = (frozenset(k for k in known if issubclass(k, kinds)), known)
    wanted, known = found
    return [
        node
        for node in nodes
        if type(node) in wanted or (type(node) not in known and isinstance(node, kinds))
    ]


#: Per kinds asked for, LibCST's node classes that are of them, and all of LibCST's.
_KINDS: dict[object, tuple[frozenset[type], frozenset[type]]] = {}


def _node_classes() -> frozenset[type]:
    """Every subclass of LibCST's ``CSTNode`` defined so far."""
    out: set[type] = set()
    todo: list[type] = [cst.CSTNode]
    while todo:
        subclasses: list[type] = todo.pop().__subclasses__()
        for sub in subclasses:
            if sub not in out:
                out.add(sub)
                todo.append(sub)
    return frozenset(out)


#: Facts computed once per node elsewhere (:func:`kept`), dropped with the indexes.
_KEPT: list[dict[int, Any]] = []
#: How many nodes each of them may hold before it is emptied.
KEPT_FACTS = 20_000


def kept() -> dict[int, Any]:
    """A new dict of facts by node identity that :func:`forget` empties (fill it with
    :func:`keep`; keep the node in the value, so that its identity stays its own)."""
    facts: dict[int, Any] = {}
    _KEPT.append(facts)
    return facts


def keep(facts: dict[int, Any], key: int, value: Any) -> None:
    if len(facts) >= KEPT_FACTS:
        facts.clear()
    facts[key] = value


def forget() -> None:
    """Drop every index and every fact kept by node (the nodes they held can go)."""
    _WHERE.clear()
    for facts in _KEPT:
        facts.clear()
