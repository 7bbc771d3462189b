"""Running ``check``: find the files, skip the ones that cannot matter, read facts (in
parallel with ``jobs > 1``), run the rules, honour suppressions and select/ignore.

The prefilter works on raw bytes: a file is parsed only if it mentions one of the
contract's names (broadcast function, contract methods, base classes), or if it defines
a class whose base is a class of a parsed file that can take part in the contract (a
subclass that adds fields, for instance; see
:func:`runnercheck.analysis.prefilter.extensible_classes`). A skipped file cannot contain
a finding; it is not parsed, so a syntax error in it is not reported either.
"""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from runnercheck import catalog, deep
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.prefilter import (
    class_bases,
    extensible_classes,
    might_matter,
    needles,
    subclass_rounds,
)
from runnercheck.analysis.project import Project
from runnercheck.check.discovery import SourceFile, discover_walk, walk_findings
from runnercheck.check.partners import ModuleFinder, context_roots, read_partners, unread_packages
from runnercheck.check.rules import RULES, UNREAD, run_rules
from runnercheck.config import Config, unknown_rule
from runnercheck.contract import Contract
from runnercheck.errors import UsageError
from runnercheck.files import (
    DEFAULT_MAX_FILE_SIZE,
    MAX_ANALYSED_SIZE,
    ReadError,
    read_source,
    too_large_to_analyse,
)
from runnercheck.findings import Finding
from runnercheck.ignores import PerFileIgnores
from runnercheck.jobs import worker_count
from runnercheck.writes.treelock import reading

if TYPE_CHECKING:  # the cache's own imports cost start-up time under --no-cache
    from runnercheck.check.cache import FactsCache


@dataclass
class CheckResult:
    #: Errors: what fails the run.
    findings: list[Finding] = field(default_factory=list)
    #: Notes: true to a rule's letter, without a runtime consequence (``--show-notes``).
    notes: list[Finding] = field(default_factory=list)
    #: Python files found under the given paths (after excludes).
    files_seen: int = 0
    #: Files parsed and analysed (the others were skipped by the prefilter).
    files_parsed: int = 0
    files_skipped: int = 0
    #: Findings hidden by ``# runnercheck: ignore`` comments.
    suppressed: int = 0
    #: Findings a baseline accepts (``--baseline``).
    baselined: int = 0
    #: Files that could not be analysed (syntax errors, unreadable, internal errors).
    files_failed: int = 0
    #: Files outside the given paths read for context (modules the checked files import).
    partner_files: int = 0
    #: Things skipped that cannot hide a finding (a FIFO, a looping link), one line each.
    walk_notes: list[str] = field(default_factory=list)
    #: Packages the checked code builds on that were not read, one line each: what
    #: rests on them is a note, and how to provide them.
    unread: list[str] = field(default_factory=list)

    @property
    def exit_code(self) -> int:
        """1 when an error is reported (syntax and internal errors are errors too); notes
        alone exit 0."""
        return 1 if self.findings else 0

    def summary(self) -> dict[str, int]:
        return {
            "findings": len(self.findings),
            "notes": len(self.notes),
            "files_seen": self.files_seen,
            "files_parsed": self.files_parsed,
            "files_skipped": self.files_skipped,
            "files_failed": self.files_failed,
            "suppressed": self.suppressed,
            "baselined": self.baselined,
            "partner_files": self.partner_files,
        }


# --------------------------------------------------------------- discovery


# ----------------------------------------------------------------- analysis


@dataclass
class FileOutcome:
    display: str
    facts: ModuleFacts | None = None
    #: The file on disk (None for in-memory sources).
    path: Path | None = None
    #: Base names of a file the prefilter skipped (for the second round).
    skipped_bases: frozenset[str] | None = None
    error: str | None = None
    #: RC001 for a file that cannot be read, RC002 for an internal error.
    error_code: str = "RC002"


def analyse_file(
    source: SourceFile,
    contract: Contract,
    force: bool = False,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    cache: FactsCache | None = None,
) -> FileOutcome:
    """Read one file and extract its facts (or take them from ``cache``), or say why it
    was skipped or failed."""
    try:
        data = source.data if source.data is not None else read_source(source.path, limit)
    except ReadError as exc:
        return FileOutcome(source.display, error=str(exc), error_code="RC001")
    try:
        if not force and not might_matter(data, needles(contract)):
            return FileOutcome(source.display, skipped_bases=class_bases(data))
        if len(data) > MAX_ANALYSED_SIZE:
            return FileOutcome(
                source.display, error=too_large_to_analyse(len(data)), error_code="RC001"
            )
        if cache is not None:
            facts = cache.facts(data, source.display, contract)
        else:
            facts = extract_source(data, source.display, contract)
        return FileOutcome(source.display, facts=facts, path=source.path)
    except Exception as exc:  # an internal error is reported for this file only
        return FileOutcome(source.display, error=f"internal error: {deep.describe(exc)}")


