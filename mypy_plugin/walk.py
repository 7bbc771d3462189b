"""A search for a bad part of a type graph that costs the graph's size, once per run.

Types can be recursive (a recursive alias, a dataclass with a field of its own
type) and large (a union of a thousand members), and the same part is reached
by many routes (``JSONTree[T]`` with three recursive branches reaches itself
three ways at every level). Following every route is exponential; cutting the
walk at a depth misses a bad part below it. This walk does neither:

* **each node is decided once per run.** A node's verdict (good, or the first
  bad part found below it with the route to it) is kept in a memo keyed on the
  node (a type: an alias with its arguments, a class with its arguments);
* **cycles are broken by identity.** A node already on the route counts as good
  so far. So does a node whose *identity* (its alias, or its class) is already on
  the route with other arguments: then only its arguments are walked, because the
  alias's or the class's own structure is being walked further up. This keeps a
  class that recurses with ever larger arguments (``Box[T]`` holding a
  ``Box[list[T]]``) finite without a depth limit;
* **verdicts are kept only when they are final.** The walk is Tarjan's
  strongly-connected-components search: when a component is complete and nothing
  bad was found below it, all its nodes are good. When something bad is found,
  the walk stops: every node on the route to it is bad (the route proves it),
  and the nodes of incomplete components are forgotten (their verdict assumed a
  node that turned out bad).

The walk is iterative: no recursion limit applies, whatever the depth.
"""

from __future__ import annotations

from collections.abc import Callable, Hashable, Iterator
from dataclasses import dataclass
from typing import Any, Generic, TypeVar

#: What makes a node bad (the caller's type).
Leaf = TypeVar("Leaf")
LeafCo = TypeVar("LeafCo", covariant=True)


@dataclass(frozen=True, slots=True, eq=False, repr=False)
class Route:
    """Steps from a node down to a bad leaf, as a linked list shared between the
    verdicts of the nodes along it (compared by identity: it can be long)."""

    step: str
    rest: Route | None

    def __repr__(self) -> str:
        return f"Route({self.steps()!r})"

    def steps(self) -> list[str]:
        out: list[str] = []
        route: Route | None = self
        while route is not None:
            out.append(route.step)
            route = route.rest
        return out


@dataclass(frozen=True, slots=True)
class Found(Generic[LeafCo]):
    """A bad leaf below a node, and the route to it (None: the node itself)."""

    leaf: LeafCo
    route: Route | None = None

    def below(self, step: str | None) -> Found[LeafCo]:
        """This finding seen from one step further up."""
        return self if step is None else Found(self.leaf, Route(step, self.route))

    def steps(self) -> list[str]:
        return self.route.steps() if self.route is not None else []


#: The parts of a node: (step label or None, child) pairs, read lazily.
Children = Iterator[tuple[str | None, object]]


@dataclass(frozen=True, slots=True)
class Expand:
    """A node to walk: ``key`` for the memo, ``identity`` (an alias, a class, or None)
    for breaking cycles, ``children`` its parts and ``arguments`` the parts to walk
    instead when its identity is already on the route with other arguments."""

    key: Hashable
    identity: object | None
    children: Callable[[], Children]
    arguments: Callable[[], Children]


#: What the caller says of a node: good (None), bad (``Found``) or to walk (``Expand``).
Decision = None | Found[Leaf] | Expand


class _Frame:
    __slots__ = ("arguments_only", "children", "identity", "index", "key", "low", "step")

    def __init__(
        self, node: Expand, index: int, step: str | None, arguments_only: bool, low: int
    ) -> None:
        self.key = node.key
        self.identity = node.identity
        self.arguments_only = arguments_only
        self.children = node.arguments() if arguments_only else node.children()
        self.index = index
        self.low = low
        self.step = step


#: Not in the memo (a verdict is None or a ``Found``).
_MISSING: Any = object()


class Walk(Generic[Leaf]):
    """The memoised search; ``decide`` says what a node is (see :data:`Decision`)."""

    def __init__(self, decide: Callable[[object], Decision[Leaf]]) -> None:
        self._decide = decide
        self._memo: dict[Hashable, Found[Leaf] | None] = {}
        #: Nodes expanded in all walks together (the benchmark's measure of work).
        self.expanded = 0

    def clear(self) -> None:
        """Forget every verdict (the types they were made of may have changed)."""
        self._memo.clear()

    def __call__(self, node: Hashable) -> Found[Leaf] | None:
        """The first bad leaf below ``node`` with its route, or None when all is good."""
        known = self._memo.get(node, _MISSING)
        if known is not _MISSING:
            return known
        decision = self._decide(node)
        if not isinstance(decision, Expand):
            self._memo[node] = decision  # a leaf: remembered under the node asked about
            return decision
        known = self._memo.get(decision.key, _MISSING)
        if known is _MISSING:
            known = self._search(decision)
        self._memo[node] = known
        return known

    def _search(self, root: Expand) -> Found[Leaf] | None:
        memo = self._memo
        frames: list[_Frame] = []
        #: Nodes visited in this search whose component is not complete yet -> index.
        pending: dict[Hashable, int] = {}
        pending_order: list[_Frame] = []
        #: Identities with a full (not arguments-only) frame on the route -> index.
        on_route: dict[object, int] = {}
        counter = 0

        def push(node: Expand, step: str | None) -> None:
            nonlocal counter
            owner = on_route.get(node.identity) if node.identity is not None else None
            frame = _Frame(node, counter, step, owner is not None, counter)
            if owner is not None:
                frame.low = owner  # its structure is decided by the frame up the route
            else:
                if node.identity is not None:
                    on_route[node.identity] = counter
                pending[node.key] = counter
            counter += 1
            self.expanded += 1
            frames.append(frame)
            pending_order.append(frame)

        push(root, None)
        while frames:
            frame = frames[-1]
            nxt = next(frame.children, None)
            if nxt is None:
                frames.pop()
                if not frame.arguments_only and frame.identity is not None:
                    if on_route.get(frame.identity) == frame.index:
                        del on_route[frame.identity]
                if frame.low >= frame.index:
                    # A complete component, nothing bad below: all of it is good.
                    while pending_order and pending_order[-1].index >= frame.index:
                        done = pending_order.pop()
                        if not done.arguments_only:
                            pending.pop(done.key, None)
                            memo[done.key] = None
                if frames and frame.low < frames[-1].low:
                    frames[-1].low = frame.low
                continue
            step, child = nxt
            decision = self._decide(child)
            if decision is None:
                continue
            if isinstance(decision, Found):
                return self._stop(frames, decision.below(step))
            known = memo.get(decision.key, _MISSING)
            if known is None:
                continue
            if known is not _MISSING:
                return self._stop(frames, known.below(step))
            index = pending.get(decision.key)
            if index is not None:
                if index < frame.low:
                    frame.low = index  # on the route, or in its incomplete component
                continue
            push(decision, step)
        return memo[root.key]

    def _stop(self, frames: list[_Frame], found: Found[Leaf]) -> Found[Leaf]:
        """Something bad below the top frame: every frame on the route is bad."""
        for frame in reversed(frames):
            if not frame.arguments_only:
                self._memo[frame.key] = found
            found = found.below(frame.step)
        return found
