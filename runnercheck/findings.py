"""A finding: one rule violated at one place. Every engine reports these."""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from runnercheck import catalog


@dataclass(frozen=True, order=True)
class Finding:
    path: str
    line: int
    col: int
    code: str
    message: str

    @property
    def rule(self) -> catalog.Rule:
        return catalog.get(self.code)

    def as_text(self) -> str:
        return f"{self.path}:{self.line}:{self.col}: {self.code} {self.message}"

    def as_json(self) -> dict[str, Any]:
        data = asdict(self)
        data["name"] = self.rule.name
        return data
