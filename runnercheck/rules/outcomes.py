"""From analysed files to findings: the rules of :mod:`runnercheck.rules` over the
project the files' facts make, then ``select``/``ignore`` and the inline suppressions.

``check`` (:mod:`runnercheck.check.pipeline`) and ``migrate``'s verification
(:mod:`codemods.framework.verify`) both judge files through :func:`check_outcomes`; a file the
workspace could not read (:mod:`runnercheck.workspace.reading`) is one finding with its
code.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from runnercheck import catalog
from runnercheck.analysis.model import ModuleFacts
from runnercheck.config import unknown_rule
from runnercheck.contract import Contract
from runnercheck.errors import UsageError
from runnercheck.findings import Finding
from runnercheck.rules import RULES, UNREAD, run_rules
from runnercheck.workspace.facts import project_of
from runnercheck.workspace.reading import CANNOT_READ, FileOutcome


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


def parse_codes(values: Iterable[str], option: str) -> set[str]:
    """Rule codes (or names, or code prefixes like ``RC1``) -> set of codes."""
    codes: set[str] = set()
    known = [*catalog.CODES, *catalog.ALIASES]
    for raw in values:
        for item in raw.split(","):
            item = item.strip()
            if not item:
                continue
            try:
                codes.add(catalog.code_of(item))
                continue
            except KeyError:
                pass
            matching = [catalog.canonical(c) for c in known if c.startswith(item.upper())]
            if not matching:
                reason = unknown_rule(item) or f"unknown rule {item!r}"
                raise UsageError(f"{option}: {reason} (see `runnercheck rules`)")
            codes.update(matching)
    return codes


#: Reported whatever ``select`` says (a file that was not analysed may hide anything);
#: only an explicit ``ignore`` hides them.
ALWAYS_SELECTED = frozenset({"RC001", "RC002", "RC003"})


def selected(code: str, select: set[str], ignore: set[str]) -> bool:
    if select and code not in select and code not in ALWAYS_SELECTED:
        return False
    return code not in ignore


def suppressed(finding: Finding, modules: dict[str, ModuleFacts]) -> bool:
    module = modules.get(finding.path)
    if module is None or finding.line not in module.suppressions:
        return False
    codes = module.suppressions[finding.line]
    return codes is None or finding.code in {catalog.canonical(c) for c in codes}


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
                Finding(facts.path, err.line, err.col, CANNOT_READ, f"cannot parse: {err.message}")
            )
    reportable = {outcome.display for outcome in outcomes}
    project = project_of(modules.values(), context, contract, unread, reportable)
    wanted = {rule.code for rule in RULES}
    if select:
        wanted &= select | ALWAYS_SELECTED
    wanted -= ignore
    findings.extend(run_rules(project, wanted))
    kept: list[Finding] = []
    for finding in sorted(set(findings)):
        if finding.path not in reportable:
            continue
        if not selected(finding.code, select, ignore):
            continue
        if suppressed(finding, modules):
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
