"""Function bodies a run does not parse with LibCST, and what stops a pass that needs one.

Most of a rewritten module's text is in functions the rewrite leaves as they were:
about 70% of the text of the five files a first ``migrate`` of vLLM 0.5.0 rewrites.
LibCST's parse costs in proportion to the text it reads, so a run parses a function's
body only where it may ask about it (:func:`parse`): a function of the module (or a
method of one of its classes) whose text names none of the run's words (the
contract's names, the functions a group asked for before) nor a function of the
module that names one keeps its statements as the lines they were read from, in an
:class:`UnparsedBlock` (unless it assigns an attribute of ``bound``: a worker's runner
attribute, which the merge annotates where it is assigned).

The guess decides the speed only, never the result. An unparsed block prints back the
lines it was read from, and every way into its statements raises :class:`NeedsBody`:
reading its ``body``, visiting it, listing its children, comparing it, and, in
:mod:`codemods.toolkit.node_index`, an index over it, unless the search says what it looks for
and the block's ``ast`` holds none of it (:func:`may_hold`). A printing in other
indents or line endings than the block was read with raises it too. The run then
does the group again with those bodies parsed, and, should it ask again, with every
body parsed (:func:`codemods.framework.tasks.run_group`): the result is what a run that
parsed everything gives. A search that only reads what it finds takes the small
statements it looks for from the block's lines instead, one at a time (:func:`copies`).
"""

from __future__ import annotations

import ast
import bisect
import dataclasses
import re
from collections.abc import Collection, Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import libcst as cst
from libcst._nodes.internal import CodegenState

from runnercheck.analysis.syntax import walk

if TYPE_CHECKING:
    from runnercheck.contract import Contract

Function = ast.FunctionDef | ast.AsyncFunctionDef

_NEWLINE = re.compile(r"\r\n?|\n")
_WORD = re.compile(r"[^\W\d]\w*")  # (identifiers, Unicode ones too)


class NeedsBody(BaseException):
    """A pass asked for the statements of a function body the run did not parse.

    A ``BaseException``: the planners' ``except Exception`` (a refusal, an error kept
    for a group asked again) must not take it for an outcome of the group. ``names``:
    the functions whose bodies were asked for."""

    def __init__(self, *names: str) -> None:
        super().__init__(*names)
        self.names = frozenset(names)

    @classmethod
    def of(cls, blocks: Iterable[UnparsedBlock]) -> NeedsBody:
        return cls(*(block.unread.function.name for block in blocks))


@dataclass(frozen=True)
class _Span:
    """Lines ``first..last`` (1-based) of a function's statements, their indent."""

    first: int
    last: int
    indent: str
    function: Function


@dataclass(frozen=True)
class Unread:
    """What an unparsed block stands for: the lines of its statements as read (lines
    ``first`` to ``last``, 1-based), the absolute indent and line ending they were read
    with, and the ``ast`` of the function."""

    text: str
    indent: str
    newline: str
    first: int
    last: int
    function: Function
    #: the body's ``ast`` nodes by class, listed on first use
    _nodes: dict[type[ast.AST], list[ast.AST]] = field(
        default_factory=dict, compare=False, repr=False
    )
    #: where each of its lines starts in ``text``, found on first use
    _starts: list[int] = field(default_factory=list, compare=False, repr=False)

    def nodes(self, kind: type[ast.AST]) -> list[ast.AST]:
        """The nodes of the body of class ``kind``."""
        if not self._nodes:
            for statement in self.function.body:
                for node in walk(statement):
                    self._nodes.setdefault(type(node), []).append(node)
        return self._nodes.get(kind, [])

    def names(self, node: ast.AST) -> set[str]:
        """The words on the lines of a node of the body."""
        starts = self._line_starts()
        first = getattr(node, "lineno", self.first) - self.first
        last = (getattr(node, "end_lineno", None) or self.last) - self.first
        return set(_WORD.findall(self.text, starts[first], starts[last + 1]))

    def own_lines(self, node: ast.stmt) -> str | None:
        """The lines of a statement of the body that has them to itself; None where
        another statement shares one."""
        starts = self._line_starts()
        first, last = node.lineno - self.first, (node.end_lineno or node.lineno) - self.first
        if first < 0 or last + 1 >= len(starts):
            return None
        head = self.text[starts[first] : starts[first + 1]]
        tail = self.text[starts[last] : starts[last + 1]]
        indent = len(head) - len(head.lstrip(" \t"))
        if len(head[:indent].encode("utf-8")) != node.col_offset:
            return None  # (after another statement's text, or a header's)
        end = node.end_col_offset
        after = tail.encode("utf-8")[end:].decode("utf-8", "replace") if end is not None else ""
        if after.strip() and not after.lstrip().startswith("#"):
            return None  # (another statement follows it on its last line)
        return self.text[starts[first] : starts[last + 1]]

    def _line_starts(self) -> list[int]:
        starts = self._starts
        if not starts:
            starts += [0, *(m.end() for m in _NEWLINE.finditer(self.text))]
        return starts


