"""The text of each statement of a parsed module, read from the source it was parsed
from, so that a rewritten module that keeps a statement as it was (the same node) can
write that text again instead of printing the statement.

A statement's text is whole lines: the comments and blank lines LibCST gives it
(``leading_lines``), its own lines, and, for a compound statement, the lines its
blocks end with (``footer``). Where each statement's syntax starts and ends comes from
the ``ast`` of the same source (statements start on the line of their first token, a
decorated definition on its first decorator's). The lines found are checked against
each other: in every block, each statement must start on the line after the one its
previous statement ends on, and the module's statements must fill the module from its
header to its footer. A module where any of this does not hold gets no text (it is
printed, as before).

A statement's text is what printing it gives only inside blocks indented as where it
was read, with the module's indentation and line ending: :class:`Kept` holds the
indents of the blocks around each statement, and the printer
(:func:`codemods.toolkit.codegen_positions.print_sized`) writes the text only where they are
the same.
"""

from __future__ import annotations

import ast
import re
from collections.abc import Sequence
from dataclasses import dataclass, field

import libcst as cst

from codemods.toolkit.unparsed import UnparsedBlock

_NEWLINE = re.compile(r"\r\n?|\n")


@dataclass(frozen=True)
class Kept:
    """Per statement of ``module`` (by ``id``; the module is held, so the ids stay its
    statements'), its text and the indents of the blocks around it, and the line its
    text starts on (1-based: its first leading line, else its own first line)."""

    module: cst.Module
    texts: dict[int, tuple[str, tuple[str, ...]]]
    lines: dict[int, int] = field(default_factory=dict)

    def matches(self, module: cst.Module) -> bool:
        """Whether ``module`` prints a kept statement as ``self.module`` did: the same
        indentation and line ending, and a line break at its end."""
        return (
            module.default_indent == self.module.default_indent
            and module.default_newline == self.module.default_newline
            and module.has_trailing_newline
        )


class _Mismatch(Exception):
    """The ``ast`` and the LibCST module do not line up as expected."""


def kept_text(module: cst.Module, tree: ast.Module, text: str) -> Kept | None:
    """The text of every statement of ``module`` that lies in blocks (at any depth),
    read from ``text``, which ``module`` and ``tree`` were both parsed from; None when
    the lines do not line up (see the module's docstring)."""
    if not module.has_trailing_newline:
        return None
    starts = [0]  # the offset of each line (1-based: line n starts at starts[n - 1])
    starts.extend(found.end() for found in _NEWLINE.finditer(text))
    if starts[-1] != len(text):
        return None  # the last line has no line break
    reader = _Reader(module, text, starts)
    try:
        first, last = reader.block(module.body, tree.body, (), len(module.header))
        lines = len(starts) - 1
        if module.body and (first != len(module.header) + 1 or last + len(module.footer) != lines):
            raise _Mismatch
    except (_Mismatch, IndexError):
        return None
    return Kept(module, reader.texts, reader.lines)


