"""How a diagnostic is shown: a text line, a JSON object, a SARIF 2.1.0 result and a
GitHub Actions workflow command. Each tool's report puts its own header and summary
around these; the diagnostics themselves look the same in all of them."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any
from urllib.parse import quote

from runnercheck.diagnostics import Diagnostic
from runnercheck.github import Level, annotation

SARIF_SCHEMA = "https://json.schemastore.org/sarif-2.1.0.json"
#: The base that relative result URIs are resolved against (``originalUriBaseIds``).
SRCROOT = "%SRCROOT%"

_TEXT_LABEL = {"error": "", "warning": " warning:", "note": " note:"}
_GITHUB_LEVEL: dict[str, Level] = {"error": "error", "warning": "warning", "note": "notice"}


def text(diagnostic: Diagnostic) -> str:
    """``path:line:column: CODE message`` (``note:`` or ``warning:`` before the code)."""
    d = diagnostic
    return f"{d.path}:{d.line}:{d.column}:{_TEXT_LABEL[d.severity]} {d.code} {d.message}"


def json_object(diagnostic: Diagnostic, name: str) -> dict[str, Any]:
    """The diagnostic as JSON, with its rule's ``name``; ``fix`` and ``related`` only
    where it has them."""
    d = diagnostic
    out: dict[str, Any] = {
        "path": d.path,
        "line": d.line,
        "col": d.column,
        "code": d.code,
        "message": d.message,
        "severity": d.severity,
    }
    if d.fix is not None:
        out["fix"] = d.fix
    if d.related:
        out["related"] = [site._asdict() for site in d.related]
    out["name"] = name
    return out


def artifact_location(path: str, base: Path) -> dict[str, str]:
    """A path under ``base`` as a relative URI on ``%SRCROOT%``; any other as a file URI."""
    absolute = Path(os.path.normpath(base / path))
    try:
        relative = absolute.relative_to(base)
    except ValueError:
        return {"uri": absolute.as_uri()}
    return {"uri": quote(relative.as_posix()), "uriBaseId": SRCROOT}


def base_uri(base: Path) -> str:
    """``base`` as the URI of ``%SRCROOT%`` (a directory: it ends with ``/``)."""
    uri = base.as_uri()
    return uri if uri.endswith("/") else uri + "/"


def _location(path: str, line: int, column: int | None, base: Path) -> dict[str, Any]:
    region = {"startLine": line} if column is None else {"startLine": line, "startColumn": column}
    return {
        "physicalLocation": {"artifactLocation": artifact_location(path, base), "region": region}
    }


def sarif_result(diagnostic: Diagnostic, rule_index: int, base: Path) -> dict[str, Any]:
    """One SARIF result; relative paths are relative to ``base`` (``%SRCROOT%``)."""
    d = diagnostic
    result: dict[str, Any] = {
        "ruleId": d.code,
        "ruleIndex": rule_index,
        "level": d.severity,
        "message": {"text": d.message},
        "locations": [_location(d.path, d.line, d.column, base)],
    }
    if d.related:
        result["relatedLocations"] = [
            {**_location(site.path, site.line, None, base), "message": {"text": site.message}}
            for site in d.related
        ]
    if d.fix is not None:
        result["properties"] = {"fix": d.fix}
    return result


def github(diagnostic: Diagnostic, title: str) -> str:
    """One workflow command: ``error``, ``warning`` or ``notice`` by severity; the
    messages of the related sites follow the diagnostic's own, a line each."""
    d = diagnostic
    message = "\n".join([d.message, *(site.message for site in d.related)])
    return annotation(_GITHUB_LEVEL[d.severity], message, d.path, d.line, d.column, title)
