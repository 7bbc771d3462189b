"""Running ``check``: read the facts of the given paths (the workspace,
:mod:`runnercheck.workspace`), run the rules (:mod:`runnercheck.rules`), honour
suppressions, select/ignore and ``per_file_ignores``, and add what the walk and
``migrate``'s journal have to say.

The workspace's prefilter works on raw bytes: a file is parsed only if it mentions one
of the contract's names (broadcast function, contract methods, base classes), or if it
defines a class whose base is a class of a parsed file that can take part in the
contract (a subclass that adds fields, for instance; see
:func:`runnercheck.analysis.prefilter.extensible_classes`). A skipped file cannot contain
a finding; it is not parsed, so a syntax error in it is not reported either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from runnercheck.analysis.extract import extract_source
from runnercheck.check.discovery import walk_findings
from runnercheck.config import Config
from runnercheck.findings import Finding
from runnercheck.ignores import PerFileIgnores
from runnercheck.rules.outcomes import CheckResult, check_outcomes, parse_codes, selected
from runnercheck.workspace.facts import read_facts
from runnercheck.workspace.reading import FileOutcome, SourceFile
from runnercheck.writes.reader import reading

__all__ = ["CheckResult", "check_paths", "check_sources"]


def check_paths(
    paths: Sequence[str | Path],
    config: Config | None = None,
    jobs: int = 1,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
    exclude: Iterable[str] = (),
    root: Path | None = None,
    context: Iterable[str] = (),
    cache_root: Path | None = None,
    buffer: SourceFile | None = None,
) -> CheckResult:
    """``runnercheck check PATH...`` as a function (no output); reads under the shared
    tree lock (a ``migrate`` writing the tree is waited for). ``context``: directories
    of packages the checked files import (besides ``context`` in the config, relative to
    ``root``), read before the installed packages. ``buffer``: a file checked with the
    contents it carries instead of those on disk (``--stdin-filename``); its neighbours
    are read from disk.

    With ``cache_root``, facts are read from and written to the facts cache under it
    (:mod:`runnercheck.workspace.cache`)."""
    held = [*paths, buffer.path.parent] if buffer is not None else paths
    with reading(held):
        return _check_paths(
            paths, config, jobs, select, ignore, exclude, root, context, cache_root, buffer
        )


def _check_paths(
    paths: Sequence[str | Path],
    config: Config | None,
    jobs: int,
    select: Iterable[str],
    ignore: Iterable[str],
    exclude: Iterable[str],
    root: Path | None,
    context: Iterable[str],
    cache_root: Path | None,
    buffer: SourceFile | None = None,
) -> CheckResult:
    config = config or Config()
    contract = config.contract()
    select_codes = parse_codes(select, "--select") or parse_codes(config.select, "select")
    ignore_codes = parse_codes(ignore, "--ignore") | parse_codes(config.ignore, "ignore")
    facts = read_facts(paths, config, jobs, exclude, root, context, cache_root, buffer)
    sources, walked = facts.sources, facts.walked
    result = check_outcomes(
        facts.outcomes, contract, select_codes, ignore_codes, facts.context, facts.unread
    )
    found, result.walk_notes = walk_findings(walked, paths, result.findings)
    if facts.cache_unused:
        result.walk_notes.append(facts.cache_unused)
    found = [f for f in found if selected(f.code, select_codes, ignore_codes)]
    if config.per_file_ignores:
        per_file = PerFileIgnores(config.per_file_ignores, root)
        kept: list[Finding] = []
        hidden: set[Finding] = set()
        for finding in found:
            if per_file.hides(finding.code, finding.path):
                hidden.add(finding)
            else:
                kept.append(finding)
        result.suppressed += sum(1 for f in hidden if not f.is_note)
        found = kept
        result.notes = [n for n in result.notes if not per_file.hides(n.code, n.path)]
        if all(os.path.isdir(path) for path in paths):  # (files alone: a pre-commit run)
            seen = (source.display for source in sources)
            result.walk_notes += per_file.unmatched("[tool.runnercheck]", seen)
    result.findings = sorted(set(found))
    return result


def check_sources(
    sources: dict[str, str | bytes],
    config: Config | None = None,
    select: Iterable[str] = (),
    ignore: Iterable[str] = (),
) -> CheckResult:
    """Check in-memory sources (path -> text): every file is analysed, none is skipped.

    The codemods use this to verify that rewritten code re-analyses cleanly."""
    config = config or Config()
    contract = config.contract()
    outcomes = []
    for path, text in sources.items():
        try:
            outcomes.append(FileOutcome(path, facts=extract_source(text, path, contract)))
        except Exception as exc:
            outcomes.append(FileOutcome(path, error=f"internal error: {type(exc).__name__}: {exc}"))
    select_codes = parse_codes(select, "select") or parse_codes(config.select, "select")
    ignore_codes = parse_codes(ignore, "ignore") | parse_codes(config.ignore, "ignore")
    return check_outcomes(outcomes, contract, select_codes, ignore_codes)
