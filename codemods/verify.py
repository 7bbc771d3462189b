"""Before anything is written: the new sources must re-parse, ``compile()``, and
re-analyse with ``runnercheck check`` as already migrated (no RC106 paired
broadcast, and no finding the old sources did not have)."""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

from runnercheck.check import check_sources
from runnercheck.config import Config
from runnercheck.findings import Finding

_LINES = re.compile(r"(\.py):\d+")


def compiles(path: Path, source: bytes) -> str | None:
    """None when ``source`` compiles, else the error (one line)."""
    try:
        compile(source, str(path), "exec", dont_inherit=True)
    except SyntaxError as exc:
        return f"line {exc.lineno}: {exc.msg}"
    except (ValueError, RecursionError, MemoryError) as exc:
        return str(exc)
    return None


def _key(finding: Finding) -> tuple[str, str, str]:
    """A finding without its position (rewrites move lines)."""
    return (Path(finding.path).name, finding.code, _LINES.sub(r"\1", finding.message))


def findings(sources: Mapping[Path, bytes], config: Config) -> list[Finding]:
    return check_sources({str(p): s for p, s in sources.items()}, config).findings


def new_findings(
    old: Mapping[Path, bytes],
    new: Mapping[Path, bytes],
    config: Config,
    before: list[Finding] | None = None,
) -> list[Finding]:
    """Findings on ``new`` that ``old`` did not have, plus any RC106 still reported
    in a file that changed (``new`` entries that differ from ``old``)."""
    before = before if before is not None else findings(old, config)
    seen = {_key(f) for f in before}
    changed = {str(p) for p, s in new.items() if old.get(p) != s}
    return [
        f
        for f in findings(new, config)
        if _key(f) not in seen or (f.code == "RC106" and f.path in changed)
    ]
