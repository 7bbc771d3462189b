"""Where a LibCST node stands in its module, to match the lines the analysis layer
reports (:mod:`runnercheck.analysis`) to the nodes the codemods rewrite."""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable

import libcst as cst
from libcst.metadata import MetadataWrapper, PositionProvider

from codemods import cstutil


class Lines:
    """The first line of every node of one module (resolved once, on first use)."""

    def __init__(self, module: cst.Module) -> None:
        self.module = module
        self._positions: dict[cst.CSTNode, object] | None = None

    def _resolve(self) -> dict[cst.CSTNode, object]:
        if self._positions is None:
            wrapper = MetadataWrapper(self.module, unsafe_skip_copy=True)
            self._positions = dict(wrapper.resolve(PositionProvider))
        return self._positions

    def line(self, node: cst.CSTNode) -> int:
        where = self._resolve().get(node)
        return where.start.line if where is not None else 0  # type: ignore[attr-defined]

    def name_at(self, root: cst.CSTNode, line: int, col: int) -> cst.Name | None:
        """The ``Name`` under ``root`` that starts at ``line``/``col`` (0-based)."""
        positions = self._resolve()
        for node in cstutil.find_all(root, lambda n: isinstance(n, cst.Name)):
            where = positions.get(node)
            if where is not None and (where.start.line, where.start.column) == (line, col):  # type: ignore[attr-defined]
                assert isinstance(node, cst.Name)
                return node
        return None

    def at(self, statements: list[cst.BaseStatement], line: int) -> cst.BaseStatement | None:
        """The statement of ``statements`` that starts on ``line``."""
        for statement in statements:
            if self.line(statement) == line:
                return statement
        return None


def line_map(old: str, new: str) -> Callable[[int], int]:
    """Old line number -> the line that holds it in ``new`` (1-based): the same line
    where it was kept; in a rewritten stretch, the line with the same text (in the
    stretch, else the only one in the file: code moves between classes), else the
    line that starts the same way (``class X``, ``def f``, ``self.f``), else the
    stretch's first line."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(None, old_lines, new_lines, autojunk=False)
    ops = matcher.get_opcodes()

    def head(text: str) -> str:
        return re.split(r"[(:=\[]", text.strip(), maxsplit=1)[0].strip()

    stripped = [line.strip() for line in new_lines]
    heads = [head(line) for line in new_lines]

    def find(values: list[str], wanted: str, stretch: range) -> int | None:
        if not wanted:
            return None
        for j in stretch:
            if values[j] == wanted:
                return j + 1
        found = [j for j, v in enumerate(values) if v == wanted]
        return found[0] + 1 if len(found) == 1 else None

    def to_new(line: int) -> int:
        i = line - 1
        for tag, i1, i2, j1, j2 in ops:
            if not i1 <= i < i2:
                continue
            if tag == "equal":
                return j1 + (i - i1) + 1
            text = old_lines[i].strip()
            stretch = range(j1, j2)
            return (
                find(stripped, text, stretch)
                or find(heads, head(text), stretch)
                or min(j1, max(len(new_lines) - 1, 0)) + 1
            )
        return line

    return to_new
