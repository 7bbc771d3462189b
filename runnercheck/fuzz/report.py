"""Results of a fuzz run and how they are shown (text and JSON)."""

from __future__ import annotations

import shlex
from dataclasses import asdict, dataclass, field
from typing import Any

from runnercheck import catalog

#: Order in which problems are listed (the most fundamental first).
SEVERITY = ("RC306", "RC302", "RC305", "RC301", "RC303", "RC304")


@dataclass(frozen=True)
class Problem:
    code: str
    message: str
    field: str = ""
    ranks: tuple[int, ...] = ()

    @property
    def name(self) -> str:
        return catalog.get(self.code).name

    def text(self) -> str:
        ranks = ""
        if self.ranks:
            label = "rank" if len(self.ranks) == 1 else "ranks"
            ranks = f" [{label} {', '.join(str(r) for r in self.ranks)}]"
        where = f" field {self.field!r}:" if self.field else ""
        return f"{self.code} {self.name}{ranks}{where} {self.message}"


def merge(problems: list[Problem]) -> list[Problem]:
    """One problem per (code, field, message), with the ranks that showed it."""
    merged: dict[tuple[str, str, str], set[int]] = {}
    for p in problems:
        merged.setdefault((p.code, p.field, p.message), set()).update(p.ranks)
    result = [Problem(c, m, f, tuple(sorted(r))) for (c, f, m), r in merged.items()]
    return sorted(result, key=lambda p: SEVERITY.index(p.code) if p.code in SEVERITY else 99)


@dataclass
class Timings:
    generation: float = 0.0
    round_trip: float = 0.0
    broadcast: float = 0.0
    comparison: float = 0.0


@dataclass
class ClassResult:
    target: str
    seed: int
    examples: int = 0
    problems: list[Problem] = field(default_factory=list)
    #: The (shrunk) failing example, as text.
    example: str = ""
    shrunk: bool = False
    note: str = ""
    timings: Timings = field(default_factory=Timings)

    @property
    def passed(self) -> bool:
        return not self.problems

    @property
    def codes(self) -> list[str]:
        return [p.code for p in self.problems]


@dataclass
class RunReport:
    world_size: int
    device: str
    transport: str
    examples: int
    seed: int
    deadline: float
    results: list[ClassResult] = field(default_factory=list)
    not_generated: tuple[str, ...] = ()
    #: Options of the command that a replay needs too (``--stub-imports``, ...).
    replay_options: tuple[str, ...] = ()

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    def replay_command(self, result: ClassResult) -> str:
        args = ["runnercheck", "fuzz", result.target, "--seed", str(result.seed)]
        if self.world_size != 2:
            args += ["--world-size", str(self.world_size)]
        if self.device != "cpu":
            args += ["--device", self.device]
        args += ["--examples", str(self.examples), *self.replay_options]
        return shlex.join(args)

    def text(self) -> str:
        lines = [
            f"runnercheck fuzz: world size {self.world_size}, {self.device} over {self.transport}, "
            f"{self.examples} examples per class, seed {self.seed}, deadline {self.deadline:g} s"
        ]
        if self.not_generated:
            lines.append(
                f"  (tensor dtypes this transport cannot broadcast, generated only inside "
                f"lists: {', '.join(self.not_generated)})"
            )
        for result in self.results:
            if result.passed:
                lines.append(f"PASS {result.target}  ({result.examples} examples)")
                continue
            lines.append(f"FAIL {result.target}  (after {result.examples} examples)")
            for problem in result.problems:
                lines.append(f"  {problem.text()}")
            if result.example:
                label = "minimal example" if result.shrunk else "example (not shrunk)"
                lines.append(f"  {label}: {result.example}")
            if result.note:
                lines.extend(f"  {line}" for line in result.note.splitlines())
            lines.append(f"  replay: {self.replay_command(result)}")
        failed = sum(1 for r in self.results if not r.passed)
        total = len(self.results)
        lines.append(
            f"{failed} of {total} {'class' if total == 1 else 'classes'} failed"
            if failed
            else f"all {total} {'class' if total == 1 else 'classes'} passed"
        )
        return "\n".join(lines)

    def as_json(self) -> dict[str, Any]:
        return {
            "world_size": self.world_size,
            "device": self.device,
            "transport": self.transport,
            "examples": self.examples,
            "seed": self.seed,
            "deadline": self.deadline,
            "passed": self.passed,
            "results": [
                {
                    "target": r.target,
                    "passed": r.passed,
                    "seed": r.seed,
                    "examples": r.examples,
                    "problems": [
                        {
                            "code": p.code,
                            "name": p.name,
                            "field": p.field,
                            "ranks": list(p.ranks),
                            "message": p.message,
                        }
                        for p in r.problems
                    ],
                    "example": r.example,
                    "shrunk": r.shrunk,
                    "note": r.note,
                    "replay": self.replay_command(r),
                    "timings": asdict(r.timings),
                }
                for r in self.results
            ],
        }
