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
        return catalog.name_of(self.code)

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
    #: Why the class could not run (its module does not import, no example could be
    #: built, a strategy raised): one line, and no search.
    error: str = ""
    #: Wall time of the class's search, in seconds.
    seconds: float = 0.0

    @property
    def passed(self) -> bool:
        return not self.problems and not self.error

    @property
    def status(self) -> str:
        return "ERROR" if self.error else "FAIL" if self.problems else "PASS"

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
    #: A path was swept: the text ends with a table of every class.
    sweep: bool = False

    @property
    def passed(self) -> bool:
        return all(r.passed for r in self.results)

    @property
    def found(self) -> bool:
        """Some class showed a problem (RC301-RC306)."""
        return any(r.problems for r in self.results)

    @property
    def errors(self) -> list[ClassResult]:
        """The classes that could not run."""
        return [r for r in self.results if r.error]

    def rows(self) -> list[tuple[str, str, str, str]]:
        """The summary table: status, class, examples, what was found (or why not run)."""
        out = []
        for r in self.results:
            if r.error:
                detail = r.error
            elif r.problems:
                detail = "; ".join(sorted({f"{p.code} {p.field}".strip() for p in r.problems}))
            else:
                detail = ""
            out.append((r.status, r.target, str(r.examples) if not r.error else "-", detail))
        return out

    def summary(self) -> str:
        failed = sum(1 for r in self.results if r.problems)
        errors = len(self.errors)
        total = len(self.results)
        noun = "class" if total == 1 else "classes"
        if not failed and not errors:
            return f"all {total} {noun} passed"
        parts = []
        if failed:
            parts.append(f"{failed} of {total} {noun} failed")
        if errors:
            parts.append(
                f"{errors} {'class' if errors == 1 else 'classes'} could not run"
                if failed
                else f"{errors} of {total} {noun} could not run"
            )
        return ", ".join(parts)

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
            if result.error:
                lines.append(f"ERROR {result.target}: cannot run: {result.error}")
                continue
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
        if self.sweep:
            lines.extend(["", *plain_table(self.rows())])
        lines.append(self.summary())
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
            "summary": self.summary(),
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
                    "status": r.status,
                    "error": r.error,
                    "seconds": round(r.seconds, 3),
                }
                for r in self.results
            ],
        }


#: The summary table's columns.
COLUMNS = ("status", "class", "examples", "found")


def plain_table(rows: list[tuple[str, str, str, str]]) -> list[str]:
    """The summary table as aligned text lines (the last column left ragged)."""
    widths = [max(len(c), *(len(r[i]) for r in rows)) for i, c in enumerate(COLUMNS[:3])]
    out = []
    for row in [COLUMNS, *rows]:
        cells = [cell.ljust(widths[i]) for i, cell in enumerate(row[:3])]
        out.append("  ".join([*cells, row[3]]).rstrip())
    return out