class UnparsedBlock(cst.IndentedBlock):
    """An indented block whose statements were not parsed: it prints the lines they
    were read from; reading its statements raises :class:`NeedsBody`."""

    leading: Sequence[cst.EmptyLine]
    unread: Unread

    @classmethod
    def of(
        cls, block: cst.IndentedBlock, leading: Sequence[cst.EmptyLine], unread: Unread
    ) -> UnparsedBlock:
        made = cls(body=(), header=block.header, indent=block.indent, footer=block.footer)
        object.__setattr__(made, "leading", tuple(leading))
        object.__setattr__(made, "unread", unread)
        return made

    def __getattribute__(self, name: str) -> Any:
        if name == "body":
            raise NeedsBody.of([self])
        return super().__getattribute__(name)

    def _visit_and_replace_children(self, visitor: Any) -> UnparsedBlock:
        raise NeedsBody.of([self])

    def _codegen_impl(self, state: CodegenState) -> None:
        self.header._codegen(state)
        indent = state.default_indent if self.indent is None else self.indent
        state.increase_indent(indent)
        unread = self.unread
        if "".join(state.indent_tokens) != unread.indent or state.default_newline != unread.newline:
            raise NeedsBody.of([self])  # its lines are not what printing it here gives
        for line in self.leading:
            line._codegen(state)
        state.add_token(unread.text)
        for line in self.footer:
            line._codegen(state)
        state.decrease_indent()

    def deep_equals(self, other: cst.CSTNode) -> bool:
        raise NeedsBody.of([self])


#: LibCST node classes whose nodes in a function body the ``ast`` tells exactly: a
#: search for one of them can skip an unparsed block whose ``ast`` has none.
_AST_KINDS: dict[type[cst.CSTNode], tuple[type[ast.AST], ...]] = {
    cst.Assign: (ast.Assign,),
    cst.AnnAssign: (ast.AnnAssign,),
    cst.AugAssign: (ast.AugAssign,),
    cst.Return: (ast.Return,),
    cst.Raise: (ast.Raise,),
    cst.Assert: (ast.Assert,),
    cst.Del: (ast.Delete,),
    cst.Global: (ast.Global,),
    cst.Nonlocal: (ast.Nonlocal,),
    cst.Import: (ast.Import,),
    cst.ImportFrom: (ast.ImportFrom,),
    cst.Call: (ast.Call,),
    cst.Await: (ast.Await,),
    cst.Lambda: (ast.Lambda,),
    cst.FunctionDef: (ast.FunctionDef, ast.AsyncFunctionDef),
    cst.ClassDef: (ast.ClassDef,),
    cst.If: (ast.If,),
    cst.For: (ast.For, ast.AsyncFor),
    cst.While: (ast.While,),
    cst.With: (ast.With, ast.AsyncWith),
}


