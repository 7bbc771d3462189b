"""Output of ``runnercheck check``: text (rich on a TTY), JSON and SARIF 2.1.0.

rich is imported only to colour a terminal; plain text, JSON and SARIF never load it.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import TYPE_CHECKING, Any

from runnercheck import __version__, catalog, diagnostic_formats
from runnercheck.check.pipeline import CheckResult
from runnercheck.console import echo, printable
from runnercheck.diagnostic_formats import SARIF_SCHEMA, SRCROOT
from runnercheck.findings import Finding
from runnercheck.rules import RULES

if TYPE_CHECKING:
    from rich.console import Console


def summary_line(result: CheckResult, show_notes: bool = False) -> str:
    seen = "file" if result.files_seen == 1 else "files"
    counts = (
        f"{result.files_seen} {seen} seen, {result.files_parsed} parsed, "
        f"{result.files_skipped} skipped by the prefilter"
    )
    if result.suppressed:
        counts += f", {result.suppressed} suppressed"
    if result.baselined:
        counts += f", {result.baselined} in the baseline"
    if result.partner_files:
        noun = "file" if result.partner_files == 1 else "files"
        counts += f", {result.partner_files} imported {noun} read for context"
    if result.notes:
        noun = "note" if len(result.notes) == 1 else "notes"
        counts += f", {len(result.notes)} {noun}"
        if not show_notes:
            counts += " (--show-notes)"
    if not result.findings:
        return f"No findings ({counts})."
    files = len({f.path for f in result.findings})
    noun = "finding" if len(result.findings) == 1 else "findings"
    in_files = "file" if files == 1 else "files"
    return f"Found {len(result.findings)} {noun} in {files} {in_files} ({counts})."


def print_text(result: CheckResult, console: Console | None, show_notes: bool = False) -> None:
    """One ``path:line:col: CODE message`` line per finding (and per note with
    ``show_notes``), then a summary line. Without a console (not a colour terminal),
    plain lines go to stdout."""
    shown = sorted([*result.findings, *result.notes]) if show_notes else result.findings
    if console is None or not console.is_terminal:
        out = console.file if console is not None else sys.stdout
        for finding in shown:
            out.write(printable(diagnostic_formats.text(finding), newlines=False) + "\n")
        out.write(summary_line(result, show_notes) + "\n")
        return
    from rich.text import Text

    for finding in shown:
        line = Text()
        where = printable(f"{finding.path}:{finding.line}:{finding.column}:", newlines=False)
        line.append(where, style="bold")
        line.append(" note: " if finding.is_note else " ")
        style = "cyan" if finding.is_note else "bold red" if finding.code < "RC100" else "red"
        line.append(finding.code, style=style)
        line.append(f" {printable(finding.message, newlines=False)}")
        console.print(line)
    style = "bold green" if not result.findings else "bold"
    console.print(Text(summary_line(result, show_notes), style=style))


def as_json(result: CheckResult) -> dict[str, Any]:
    return {
        "version": __version__,
        "findings": [finding_json(f) for f in result.findings],
        "notes": [finding_json(f) for f in result.notes],
        "skipped": result.walk_notes,
        "unread": result.unread,
        "summary": result.summary(),
    }


def finding_json(finding: Finding) -> dict[str, Any]:
    """A finding of ``check`` as JSON, with its rule's name."""
    return diagnostic_formats.json_object(finding, catalog.lookup(RULES, finding.code).name)


def _rule_descriptor(rule: catalog.Rule) -> dict[str, Any]:
    help_text = f"{rule.summary}\n\nWhy: {rule.why}\n\nBad:\n{rule.bad}\n\nGood:\n{rule.good}"
    help_markdown = (
        f"{rule.summary}\n\n**Why:** {rule.why}\n\n**Bad:**\n```python\n{rule.bad}\n```\n\n"
        f"**Good:**\n```python\n{rule.good}\n```"
    )
    return {
        "id": rule.code,
        "name": rule.name,
        "shortDescription": {"text": rule.summary},
        "fullDescription": {"text": rule.why},
        "help": {"text": help_text, "markdown": help_markdown},
        "defaultConfiguration": {"level": "error"},
        "properties": {"tool": rule.tool, "tags": ["runnercheck", rule.tool]},
    }


def as_sarif(result: CheckResult, base: Path | None = None) -> dict[str, Any]:
    """The SARIF 2.1.0 log. ``base`` (default: the working directory) is what relative
    finding paths are relative to; it becomes ``originalUriBaseIds["%SRCROOT%"]``."""
    root = Path(os.path.abspath(base if base is not None else Path.cwd()))
    rules = list(RULES)
    index = {rule.code: i for i, rule in enumerate(rules)}
    results = []
    for finding in sorted([*result.findings, *result.notes]):
        results.append(diagnostic_formats.sarif_result(finding, index[finding.code], root))
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "runnercheck",
                        "version": __version__,
                        "rules": [_rule_descriptor(rule) for rule in rules],
                    }
                },
                "originalUriBaseIds": {SRCROOT: {"uri": diagnostic_formats.base_uri(root)}},
                "results": results,
                "properties": {"summary": result.summary()},
            }
        ],
    }


def print_github(result: CheckResult, show_notes: bool = False) -> None:
    """One workflow annotation per finding (``error``) and, with ``show_notes``, per
    note (``notice``), then the summary line as plain text."""
    shown = sorted([*result.findings, *result.notes]) if show_notes else result.findings
    for finding in shown:
        title = f"{finding.code} {_name(finding.code)}".rstrip()
        print(diagnostic_formats.github(finding, title))
    print(summary_line(result, show_notes))


def _name(code: str) -> str:
    return next((rule.name for rule in RULES if rule.code == code), "")


def render(
    result: CheckResult,
    fmt: str,
    console: Console | None,
    show_notes: bool = False,
    base: Path | None = None,
) -> None:
    # on stderr: the findings on stdout stay machine-readable
    for note in (*result.walk_notes, *result.unread):
        echo(note, stderr=True, newlines=False)
    if fmt == "json":
        print(json.dumps(as_json(result), indent=2))
    elif fmt == "github":
        print_github(result, show_notes)
    elif fmt == "sarif":
        print(json.dumps(as_sarif(result, base), indent=2))
    else:
        print_text(result, console, show_notes)
