"""A finding: one rule violated at one place. Every engine reports these.

An *error* breaks something at run time (a field a non-driver rank reads but never
receives, a key a ``**`` call rejects, a collective only some ranks run); a *note* is
true to a rule's letter without a runtime consequence, or sits in code that cannot
run, and says why. Only errors fail a run by default."""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from typing import Any, Literal

Severity = Literal["error", "note"]


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str
    severity: Severity = "error"

    @property
    def is_note(self) -> bool:
        return self.severity == "note"

    def as_note(self, why: str) -> Finding:
        """This finding as a note, its message ending with why it is one."""
        return replace(self, message=f"{self.message} (note: {why})", severity="note")

    def as_text(self) -> str:
        label = " note:" if self.is_note else ""
        return f"{self.path}:{self.line}:{self.col}:{label} {self.code} {self.message}"

    def as_json(self, name: str) -> dict[str, Any]:
        """The finding as JSON, with its rule's ``name``."""
        return {**asdict(self), "name": name}