def may_hold(
    block: UnparsedBlock, kinds: Iterable[type[cst.CSTNode]], words: Collection[str] = ()
) -> bool:
    """Whether the block's statements may hold a node of ``kinds`` whose text names one
    of ``words`` (when given): False only where its ``ast`` rules it out (no node of a
    class that stands for one of ``kinds``, none on lines that name a word), or, for a
    kind the ``ast`` does not tell, its text names none of ``words``."""
    unread, wanted = block.unread, set(words)
    classes: list[type[ast.AST]] = []
    for kind in kinds:
        found = _AST_KINDS.get(kind)
        if found is None:
            return not wanted or bool(set(_WORD.findall(unread.text)) & wanted)
        classes.extend(found)
    nodes = [node for kind in classes for node in unread.nodes(kind)]
    if not wanted:
        return bool(nodes)
    return any(unread.names(node) & wanted for node in nodes)


#: Small statements a block's ``ast`` tells exactly, which a search that only reads
#: what it finds can take from the block one statement at a time (:func:`copies`).
_SMALL: dict[type[cst.CSTNode], type[ast.stmt]] = {
    cst.Assign: ast.Assign,
    cst.AnnAssign: ast.AnnAssign,
    cst.AugAssign: ast.AugAssign,
    cst.Return: ast.Return,
    cst.Raise: ast.Raise,
    cst.Assert: ast.Assert,
}


def copies(block: UnparsedBlock, kinds: Iterable[type[cst.CSTNode]]) -> list[cst.CSTNode]:
    """The block's statements of ``kinds`` (small statements), each parsed on its own
    from the lines it was read from, in the order of the text: copies, which are not in
    the module's tree (for a search that reads what it finds and replaces none), each
    parsed in a block indented as it was read, so that it prints as the node a whole
    parse gives. Raises :class:`NeedsBody` for another kind, or a statement that does
    not have its lines to itself (``a = 1; b = 2``, ``if a: b = 2``) or does not parse
    so."""
    unread = block.unread
    classes = []
    for kind in kinds:
        found = _SMALL.get(kind)
        if found is None:
            raise NeedsBody.of([block])
        classes.append(found)
    statements = sorted(
        (node for found in classes for node in unread.nodes(found) if isinstance(node, ast.stmt)),
        key=lambda node: (node.lineno, node.col_offset),
    )
    out: list[cst.CSTNode] = []
    for statement in statements:
        text = unread.own_lines(statement)
        if text is None:
            raise NeedsBody.of([block])
        try:
            holder = cst.parse_statement("if 1:" + unread.newline + text)
        except cst.ParserSyntaxError:
            raise NeedsBody.of([block]) from None
        lines = holder.body.body if isinstance(holder.body, cst.IndentedBlock) else ()
        line = lines[0] if len(lines) == 1 else None
        if not isinstance(line, cst.SimpleStatementLine) or len(line.body) != 1:
            raise NeedsBody.of([block])
        out.append(line.body[0])
    return out


def left_out(module: cst.Module) -> int:
    """How many characters of the module's functions and methods are left unparsed."""
    total = 0
    for statement in module.body:
        items: Sequence[cst.BaseStatement] = (statement,)
        if isinstance(statement, cst.ClassDef) and isinstance(statement.body, cst.IndentedBlock):
            items = statement.body.body
        for item in items:
            if isinstance(item, cst.FunctionDef) and type(item.body) is UnparsedBlock:
                total += len(item.body.unread.text)
    return total


# ------------------------------------------------------------------ the guess and the parse


def contract_words(contract: Contract) -> frozenset[str]:
    """The names of the contract: its classes, methods and function. Not its driver
    flag: the functions that name it and none of the others (the constructors that
    store it) are asked about by searches that only read (:func:`copies`) or that the
    runner attributes they assign make parsed (``bound``, :func:`parse`)."""
    found: set[str] = set()
    for value in dataclasses.astuple(contract):
        found.update(value if isinstance(value, tuple) else (value,))
    found.discard(contract.driver_flag)
    return frozenset(word for word in found if isinstance(word, str) and word.isidentifier())


