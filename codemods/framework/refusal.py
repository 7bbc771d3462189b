"""The exception a planner raises when it cannot prove a rewrite safe; the run reports
it as a :class:`~runnercheck.records.Refused`."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from runnercheck import catalog
from runnercheck.records import Refused

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
        if code not in catalog.CODES:  # an unknown code is a programming error
            raise KeyError(code)
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

    def record(
        self, kind: str, line: int, group: str = "", held_back: tuple[str, ...] = ()
    ) -> Refused:
        """This refusal as the run reports it, at ``line`` (resolved by the caller)."""
        return Refused(
            kind,
            self.code,
            self.path,
            line,
            self.message,
            group,
            self.shape,
            self.advice,
            held_back,
        )
