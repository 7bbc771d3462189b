"""Showing a migration: unified diffs, refusals, notes, the summary table, JSON."""

from __future__ import annotations

import difflib
from pathlib import Path
from typing import TYPE_CHECKING, Any

from codemods.framework.pipeline import MERGE, MigrateResult
from codemods.reasons import BY_CODE
from runnercheck.console import printable
from runnercheck.records import Refused

if TYPE_CHECKING:
    from rich.console import Console


def display(path: Path) -> str:
    """Relative to the current directory when inside it, else absolute."""
    here = Path.cwd()
    try:
        return str(path.relative_to(here))
    except ValueError:
        return str(path)


def unified_diff(result: MigrateResult) -> str:
    chunks: list[str] = []
    for path, change in result.changes.items():
        name = printable(display(path), newlines=False)  # the text itself is left as it is
        old = change.old.decode("utf-8", "replace") if change.old is not None else ""
        new = change.new.decode("utf-8", "replace")
        chunks.extend(
            difflib.unified_diff(
                old.splitlines(keepends=True),
                new.splitlines(keepends=True),
                fromfile="/dev/null" if change.old is None else f"a/{name}",
                tofile=f"b/{name}",
            )
        )
    text = "".join(chunks)
    return text if not text or text.endswith("\n") else text + "\n"


def where(path: Path, line: int) -> str:
    """``path:line``, or ``path`` alone when there is no line (a whole file)."""
    return f"{display(path)}:{line}" if line > 0 else display(path)


def refusal_shape(refused: Refused) -> tuple[str, str]:
    """The shape left alone and what to change by hand (the reason's by default)."""
    rule = BY_CODE[refused.code]
    return refused.shape or rule.name.replace("-", " "), refused.advice or rule.fix


def refusal_lines(result: MigrateResult) -> list[str]:
    """One line per refusal at the line that causes it, then (indented) the shape,
    what to change by hand and every class left alone with it."""
    lines: list[str] = []
    for r in result.refusals:
        lines.append(f"{where(r.path, r.line)}: {r.code} [{r.kind}] {r.message}")
        if r.kind != MERGE:
            continue
        shape, advice = refusal_shape(r)
        lines.append(f"    shape: {shape}")
        if advice:
            lines.append(f"    by hand: {advice}")
        if r.held_back:
            lines.append(f"    held back: {', '.join(r.held_back)}")
    return lines


def detail_lines(result: MigrateResult) -> list[str]:
    lines: list[str] = []
    for group in result.groups:
        for runner in group.runners:
            if runner.driver_only:
                lines.append(
                    f"{group.label}: {runner.input_class} declares driver-only "
                    f"{', '.join(runner.driver_only)} (never broadcast)"
                )
            if runner.narrows:
                lines.append(
                    f"{group.label}: {runner.runner} subclasses {runner.narrows} but takes "
                    f"{runner.input_class}: its prepare_model_input, "
                    "make_model_input_from_broadcasted_tensor_dict and execute_model "
                    "are marked `# type: ignore[override]`"
                )
            for path, line, text in runner.notes:
                lines.append(f"{display(Path(path))}:{line}: {group.label}: {text}")
            by_reason: dict[tuple[str, str, str], list[str]] = {}
            for dropped in runner.dropped:
                reason = (dropped.carrier, dropped.merged, dropped.constructor)
                by_reason.setdefault(reason, []).append(dropped.key)
            for (carrier, merged, constructor), keys in by_reason.items():
                lines.append(
                    f"{group.label}: {runner.runner} drops duplicate keys {', '.join(keys)}: "
                    f"they already travel inside `{carrier}` (the driver merges `{merged}` "
                    f"after them, every `{constructor}(...)` call passes them, and the "
                    f"non-driver reads them only through `{constructor}(**...)`)"
                )
        for path, line, text in group.worker_notes:
            lines.append(f"{display(Path(path))}:{line}: {group.label}: {text}")
    for note in result.notes:
        lines.append(f"{where(note.path, note.line)}: {note.subject}: {note.message}")
    return lines


def file_lines(result: MigrateResult, mode: str, written: list[Path]) -> list[str]:
    """One line per file, as black and ruff name them: ``would migrate`` /
    ``would create`` (``--check``, ``--diff``), ``migrated`` / ``created`` (written)."""
    lines: list[str] = []
    for path, change in result.changes.items():
        if mode == "write" and path not in written:
            continue
        verb = "migrated" if change.old is not None else "created"
        if mode != "write":
            verb = "would migrate" if change.old is not None else "would create"
        lines.append(f"{verb} {display(path)}")
    return lines


