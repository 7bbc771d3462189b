"""Where a LibCST node stands in its module, to match the lines the analysis layer
reports (:mod:`runnercheck.analysis`) to the nodes the codemods rewrite.

:func:`measure` prints a module once and records, for every node, where it starts
(line and column, as LibCST's ``PositionProvider`` gives them: after the whitespace
and comments it owns) and how many line breaks its own code holds (what
``module.code_for_node(node).count("\\n")`` gives). That one print is all the
position work a module needs: LibCST's metadata resolution prints it too, but also
walks the whole tree first and builds a range object per node."""

from __future__ import annotations

import bisect
import difflib
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods.toolkit import cstutil
from codemods.toolkit.kept_text import Kept


@dataclass
class Measured:
    """One print of a module: its code, and per node (by ``id``) its start and the
    line breaks of its own code. The module is held, so the ids stay its nodes'."""

    module: cst.Module
    code: str
    starts: dict[int, tuple[int, int]]
    sizes: dict[int, int]
    #: the statements written as the text they were read from (nothing under them is
    #: sized; their lines are the lines read)
    written: frozenset[int] = frozenset()

    def size(self, node: cst.CSTNode) -> int:
        """``module.code_for_node(node).count("\\n")``."""
        found = self.sizes.get(id(node))
        return found if found is not None else cstutil.node_code(self.module, node).count("\n")


def measure(module: cst.Module) -> Measured:
    """Print ``module`` once, measuring every node (see the module's docstring). With
    a LibCST whose internal code generation this cannot follow, the starts come from
    its public ``PositionProvider`` and the sizes from ``code_for_node`` (slower, the
    same answers)."""
    try:
        from codemods.toolkit.codegen_positions import print_measured

        code, starts, sizes = print_measured(module)
    except (ImportError, AttributeError, TypeError):
        return _measure_with_metadata(module)
    cstutil.remember_code(module, code)
    return Measured(module, code, starts, sizes)


def measure_sizes(module: cst.Module, kept: Kept | None = None) -> Measured:
    """Print ``module`` once, sizing its lines, statements and blocks only (what the
    layout pass asks for; cheaper than :func:`measure`): no starts, and any other
    node is sized by ``code_for_node``. ``kept``: the text of the statements of the
    module it was made from (those it still holds are written, not printed)."""
    try:
        from codemods.toolkit.codegen_positions import print_sized

        code, sizes, written = print_sized(module, kept)
    except (ImportError, AttributeError, TypeError):
        return Measured(module, cstutil.module_code(module), {}, {})
    cstutil.remember_code(module, code)
    return Measured(module, code, {}, sizes, frozenset(written))


def _measure_with_metadata(module: cst.Module) -> Measured:
    wrapper = MetadataWrapper(module, unsafe_skip_copy=True)
    positions = wrapper.resolve(PositionProvider)
    starts = {id(node): (r.start.line, r.start.column) for node, r in positions.items()}
    return Measured(module, module.code, starts, {})