def parse(
    data: bytes, tree: ast.Module, base: frozenset[str], bound: frozenset[str] = frozenset()
) -> cst.Module | None:
    """``data`` (whose ``ast`` is ``tree``) parsed with LibCST but for the statements of
    its functions and methods that name none of ``base``, nor a function of the module
    that names one, and hold no assignment whose lines name one of ``bound``; None
    where no body is left unparsed or the text is not one read here (not UTF-8, a
    byte-order mark, line endings other than the file's one kind)."""
    if data.startswith(b"\xef\xbb\xbf"):
        return None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError:
        return None
    breaks = _NEWLINE.findall(text)
    if len(set(breaks)) != 1:
        return None  # (lines of two kinds of ending: parsed whole)
    starts = [0, *(found.end() for found in _NEWLINE.finditer(text))]
    spans = _spans(text, starts, tree, base, bound)
    if not spans:
        return None
    pieces: list[str] = []
    at = 0
    for span in spans:
        end = starts[span.last]
        pieces += [
            text[at : starts[span.first - 1]],
            span.indent,
            "pass",
            text[_break(text, end) : end],
        ]
        at = end
    pieces.append(text[at:])
    module = cst.parse_module("".join(pieces).encode("utf-8"))
    if module.default_newline != breaks[0]:
        return None
    if module.encoding != "utf-8":  # (a coding cookie: its bytes read as another text)
        return None
    return _fill(module, tree, {id(span.function): span for span in spans}, text, starts)


def _break(text: str, end: int) -> int:
    """Where the line break that ends at ``end`` starts."""
    return end - 2 if text.startswith("\r\n", end - 2) else end - 1


def _spans(
    text: str, starts: list[int], tree: ast.Module, base: frozenset[str], bound: frozenset[str]
) -> list[_Span]:
    """The functions left unparsed: each that is not named in ``base`` and names none of
    ``base`` nor a function that does (a caller may change with what it calls), nor
    assigns on a line that names one of ``bound``."""
    functions = _functions(tree)
    words = _Words(text)
    where: dict[int, tuple[int, int]] = {}  # the text of each function left to decide
    callees: set[str] = set()
    for function in functions:
        first = min([d.lineno for d in function.decorator_list] + [function.lineno])
        end = function.end_lineno or 0
        if end >= len(starts):
            continue
        lines = (starts[first - 1], starts[end])
        if function.name in base or words.named(base, lines):
            callees.add(function.name)
        else:
            where[id(function)] = lines
    spans = []
    for function in functions:
        found = where.get(id(function))
        if found is None or words.named(callees, found, function.name):
            continue
        if words.named(bound, found) and _assigns(function, text, starts, bound):
            continue
        span = _span(text, starts, function)
        if span is not None:
            spans.append(span)
    return spans


