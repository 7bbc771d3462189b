"""A diagnostic: something a tool says about one place in the source.

Every report of runnercheck is one: a finding of ``check``, a contract error of the
mypy plugin that the gate reads back, a file that could not be read. An *error* breaks
something at run time (a field a non-driver rank reads but never receives, a key a
``**`` call rejects, a collective only some ranks run) and fails a run; a *warning* is
shown but does not fail it; a *note* is true to a rule's letter without a runtime
consequence, or sits in code that cannot run, and says why.

How one is shown (a text line, a JSON object, a SARIF result, a GitHub workflow
command) is :mod:`runnercheck.diagnostic_formats`."""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import total_ordering
from typing import Literal, NamedTuple

Severity = Literal["error", "warning", "note"]


class Site(NamedTuple):
    """Another place a diagnostic points to (where the other side of a pair is)."""

    path: str
    line: int
    message: str


@total_ordering
@dataclass(frozen=True)
class Diagnostic:
    path: str
    line: int
    #: 1-based; 0 when the tool that reports it does not know the column.
    column: int
    code: str
    message: str
    severity: Severity = "error"
    #: What to change, in words, when the tool knows it.
    fix: str | None = None
    related: tuple[Site, ...] = ()

    def _order(self) -> tuple[str, int, int, str, str, str, str, tuple[Site, ...]]:
        return (
            self.path,
            self.line,
            self.column,
            self.code,
            self.message,
            self.severity,
            self.fix or "",
            self.related,
        )

    def __lt__(self, other: object) -> bool:
        """By place, then code and message."""
        if not isinstance(other, Diagnostic):
            return NotImplemented
        return self._order() < other._order()

    @property
    def is_note(self) -> bool:
        return self.severity == "note"

    def as_note(self, why: str) -> Diagnostic:
        """This diagnostic as a note, its message ending with why it is one."""
        return replace(self, message=f"{self.message} (note: {why})", severity="note")