class Lines:
    """The first line of every node of one module (measured once, on first use).

    ``kept`` gives, when asked, the kept text of the module (:mod:`codemods.toolkit.kept_text`),
    which says on what line each statement of its blocks starts: a node under a
    statement is then counted in a print of that statement alone."""

    def __init__(self, module: cst.Module, kept: Callable[[], Kept | None] | None = None) -> None:
        self.module = module
        self._measured: Measured | None = None
        self._scopes: dict[int, dict[int, tuple[int, int]] | None] = {}
        self._kept = kept

    def _starts(self) -> dict[int, tuple[int, int]]:
        if self._measured is None:
            self._measured = measure(self.module)
        return self._measured.starts

    def line(self, node: cst.CSTNode) -> int:
        where = self._starts().get(id(node))
        return where[0] if where is not None else 0

    def line_in(self, scope: cst.CSTNode, scope_line: int, node: cst.CSTNode) -> int:
        """``line(node)`` for a node under ``scope``, a statement whose syntax starts on
        ``scope_line`` (as ``ast`` gives it: the line of ``def`` or ``class``): only
        ``scope`` is printed, unless the whole module was measured already; with kept
        text, only the innermost statement of its blocks that holds ``node``."""
        if self._measured is None:
            if node is scope and isinstance(scope, (cst.FunctionDef, cst.ClassDef)):
                return scope_line  # (its own start: what a print of it counts from)
            found = self._in_statement(scope, node)
            if found is not None:
                return found
            starts = self._printed(scope)
            if starts is not None:
                here, top = starts.get(id(node)), starts.get(id(scope))
                if here is not None and top is not None:
                    return scope_line + here[0] - top[0]
        return self.line(node)

    def _printed(self, node: cst.CSTNode) -> dict[int, tuple[int, int]] | None:
        """The starts of the nodes under ``node`` in a print of ``node`` alone (once)."""
        if id(node) not in self._scopes:
            self._scopes[id(node)] = _starts_within(node, self.module)
        return self._scopes[id(node)]

    def _in_statement(self, scope: cst.CSTNode, node: cst.CSTNode) -> int | None:
        """``line(node)`` counted in a print of the innermost statement of ``scope``'s
        blocks that holds ``node``, from the line its kept text starts on; None without
        kept text, or for a node of ``scope``'s own header."""
        kept = self._kept() if self._kept is not None else None
        if kept is None or kept.module is not self.module or not cstutil.within(scope, node):
            return None
        holder: cst.CSTNode | None = None
        statements = _block_statements(scope)
        while statements:  # (``scope`` is indexed: each ``within`` is a look-up)
            inner = next(
                (s for s in statements if id(s) in kept.lines and cstutil.within(s, node)), None
            )
            if inner is None:
                break
            holder = inner
            statements = _block_statements(inner)
        if holder is None:
            return None
        starts = self._printed(holder)
        here = starts.get(id(node)) if starts is not None else None
        if here is None:
            return None
        return kept.lines[id(holder)] + here[0] - 1

    def name_at(self, root: cst.CSTNode, line: int, col: int) -> cst.Name | None:
        """The ``Name`` under ``root`` that starts at ``line``/``col`` (0-based)."""
        starts = self._starts()
        for node in cstutil.find_all(root, cst.Name):
            if starts.get(id(node)) == (line, col):
                assert isinstance(node, cst.Name)
                return node
        return None

    def at(self, statements: list[cst.BaseStatement], line: int) -> cst.BaseStatement | None:
        """The statement of ``statements`` that starts on ``line``."""
        for statement in statements:
            if self.line(statement) == line:
                return statement
        return None


def _block_statements(node: cst.CSTNode) -> list[cst.BaseStatement]:
    """The statements of the indented blocks of a compound statement (``elif`` and
    ``else`` blocks, handlers and ``finally`` included); none for any other node."""
    body = getattr(node, "body", None)
    if not isinstance(node, cst.BaseCompoundStatement) or not isinstance(body, cst.BaseSuite):
        return []  # (a ``match`` has no block of its own)
    suites: list[cst.BaseSuite] = [body]
    orelse = getattr(node, "orelse", None)
    while isinstance(orelse, (cst.If, cst.Else)):
        suites.append(orelse.body)
        orelse = orelse.orelse if isinstance(orelse, cst.If) else None
    suites.extend(handler.body for handler in getattr(node, "handlers", ()))
    final = getattr(node, "finalbody", None)
    if isinstance(final, cst.Finally):
        suites.append(final.body)
    return [s for suite in suites if isinstance(suite, cst.IndentedBlock) for s in suite.body]


def _starts_within(scope: cst.CSTNode, module: cst.Module) -> dict[int, tuple[int, int]] | None:
    """The starts of the nodes under ``scope`` in a print of ``scope`` alone; None with a
    LibCST whose internal code generation :mod:`codemods.toolkit.codegen_positions` cannot follow."""
    try:
        from codemods.toolkit.codegen_positions import starts_within

        return starts_within(scope, module)
    except (ImportError, AttributeError, TypeError):
        return None


#: What ends the head of a line (``class X``, ``def f``, ``self.f``) in :func:`line_map`.
_HEAD_END = re.compile(r"[(:=\[]")