def _summary(result: MigrateResult, mode: str) -> tuple[str, list[list[str]], str]:
    """The summary's title, rows (a header first) and closing line."""
    title = {
        "write": "runnercheck migrate",
        "diff": "runnercheck migrate --diff (nothing written)",
        "check": "runnercheck migrate --check (nothing written)",
    }[mode]
    changed_label = "changed" if mode == "write" else "would change"
    rows = [["codemod", changed_label, "unchanged", "refused"]]
    for name, counts in result.counts().items():
        rows.append(
            [name, str(counts["changed"]), str(counts["unchanged"]), str(counts["refused"])]
        )
    created = sum(1 for c in result.changes.values() if c.old is None)
    seen = "file" if result.files_seen == 1 else "files"
    closing = (
        f"{result.files_seen} {seen} seen, {result.files_parsed} parsed, "
        f"{len(result.changes)} {changed_label} ({created} new), "
        f"{len(result.refusals)} refused or skipped"
    )
    return title, rows, closing


def summary_table(result: MigrateResult, console: Console, mode: str) -> None:
    """The summary as a rich table (a terminal)."""
    from rich.table import Table

    title, rows, closing = _summary(result, mode)
    table = Table(*rows[0], title=title)
    for row in rows[1:]:
        table.add_row(*row)
    console.print(table)
    console.print(closing, markup=False, highlight=False)


def summary_lines(result: MigrateResult, mode: str) -> list[str]:
    """The summary as plain text (not a terminal): the title, the table's columns
    aligned, the closing line."""
    title, rows, closing = _summary(result, mode)
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    table = [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in rows
    ]
    return [title, *table, closing]


def github_lines(result: MigrateResult, mode: str, written: list[Path]) -> list[str]:
    """``--format github``: a workflow annotation per refusal (an error at its line) and
    per file that would change (``--check``, ``--diff``: an error; written: a notice),
    then the summary's closing line."""
    from runnercheck.github import Level, annotation

    lines = [
        annotation("error", r.message, display(r.path), r.line, 0, f"{r.code} [{r.kind}]")
        for r in result.refusals
    ]
    for line in file_lines(result, mode, written):
        verb, _, shown = line.partition(" ")
        if mode != "write":
            verb, _, shown = shown.partition(" ")
            verb = f"would {verb}"
        level: Level = "notice" if mode == "write" else "error"
        message = f"{verb}: run `runnercheck migrate` on it" if mode != "write" else verb
        lines.append(annotation(level, message, shown, title="runnercheck migrate"))
    return [*lines, _summary(result, mode)[2]]


def as_json(
    result: MigrateResult, mode: str, written: list[Path], recovered: list[str] | None = None
) -> dict[str, Any]:
    return {
        "mode": mode,
        "recovered": recovered or [],
        "files_seen": result.files_seen,
        "files_parsed": result.files_parsed,
        "changes": [
            {
                "path": display(p),
                "created": c.old is None,
                "codemods": list(c.codemods),
                "written": p in written,
            }
            for p, c in result.changes.items()
        ],
        "refusals": [
            {
                "path": display(r.path),
                "line": r.line,
                "code": r.code,
                "codemod": r.kind,
                "group": r.group,
                "message": r.message,
                "shape": refusal_shape(r)[0],
                "advice": refusal_shape(r)[1],
                "held_back": list(r.held_back),
            }
            for r in result.refusals
        ],
        "notes": [
            {"path": display(n.path), "line": n.line, "pair": n.subject, "message": n.message}
            for n in result.notes
        ],
        "groups": [
            {
                "group": g.label,
                "worker_keys": g.worker_keys,
                "notes": [
                    {"path": display(Path(p)), "line": n, "message": t}
                    for p, n, t in g.worker_notes
                ],
                "runners": [
                    {
                        "runner": r.runner,
                        "input_class": r.input_class,
                        "fields": r.fields,
                        "driver_only": r.driver_only,
                        "keys": r.keys,
                        "merged_dicts": r.dynamic,
                        "dropped": [{"key": d.key, "why": d.why} for d in r.dropped],
                        "narrows": r.narrows,
                        "notes": [
                            {"path": display(Path(p)), "line": n, "message": t}
                            for p, n, t in r.notes
                        ],
                    }
                    for r in g.runners
                ],
            }
            for g in result.groups
        ],
        "summary": result.counts(),
    }
