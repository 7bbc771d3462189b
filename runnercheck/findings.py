"""A finding: one rule violated at one place. Every engine reports these."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str

    def as_text(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def as_json(self, name: str) -> dict[str, Any]:
        """The finding as JSON, with its rule's ``name``."""
        return {**asdict(self), "name": name}
