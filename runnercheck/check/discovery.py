"""What the walk and ``migrate``'s journal have to say to ``check``.

The files come from :func:`runnercheck.workspace.reading.discover` (over
:func:`runnercheck.files.walk`, the walker ``migrate`` uses too). What the walk could
not read becomes a finding when it may hide source (RC001: an unreadable directory or
file, a file over ``max_file_size``, an argument that is not a regular file) and a note otherwise (a FIFO, socket or device met while walking, a
symbolic link that loops or dangles). A group that an interrupted ``migrate`` left
half-applied is RC003, at the first of its files that was written.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from runnercheck.files import Walk
from runnercheck.findings import Finding
from runnercheck.writes.reader import pending


def _shown(path: Path) -> str:
    relative = os.path.relpath(path)
    return str(path) if relative.startswith("..") else relative


def walk_findings(
    walked: Walk, paths: Sequence[str | Path], found: Sequence[Finding] = ()
) -> tuple[list[Finding], list[str]]:
    """(``found`` with the RC001 and RC003 findings of the walk and the journals, notes).

    A group a journal reports as half-applied is one finding: the analysis's own RC003
    findings in its files (a worker and runner at two stages) are left out."""
    findings: list[Finding] = []
    notes: list[str] = []
    for problem in walked.problems:
        if problem.hides_source:
            findings.append(problem.diagnostic("RC001"))
        else:
            notes.append(f"{problem.display}: note: {problem.message}")
    covered: set[str] = set()
    for item in pending(paths, walked.journals):
        if item.half_applied:
            findings.append(Finding(_shown(item.path), 1, 1, "RC003", item.message))
            covered.update(os.path.abspath(path) for path in item.files)
        else:
            notes.append(f"{_shown(item.path)}: note: {item.message}")
    kept = [f for f in found if f.code != "RC003" or os.path.abspath(f.path) not in covered]
    return kept + findings, notes
