"""The exception a planner raises when it cannot prove a rewrite safe."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runnercheck import catalog

if TYPE_CHECKING:
    import libcst as cst


class Refusal(Exception):
    """A shape the planner does not recognise: the whole group is left alone.

    ``node`` (when given) locates the refusal; its line is resolved lazily from
    the module, so planning pays for positions only when it refuses."""

    def __init__(
        self,
        code: str,
        path: Path,
        message: str,
        node: cst.CSTNode | None = None,
        line: int = 0,
        shape: str = "",
        advice: str = "",
    ) -> None:
        catalog.get(code)  # unknown codes are a programming error
        super().__init__(message)
        self.code = code
        self.path = path
        self.message = message
        self.node = node
        self.line = line
        #: the shape the planner does not place (``"statements after the driver split"``)
        self.shape = shape
        #: what to change by hand
        self.advice = advice
