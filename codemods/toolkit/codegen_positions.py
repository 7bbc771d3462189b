"""Printing through LibCST's code generation: plain, and with node positions from one
print of a module.

It subclasses LibCST's internal ``CodegenState`` (not public API), so
:func:`codemods.toolkit.positions.measure` falls back to LibCST's public
``PositionProvider``, and :func:`codemods.toolkit.cstutil.code` to ``code_for_node``, when
this module cannot be used with the installed LibCST.

LibCST's own state enters a generator-based context manager for every statement and
expression it prints (``record_syntactic_position``, a hook for its position
metadata that does nothing otherwise); the states here enter one plain object
instead, which makes a print about a third cheaper and the text the same.

The sized print of a rewritten module (:func:`print_sized`) writes the statements the
rewrite kept from the parsed module as the text they were read from
(:mod:`codemods.toolkit.kept_text`) and prints only the rest."""

from __future__ import annotations

import dataclasses
import re
from dataclasses import dataclass, field

import libcst as cst
from libcst._nodes.internal import CodegenState

from codemods.toolkit.kept_text import Kept
from codemods.toolkit.unparsed import UnparsedBlock

_NEWLINE = re.compile(r"\r\n?|\n")


class _Unrecorded:
    """The context manager a print that records no syntactic position enters."""

    __slots__ = ()

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        return None


_UNRECORDED = _Unrecorded()