class _Words:
    """Whether a stretch of a text names one of some words, as the words :data:`_WORD`
    reads in the stretch: where each word occurs is searched for once in the whole
    text, and only those places are read."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._found: dict[frozenset[str], list[tuple[int, str]]] = {}

    def named(self, words: Collection[str], lines: tuple[int, int], but: str = "") -> bool:
        """Whether ``text[start:end]`` names one of ``words`` other than ``but``."""
        if not words:
            return False
        key = frozenset(words)
        found = self._found.get(key)
        if found is None:
            found = self._found[key] = sorted(_occurrences(self.text, key))
        text, (start, end) = self.text, lines
        for i in range(bisect.bisect_left(found, (start, "")), len(found)):
            at, word = found[i]
            if at >= end:
                break
            if word != but and _is_word(text, at, word, start, end):
                return True
        return False


def _occurrences(text: str, words: Iterable[str]) -> Iterable[tuple[int, str]]:
    """Where each of ``words`` starts in ``text``, as a substring."""
    for word in words:
        at = text.find(word)
        while at != -1:
            yield at, word
            at = text.find(word, at + 1)


def _is_word(text: str, at: int, word: str, start: int, end: int) -> bool:
    """Whether ``word``, at ``at`` in ``text``, is one of the words :data:`_WORD` reads in
    ``text[start:end]``: it ends where a run of word characters ends, and the run
    holds only decimal digits before it (a word starts at the first character of a
    run that is not one)."""
    stop = at + len(word)
    if stop > end or (stop < end and (text[stop].isalnum() or text[stop] == "_")):
        return False
    first = at
    while first > start and (text[first - 1].isalnum() or text[first - 1] == "_"):
        first -= 1
    return first == at or text[first:at].isdecimal()


def _assigns(function: Function, text: str, starts: list[int], words: frozenset[str]) -> bool:
    """Whether an assignment in the function's body is on lines that name one of
    ``words``."""
    for statement in function.body:
        for node in walk(statement):
            if isinstance(node, ast.Assign):
                lines = text[starts[node.lineno - 1] : starts[node.end_lineno or node.lineno]]
                if not words.isdisjoint(_WORD.findall(lines)):
                    return True
    return False


def _span(text: str, starts: list[int], function: Function) -> _Span | None:
    """The lines of the function's statements, where they form an indented block whose
    first statement starts its line."""
    head, last = function.body[0], function.body[-1].end_lineno
    decorators = getattr(head, "decorator_list", [])
    first = min([d.lineno for d in decorators] + [head.lineno])
    if last is None or first <= function.lineno or last >= len(starts):
        return None
    line = text[starts[first - 1] : starts[first]]
    indent = line[: len(line) - len(line.lstrip(" \t\f"))]
    if decorators:
        if not line.lstrip(" \t\f").startswith("@"):
            return None
    elif head.col_offset != len(indent.encode("utf-8")):
        return None
    if not indent or "\f" in indent:
        return None
    return _Span(first, last, indent, function)


def _functions(tree: ast.Module) -> list[Function]:
    """The module's functions and the methods of its classes."""
    out: list[Function] = []
    for node in tree.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            out.append(node)
        elif isinstance(node, ast.ClassDef):
            out.extend(
                n for n in node.body if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))
            )
    return out


def _fill(
    module: cst.Module, tree: ast.Module, spans: dict[int, _Span], text: str, starts: list[int]
) -> cst.Module | None:
    """The module with each placeholder body replaced by its unparsed block (it prints
    ``text``)."""
    body = _filled(module.body, tree.body, spans, text, starts, module.default_newline)
    if body is None:
        return None
    return module.with_changes(body=body)


def _filled(
    statements: Sequence[cst.BaseStatement],
    nodes: list[ast.stmt],
    spans: dict[int, _Span],
    text: str,
    starts: list[int],
    newline: str,
) -> list[cst.BaseStatement] | None:
    defined = [
        n for n in nodes if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef))
    ]
    found = iter(defined)
    out: list[cst.BaseStatement] = []
    changed = False
    for statement in statements:
        if not isinstance(statement, (cst.FunctionDef, cst.ClassDef)):
            out.append(statement)
            continue
        node = next(found, None)
        if node is None or node.name != statement.name.value:
            return None
        if isinstance(statement, cst.ClassDef) and isinstance(node, ast.ClassDef):
            if isinstance(statement.body, cst.IndentedBlock) and any(
                id(n) in spans for n in node.body
            ):
                inner = _filled(statement.body.body, node.body, spans, text, starts, newline)
                if inner is None:
                    return None
                statement = statement.with_changes(body=statement.body.with_changes(body=inner))
                changed = True
        elif isinstance(statement, cst.FunctionDef) and id(node) in spans:
            span = spans[id(node)]
            block = statement.body
            if not (
                isinstance(block, cst.IndentedBlock)
                and len(block.body) == 1
                and isinstance(block.body[0], cst.SimpleStatementLine)
                and len(block.body[0].body) == 1
                and isinstance(block.body[0].body[0], cst.Pass)
            ):
                return None
            assert isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
            lines = text[starts[span.first - 1] : starts[span.last]]
            unread = Unread(lines, span.indent, newline, span.first, span.last, node)
            statement = statement.with_changes(
                body=UnparsedBlock.of(block, block.body[0].leading_lines, unread)
            )
            changed = True
        elif isinstance(statement, cst.ClassDef) != isinstance(node, ast.ClassDef):
            return None
        out.append(statement)
    if next(found, None) is not None:
        return None
    return out if changed else list(statements)