def line_map(old: str, new: str) -> Callable[[int], int]:
    """Old line number -> the line that holds it in ``new`` (1-based): the same line
    where it was kept; in a rewritten stretch, the line with the same text (in the
    stretch, else the only one in the file: code moves between classes), else the
    line that starts the same way (``class X``, ``def f``, ``self.f``), else the
    stretch's first line. The texts are compared on the first line asked for."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    ops: list[tuple[str, int, int, int, int]] = []
    texts: dict[bool, list[str]] = {}  # the new lines stripped (True) or their heads
    compared = False

    def head(text: str) -> str:
        return _HEAD_END.split(text.strip(), maxsplit=1)[0].strip()

    def compare() -> None:
        nonlocal compared
        compared = True
        matcher = LongMatches(None, old_lines, new_lines, autojunk=False)
        ops.extend(matcher.get_opcodes())

    def lines(stripped: bool) -> list[str]:
        """The new lines stripped, or their heads (each made on first use)."""
        found = texts.get(stripped)
        if found is None:
            made = (line.strip() if stripped else head(line) for line in new_lines)
            found = texts[stripped] = list(made)
        return found

    def find(values: list[str], wanted: str, stretch: range) -> int | None:
        if not wanted:
            return None
        for j in stretch:
            if values[j] == wanted:
                return j + 1
        found = [j for j, v in enumerate(values) if v == wanted]
        return found[0] + 1 if len(found) == 1 else None

    def to_new(line: int) -> int:
        if not compared:
            compare()
        i = line - 1
        for tag, i1, i2, j1, j2 in ops:
            if not i1 <= i < i2:
                continue
            if tag == "equal":
                return j1 + (i - i1) + 1
            text = old_lines[i].strip()
            stretch = range(j1, j2)
            return (
                find(lines(True), text, stretch)
                or find(lines(False), head(text), stretch)
                or min(j1, max(len(new_lines) - 1, 0)) + 1
            )
        return line

    return to_new


#: Every this many elements of ``a``, :class:`LongMatches` looks for the matches through it.
_SAMPLE = 32


class LongMatches(difflib.SequenceMatcher[str]):
    """:class:`difflib.SequenceMatcher` with no junk (``isjunk=None``,
    ``autojunk=False``), whose answers are difflib's own, found faster where the
    sequences share long stretches (a rewrite that keeps most lines).

    Without junk, ``find_longest_match`` answers the longest block of equal elements in
    its ranges, the one that starts first in ``a`` among those, then first in ``b``.
    Every block of at least ``_SAMPLE`` elements covers an element of ``a`` whose
    offset from ``alo`` is a multiple of ``_SAMPLE``, so extending the matches through
    those elements alone finds every such block (each as a whole: a longest block
    cannot be extended). When the longest block found is that long, it is the answer
    (ties broken as difflib breaks them); else difflib's own search answers."""

    # (set by difflib: the sequences, and each element of ``b`` -> where it stands, ascending)
    a: Sequence[str]
    b: Sequence[str]
    b2j: dict[str, list[int]]

    def __init__(self, isjunk: None, a: Sequence[str], b: Sequence[str], autojunk: bool) -> None:
        if isjunk is not None or autojunk:
            raise ValueError("LongMatches takes no junk")
        super().__init__(None, a, b, autojunk=False)

    def find_longest_match(
        self, alo: int = 0, ahi: int | None = None, blo: int = 0, bhi: int | None = None
    ) -> difflib.Match:
        ahi = len(self.a) if ahi is None else ahi
        bhi = len(self.b) if bhi is None else bhi
        size, i, j = self._longest(alo, ahi, blo, bhi, _SAMPLE)
        if size < _SAMPLE:  # every block as long as the one found covers an element read
            size, i, j = self._longest(alo, ahi, blo, bhi, max(size, 1))
        return difflib.Match(i, j, size)

    def _longest(self, alo: int, ahi: int, blo: int, bhi: int, step: int) -> tuple[int, int, int]:
        """The longest block through the elements ``alo``, ``alo + step``, ... of ``a``
        (the first in ``a``, then in ``b``, of the longest): its size and start."""
        a, b, b2j = self.a, self.b, self.b2j
        size, besti, bestj = 0, alo, blo
        ends: dict[int, int] = {}  # per diagonal ``j - i``: where the last block found ends
        for i in range(alo, ahi, step):
            found = b2j.get(a[i], ())
            for k in range(bisect.bisect_left(found, blo), len(found)):
                j = found[k]
                if j >= bhi:
                    break
                diagonal = j - i
                if ends.get(diagonal, alo) > i:
                    continue  # on a block found from an earlier element
                start = i
                while (
                    start > alo
                    and start + diagonal > blo
                    and a[start - 1] == b[start - 1 + diagonal]
                ):
                    start -= 1
                end = i + 1
                while end < ahi and end + diagonal < bhi and a[end] == b[end + diagonal]:
                    end += 1
                ends[diagonal] = end
                if end - start > size or (
                    end - start == size and (start, start + diagonal) < (besti, bestj)
                ):
                    size, besti, bestj = end - start, start, start + diagonal
        return size, besti, bestj