@dataclass
class _Printing(CodegenState):
    """LibCST's code generation, without its no-op position hook's generator."""

    def record_syntactic_position(  # type: ignore[override]  # any context manager does
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> _Unrecorded:
        return _UNRECORDED


def print_code(node: cst.CSTNode, default_indent: str, default_newline: str) -> str:
    """``node``'s code as a module with this indent and line ending prints it
    (``module.code_for_node(node)``)."""
    state = _Printing(default_indent=default_indent, default_newline=default_newline)
    node._codegen(state)
    return "".join(state.tokens)


@dataclass
class _Measuring(CodegenState):
    """LibCST's code generation, counting lines and columns as it goes."""

    line: int = 1  # 1-based
    column: int = 0  # 0-based
    breaks: int = 0  # "\n" seen so far
    starts: dict[int, tuple[int, int]] = field(default_factory=dict)
    sizes: dict[int, int] = field(default_factory=dict)
    stack: list[tuple[int, int, int]] = field(default_factory=list)

    def add_indent_tokens(self) -> None:
        for token in self.indent_tokens:
            self.add_token(token)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value or "\r" in value:
            segments = _NEWLINE.split(value)
            self.line += len(segments) - 1
            self.column = len(segments[-1])
            self.breaks += value.count("\n")
        else:
            self.column += len(value)

    def before_codegen(self, node: cst.CSTNode) -> None:
        self.stack.append((self.line, self.column, self.breaks))

    def after_codegen(self, node: cst.CSTNode) -> None:
        line, column, breaks = self.stack.pop()
        key = id(node)
        self.starts.setdefault(key, (line, column))  # a syntactic start comes first
        self.sizes[key] = self.breaks - breaks

    def record_syntactic_position(  # type: ignore[override]  # any context manager does
        self,
        node: cst.CSTNode,
        *,
        start_node: cst.CSTNode | None = None,
        end_node: cst.CSTNode | None = None,
    ) -> _Syntactic:
        return _Syntactic(self, node, start_node)


class _Syntactic:
    """Where a node's syntax starts: here, or where ``start_node`` starts (a plain
    context manager: LibCST enters one per statement and expression)."""

    __slots__ = ("node", "start", "start_node", "state")

    def __init__(
        self, state: _Measuring, node: cst.CSTNode, start_node: cst.CSTNode | None
    ) -> None:
        self.state, self.node, self.start_node = state, node, start_node
        self.start = (state.line, state.column)

    def __enter__(self) -> None:
        return None

    def __exit__(self, *exc: object) -> None:
        starts = self.state.starts
        start_node = self.start_node
        starts[id(self.node)] = self.start if start_node is None else starts[id(start_node)]


#: The nodes :func:`print_sized` sizes: lines, statements, blocks and what ends a
#: compound statement (the layout pass asks for no other).
_SIZED_BASES = (
    cst.EmptyLine,
    cst.TrailingWhitespace,
    cst.BaseStatement,
    cst.BaseSmallStatement,
    cst.BaseSuite,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)
_SIZED = frozenset(
    kind for kind in vars(cst).values() if isinstance(kind, type) and issubclass(kind, _SIZED_BASES)
)


@dataclass
class _Sizing(_Printing):
    """LibCST's code generation, counting the line breaks of the sized nodes only."""

    breaks: int = 0
    sizes: dict[int, int] = field(default_factory=dict)
    stack: list[int] = field(default_factory=list)
    #: the statements written as their kept text (by ``id``)
    written: set[int] = field(default_factory=set)

    def add_token(self, value: str) -> None:
        self.tokens.append(value)
        if "\n" in value:
            self.breaks += value.count("\n")

    def before_codegen(self, node: cst.CSTNode) -> None:
        if type(node) in _SIZED:
            self.stack.append(self.breaks)

    def after_codegen(self, node: cst.CSTNode) -> None:
        if type(node) in _SIZED:
            self.sizes[id(node)] = self.breaks - self.stack.pop()


def print_sized(
    module: cst.Module, kept: Kept | None = None
) -> tuple[str, dict[int, int], set[int]]:
    """The module's code, the line breaks of each line, statement and block, and the
    statements written as their kept text.

    ``kept``: the text of the statements of the module ``module`` was made from; a
    statement of it that ``module`` still holds, inside blocks indented as they were,
    is written as that text instead of printed (it is sized as a whole; nothing under
    it is)."""
    state = _Sizing(default_indent=module.default_indent, default_newline=module.default_newline)
    if kept is None or not kept.matches(module):
        module._codegen(state)
        return "".join(state.tokens), state.sizes, state.written
    made: dict[int, cst.CSTNode] = {}
    printed = _with_kept(module, kept.texts, made)  # (held until its nodes' sizes are moved)
    printed._codegen(state)
    sizes = state.sizes
    for key, node in made.items():  # each node made anew is sized as the node it stands for
        found = sizes.pop(key, None)
        if found is not None:
            sizes[id(node)] = found
    return "".join(state.tokens), sizes, state.written


@dataclass(frozen=True)
class _Verbatim(cst.CSTNode):
    """A statement kept as it was read: its text where the blocks around it are indented
    as they were, else its print."""

    statement: cst.BaseStatement
    text: str
    indents: tuple[str, ...]

    def _visit_and_replace_children(self, visitor: cst.CSTVisitorT) -> _Verbatim:
        return self

    def _codegen_impl(self, state: CodegenState) -> None:
        if isinstance(state, _Sizing) and tuple(state.indent_tokens) == self.indents:
            state.add_token(self.text)
            state.sizes[id(self.statement)] = self.text.count("\n")
            state.written.add(id(self.statement))
        else:
            self.statement._codegen(state)


#: The nodes whose fields may hold blocks of statements (what :func:`_with_kept` opens).
_HOLDERS = (
    cst.Module,
    cst.IndentedBlock,
    cst.BaseCompoundStatement,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)
#: Per holder class, its fields that may hold statements or holders.
_HOLDER_FIELDS: dict[type, tuple[str, ...]] = {}


def _holder_fields(node: cst.CSTNode) -> tuple[str, ...]:
    found = _HOLDER_FIELDS.get(type(node))
    if found is None:
        found = _HOLDER_FIELDS[type(node)] = tuple(
            f.name
            for f in dataclasses.fields(node)
            if f.name in ("body", "header", "footer", "orelse", "handlers", "finalbody", "cases")
        )
    return found


_Texts = dict[int, tuple[str, tuple[str, ...]]]


def _with_kept(node: cst.CSTNode, texts: _Texts, made: dict[int, cst.CSTNode]) -> cst.CSTNode:
    """``node`` with each statement of ``texts`` under it (in blocks, at any depth)
    standing as a :class:`_Verbatim` of it; only the nodes on the way are made anew
    (``made``: each one's ``id`` -> the node it stands for). An unparsed block is left
    as it is: it writes the lines it was read from."""
    if type(node) is UnparsedBlock:
        return node
    changes: dict[str, object] = {}
    for name in _holder_fields(node):
        value = getattr(node, name)
        if isinstance(value, (list, tuple)):
            items = [_kept_item(item, texts, made) for item in value]
            if any(a is not b for a, b in zip(items, value, strict=True)):
                changes[name] = items
        elif isinstance(value, _HOLDERS):
            new = _with_kept(value, texts, made)
            if new is not value:
                changes[name] = new
    if not changes:
        return node
    copy = node.with_changes(**changes)
    made[id(copy)] = node
    return copy


def _kept_item(item: cst.CSTNode, texts: _Texts, made: dict[int, cst.CSTNode]) -> cst.CSTNode:
    found = texts.get(id(item))
    if found is not None and isinstance(item, cst.BaseStatement):
        return _Verbatim(item, found[0], found[1])
    if isinstance(item, _HOLDERS):
        return _with_kept(item, texts, made)
    return item


def print_measured(
    module: cst.Module,
) -> tuple[str, dict[int, tuple[int, int]], dict[int, int]]:
    """The module's code, and per node (by ``id``) its start and its line breaks."""
    state = _Measuring(default_indent=module.default_indent, default_newline=module.default_newline)
    module._codegen(state)
    return "".join(state.tokens), state.starts, state.sizes


def starts_within(node: cst.CSTNode, module: cst.Module) -> dict[int, tuple[int, int]]:
    """Per node under ``node`` (by ``id``), its start in a print of ``node`` alone (the
    lines count from ``node``'s own first line)."""
    state = _Measuring(default_indent=module.default_indent, default_newline=module.default_newline)
    node._codegen(state)
    return state.starts


def printed_within(node: cst.CSTNode, module: cst.Module, indents: tuple[str, ...]) -> str:
    """``node``'s code as ``module`` prints it inside blocks indented by ``indents``."""
    state = _Printing(
        default_indent=module.default_indent,
        default_newline=module.default_newline,
        indent_tokens=list(indents),
    )
    node._codegen(state)
    return "".join(state.tokens)
