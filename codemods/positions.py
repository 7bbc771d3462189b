"""Where a LibCST node stands in its module, to match the lines the analysis layer
reports (:mod:`runnercheck.analysis`) to the nodes the codemods rewrite."""

from __future__ import annotations

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
