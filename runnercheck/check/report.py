"""Output of ``runnercheck check``: text (rich on a TTY), JSON and SARIF 2.1.0."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

from rich.console import Console
from rich.text import Text

from runnercheck import __version__, catalog
from runnercheck.check.runner import CheckResult

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
INFORMATION_URI = "https://pypi.org/project/runnercheck/"


def summary_line(result: CheckResult) -> str:
    seen = "file" if result.files_seen == 1 else "files"
    counts = (
        f"{result.files_seen} {seen} seen, {result.files_parsed} parsed, "
        f"{result.files_skipped} skipped by the prefilter"
    )
    if result.suppressed:
        counts += f", {result.suppressed} suppressed"
    if result.partner_files:
        noun = "file" if result.partner_files == 1 else "files"
        counts += f", {result.partner_files} imported {noun} read for context"
    if not result.findings:
        return f"No findings ({counts})."
    files = len({f.path for f in result.findings})
    noun = "finding" if len(result.findings) == 1 else "findings"
    in_files = "file" if files == 1 else "files"
    return f"Found {len(result.findings)} {noun} in {files} {in_files} ({counts})."


def print_text(result: CheckResult, console: Console) -> None:
    """One ``path:line:col: CODE message`` line per finding, then a summary line."""
    for finding in result.findings:
        if console.is_terminal:
            line = Text()
            line.append(f"{finding.path}:{finding.line}:{finding.col}:", style="bold")
            line.append(" ")
            line.append(finding.code, style="bold red" if finding.code < "RC100" else "red")
            line.append(f" {finding.message}")
            console.print(line)
        else:
            console.file.write(finding.as_text() + "\n")
    if console.is_terminal:
        style = "bold green" if not result.findings else "bold"
        console.print(Text(summary_line(result), style=style))
    else:
        console.file.write(summary_line(result) + "\n")


def as_json(result: CheckResult) -> dict[str, Any]:
    return {
        "version": __version__,
        "findings": [f.as_json() for f in result.findings],
        "notes": result.notes,
        "summary": result.summary(),
    }


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
        "properties": {"engine": rule.engine, "tags": ["runnercheck", rule.engine]},
    }


def as_sarif(result: CheckResult) -> dict[str, Any]:
    rules = list(catalog.for_engine("check"))
    index = {rule.code: i for i, rule in enumerate(rules)}
    results = []
    for finding in result.findings:
        uri = Path(finding.path).as_posix()
        results.append(
            {
                "ruleId": finding.code,
                "ruleIndex": index[finding.code],
                "level": "error",
                "message": {"text": finding.message},
                "locations": [
                    {
                        "physicalLocation": {
                            "artifactLocation": {"uri": uri},
                            "region": {"startLine": finding.line, "startColumn": finding.col},
                        }
                    }
                ],
            }
        )
    return {
        "$schema": SARIF_SCHEMA,
        "version": "2.1.0",
        "runs": [
            {
                "tool": {
                    "driver": {
                        "name": "runnercheck",
                        "version": __version__,
                        "informationUri": INFORMATION_URI,
                        "rules": [_rule_descriptor(rule) for rule in rules],
                    }
                },
                "results": results,
                "properties": {"summary": result.summary()},
            }
        ],
    }


def render(result: CheckResult, fmt: str, console: Console) -> None:
    for note in result.notes:  # on stderr: the findings on stdout stay machine-readable
        print(note, file=sys.stderr)
    if fmt == "json":
        print(json.dumps(as_json(result), indent=2))
    elif fmt == "sarif":
        print(json.dumps(as_sarif(result), indent=2))
    else:
        print_text(result, console)