def _analyse_chunk(
    chunk: list[SourceFile],
    contract: Contract,
    force: bool,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    cache: FactsCache | None = None,
) -> list[FileOutcome]:
    """A chunk of files, in a thread that can walk deeply nested code (runnercheck.deep)."""
    return deep.call(lambda: [analyse_file(s, contract, force, limit, cache) for s in chunk])


def _analyse_all(
    sources: list[SourceFile],
    contract: Contract,
    jobs: int,
    force: bool = False,
    limit: int = DEFAULT_MAX_FILE_SIZE,
    cache: FactsCache | None = None,
) -> list[FileOutcome]:
    workers = worker_count(jobs, len(sources) // 4)
    if workers <= 1 or len(sources) < 8:
        return _analyse_chunk(sources, contract, force, limit, cache)
    from concurrent.futures import ProcessPoolExecutor  # only for -j: costs start-up time

    size = max(1, len(sources) // (workers * 4))
    chunks = [sources[i : i + size] for i in range(0, len(sources), size)]
    count = len(chunks)
    with ProcessPoolExecutor(max_workers=workers) as pool:
        results = pool.map(
            _analyse_chunk,
            chunks,
            [contract] * count,
            [force] * count,
            [limit] * count,
            [cache] * count,
        )
        return [outcome for chunk in results for outcome in chunk]


# --------------------------------------------------------------- selection


def known_rules() -> tuple[catalog.Rule, ...]:
    """Every code a ``select``/``ignore`` list may name: the central ones and the
    rules of ``check``."""
    return (*catalog.central(), *(r for r in RULES if r.code not in ("RC001", "RC002")))


def parse_codes(values: Iterable[str], option: str) -> set[str]:
    """Rule codes (or names, or code prefixes like ``RC1``) -> set of codes."""
    codes: set[str] = set()
    known = [rule.code for rule in known_rules()]
    for raw in values:
        for item in raw.split(","):
            item = item.strip()
            if not item:
                continue
            try:
                codes.add(catalog.lookup(known_rules(), item).code)
                continue
            except KeyError:
                pass
            matching = [c for c in known if c.startswith(item.upper())]
            if not matching:
                reason = unknown_rule(item) or f"unknown rule {item!r}"
                raise UsageError(f"{option}: {reason} (see `runnercheck rules`)")
            codes.update(matching)
    return codes


#: Reported whatever ``select`` says (a file that was not analysed may hide anything);
#: only an explicit ``ignore`` hides them.
ALWAYS_SELECTED = frozenset({"RC001", "RC002", "RC003"})


def _selected(code: str, select: set[str], ignore: set[str]) -> bool:
    if select and code not in select and code not in ALWAYS_SELECTED:
        return False
    return code not in ignore


def _suppressed(finding: Finding, modules: dict[str, ModuleFacts]) -> bool:
    module = modules.get(finding.path)
    if module is None or finding.line not in module.suppressions:
        return False
    codes = module.suppressions[finding.line]
    return codes is None or finding.code in codes


# --------------------------------------------------------------------- API


def check_outcomes(
    outcomes: list[FileOutcome],
    contract: Contract,
    select: set[str] = frozenset(),  # type: ignore[assignment]
    ignore: set[str] = frozenset(),  # type: ignore[assignment]
    context: Sequence[ModuleFacts] = (),
    unread: frozenset[str] = frozenset(),
) -> CheckResult:
    """Findings for already analysed files; ``context`` modules (partner files) take
    part in the analysis, but findings located in them are not reported. ``unread``:
    packages the files take base classes from that were not found (an error resting on
    one is a note)."""
    result = CheckResult(files_seen=len(outcomes), partner_files=len(context))
    findings: list[Finding] = []
    modules: dict[str, ModuleFacts] = {}
    for outcome in outcomes:
        if outcome.skipped_bases is not None:
            result.files_skipped += 1
            continue
        if outcome.error is not None:
            result.files_failed += 1
            findings.append(Finding(outcome.display, 1, 1, outcome.error_code, outcome.error))
            continue
        assert outcome.facts is not None
        result.files_parsed += 1
        facts = outcome.facts
        modules[facts.path] = facts
        if facts.syntax_error is not None:
            result.files_failed += 1
            err = facts.syntax_error
            findings.append(
                Finding(facts.path, err.line, err.col, "RC001", f"cannot parse: {err.message}")
            )
    analysed = [m for m in modules.values() if m.syntax_error is None]
    project = Project([*analysed, *context], contract, unread)
    reportable = {outcome.display for outcome in outcomes}
    project.reportable = reportable
    wanted = {rule.code for rule in RULES}
    if select:
        wanted &= select | ALWAYS_SELECTED
    wanted -= ignore
    findings.extend(run_rules(project, wanted))
    kept: list[Finding] = []
    for finding in sorted(set(findings)):
        if finding.path not in reportable:
            continue
        if not _selected(finding.code, select, ignore):
            continue
        if _suppressed(finding, modules):
            result.suppressed += 1
            continue
        kept.append(finding)
    result.findings = [f for f in kept if not f.is_note]
    result.notes = [f for f in kept if f.is_note]
    result.unread = _unread_lines(project.memo.get(UNREAD), set(kept))
    return result


def _unread_lines(demoted: object, kept: set[Finding]) -> list[str]:
    """One line per package whose classes reported errors rest on: how many are notes
    for that, and how to provide the package."""
    if not isinstance(demoted, dict):
        return []
    per_package: dict[str, tuple[set[str], int]] = {}
    for finding, unread in demoted.items():
        if finding in kept:
            bases, count = per_package.get(unread.package, (set(), 0))
            per_package[unread.package] = (bases | {unread.base}, count + 1)
    lines = []
    for package, (bases, count) in sorted(per_package.items()):
        noun = "finding rests" if count == 1 else "findings rest"
        lines.append(
            f"{package} was not read (not under the given paths, a --context directory or "
            f"the installed packages): {count} {noun} on its {', '.join(sorted(bases))} and "
            f"{'is a note' if count == 1 else 'are notes'}; give --context PATH (the directory "
            f"holding {package}/) or install {package} to check {'it' if count == 1 else 'them'}"
        )
    return lines


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
    (:mod:`runnercheck.check.cache`)."""
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
    cache: FactsCache | None = None
    if cache_root is not None:
        from runnercheck.check.cache import FactsCache

        cache = FactsCache(cache_root, contract)
    select_codes = parse_codes(select, "--select") or parse_codes(config.select, "select")
    ignore_codes = parse_codes(ignore, "--ignore") | parse_codes(config.ignore, "ignore")
    sources, walked = discover_walk(paths, (*config.exclude, *exclude), root)
    if buffer is not None:  # in place of the file on disk, or as a file not saved yet
        sources = [s for s in sources if s.path != buffer.path] + [buffer]
    limit = config.max_file_size
    outcomes = _analyse_all(sources, contract, jobs, limit=limit, cache=cache)
    # later rounds: skipped files defining a subclass of a class found so far
    by_display = {s.display: s for s in sources}
    skipped = {i: o.skipped_bases for i, o in enumerate(outcomes) if o.skipped_bases is not None}

    partners: list[ModuleFacts] = []

    last: list[tuple[list[int], set[str]]] = []

    def extensible() -> set[str]:
        """The classes whose subclasses are read, over every file read so far."""
        modules = [*(o.facts for o in outcomes if o.facts is not None), *partners]
        key = [id(m) for m in modules]
        if not last or last[0][0] != key:
            last[:] = [(key, extensible_classes(modules, contract))]
        return last[0][1]

    def read(indices: list[int]) -> set[str]:
        redone = _analyse_all(
            [by_display[outcomes[i].display] for i in indices], contract, jobs, True, limit, cache
        )
        for index, outcome in zip(indices, redone, strict=True):
            outcomes[index] = outcome
        return extensible()

    subclass_rounds(skipped, read, extensible())
    parsed = [(o.path, o.facts) for o in outcomes if o.facts is not None and o.path is not None]
    on_disk = {os.path.abspath(s.path) for s in sources}
    base = root or Path.cwd()
    for entry in config.context:
        if not (base / entry).is_dir():
            raise UsageError(f"context {entry!r} in the config: not a directory under {base}")
    roots = [*context, *(str(base / c) for c in config.context)]
    finder = ModuleFinder(context_roots(roots))
    partners += read_partners(
        [(os.path.abspath(path), facts) for path, facts in parsed],
        on_disk,
        needles(contract),
        contract,
        limit,
        finder,
        cache,
    )
    # and skipped files that subclass a class of a file read for context (a wrapper's
    # inner worker built on a worker of another package)
    more = subclass_rounds(
        {i: b for i, b in skipped.items() if outcomes[i].facts is None},
        read,
        extensible(),
    )
    if more:
        new = [(outcomes[i].path, outcomes[i].facts) for i in more]
        found_new = [(os.path.abspath(p), f) for p, f in new if f is not None and p is not None]
        partners += read_partners(
            found_new, on_disk, needles(contract), contract, limit, finder, cache
        )
    read_modules = [
        *((os.path.abspath(o.path), o.facts) for o in outcomes if o.facts and o.path),
        *((os.path.abspath(p.path), p) for p in partners),
    ]
    unread = unread_packages(read_modules, finder)
    result = check_outcomes(outcomes, contract, select_codes, ignore_codes, partners, unread)
    found, result.walk_notes = walk_findings(walked, paths, result.findings)
    if cache is not None and cache.unused:
        result.walk_notes.append(cache.unused)
    found = [f for f in found if _selected(f.code, select_codes, ignore_codes)]
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