class _Reader:
    def __init__(self, module: cst.Module, text: str, starts: list[int]) -> None:
        self.default_indent = module.default_indent
        self.text = text
        self.starts = starts
        self.texts: dict[int, tuple[str, tuple[str, ...]]] = {}
        self.lines: dict[int, int] = {}

    def block(
        self,
        statements: Sequence[cst.BaseStatement],
        nodes: list[ast.stmt],
        indents: tuple[str, ...],
        above: int,
    ) -> tuple[int, int]:
        """Read a block's statements (``nodes``: their ``ast``), which start below line
        ``above``; the block's first and last line."""
        at = 0
        first = last = 0
        for statement in statements:
            if isinstance(statement, cst.SimpleStatementLine):
                count = len(statement.body)
                if count == 0 or at + count > len(nodes):
                    raise _Mismatch
                head = nodes[at].lineno
                end = _end_line(nodes[at + count - 1])
                at += count
            elif isinstance(statement, cst.BaseCompoundStatement):
                node = nodes[at]
                at += 1
                head = self._head(statement, node)
                end = self._compound(statement, node, indents, head)
            else:
                raise _Mismatch
            start = head - len(statement.leading_lines)
            if last and start != last + 1:
                raise _Mismatch  # the statements of a block follow one another
            if start <= above or end < head:
                raise _Mismatch
            first = first or start
            last = end
            text = self.text[self.starts[start - 1] : self.starts[end]]
            self.texts[id(statement)] = (text, indents)
            self.lines[id(statement)] = start
        if at != len(nodes):
            raise _Mismatch
        return first, last

    def _head(self, statement: cst.BaseStatement, node: ast.stmt) -> int:
        """The line a compound statement's first token is on."""
        decorators = getattr(statement, "decorators", ())
        if not decorators:
            return node.lineno
        listed = getattr(node, "decorator_list", [])
        if len(listed) != len(decorators):
            raise _Mismatch
        line = min(d.lineno for d in listed)
        if not self.text[self.starts[line - 1] : self.starts[line]].lstrip().startswith("@"):
            raise _Mismatch  # a decorator whose expression starts below its ``@``
        return line

    def _compound(
        self, statement: cst.BaseStatement, node: ast.stmt, indents: tuple[str, ...], head: int
    ) -> int:
        """Read the blocks of a compound statement whose first token is on line
        ``head``; its last line."""
        blocks = _blocks(statement, node)
        if blocks is None:
            raise _Mismatch
        end = _end_line(node)
        for suite, nodes in blocks:  # the last one decides
            if isinstance(suite, UnparsedBlock):  # its lines as read, not entered
                end = suite.unread.last + len(suite.footer)
            elif isinstance(suite, cst.IndentedBlock):
                inner = (
                    *indents,
                    self.default_indent if suite.indent is None else suite.indent,
                )
                _, last = self.block(suite.body, nodes, inner, head)
                end = last + len(suite.footer)
            else:  # a suite on the header's line
                end = _end_line(node)
        return end


def _end_line(node: ast.stmt) -> int:
    end = node.end_lineno
    if end is None:
        raise _Mismatch
    return end


_Blocks = list[tuple[cst.BaseSuite, list[ast.stmt]]]


def _blocks(statement: cst.BaseStatement, node: ast.stmt) -> _Blocks | None:
    """The suites of a compound statement, in order, each with the ``ast`` statements
    of its body; None for a kind read here as a whole only, or a mismatch."""
    if isinstance(statement, cst.FunctionDef):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return [(statement.body, node.body)]
        return None
    if isinstance(statement, cst.ClassDef):
        return [(statement.body, node.body)] if isinstance(node, ast.ClassDef) else None
    if isinstance(statement, cst.If):
        return _if_blocks(statement, node)
    if isinstance(statement, (cst.For, cst.While)):
        if not isinstance(node, (ast.For, ast.AsyncFor, ast.While)):
            return None
        if isinstance(statement, cst.While) != isinstance(node, ast.While):
            return None
        found: _Blocks = [(statement.body, node.body)]
        if statement.orelse is not None:
            found.append((statement.orelse.body, node.orelse))
        return found
    if isinstance(statement, cst.With):
        if isinstance(node, (ast.With, ast.AsyncWith)):
            return [(statement.body, node.body)]
        return None
    if isinstance(statement, cst.Try) and isinstance(node, ast.Try):
        if len(statement.handlers) != len(node.handlers):
            return None
        found = [(statement.body, node.body)]
        found += [(h.body, a.body) for h, a in zip(statement.handlers, node.handlers, strict=True)]
        if statement.orelse is not None:
            found.append((statement.orelse.body, node.orelse))
        if statement.finalbody is not None:
            found.append((statement.finalbody.body, node.finalbody))
        return found
    return None


def _if_blocks(statement: cst.If, node: ast.stmt) -> _Blocks | None:
    if not isinstance(node, ast.If):
        return None
    found: _Blocks = [(statement.body, node.body)]
    orelse = statement.orelse
    if isinstance(orelse, cst.If):  # ``elif``: the ``ast`` holds it as the only else
        if len(node.orelse) != 1:
            return None
        rest = _if_blocks(orelse, node.orelse[0])
        return None if rest is None else found + rest
    if orelse is not None:
        found.append((orelse.body, node.orelse))
    return found
