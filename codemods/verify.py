"""Before anything is written: the new sources must re-parse, ``compile()``,
re-analyse with ``runnercheck check`` as already migrated (no RC106 paired
broadcast, and no finding the old sources did not have), give every non-driver rank
the same literal flags (:mod:`runnercheck.analysis.holds`), and give the model call,
the sampler and the cache operations values from the same sources at every entry
point of the step on each role (:mod:`codemods.facts.sources`)."""

from __future__ import annotations

import ast
import re
from collections.abc import Mapping
from pathlib import Path

from codemods.facts.sources import SourceChange, ValueSources, changed_sources
from codemods.facts.values import ValueFacts
from runnercheck.analysis.extract import extract_tree
from runnercheck.analysis.holds import ChangedValue, NonDriverValues
from runnercheck.analysis.holds import changed_values as compare_values
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.check.pipeline import FileOutcome, check_outcomes, parse_codes
from runnercheck.config import Config
from runnercheck.findings import Finding

_LINES = re.compile(r"(\.py):\d+")


def parse(path: Path, source: bytes | str) -> ast.Module:
    return ast.parse(source, filename=str(path))


def reparse(path: Path, tree: ast.Module, old: str, new: str) -> ast.Module:
    """``parse(path, new)`` for a ``new`` text that ends with the top-level statements
    ``old`` (parsed as ``tree``) ends with: only the lines before them are parsed, and
    those statements of ``tree`` are moved to their new lines (``tree`` is used up).
    The whole text is parsed when that cannot be told (a line ending other than
    ``\n``/``\r\n``, or an edited part that does not parse as complete statements)."""
    if "\r" in old.replace("\r\n", "") or "\r" in new.replace("\r\n", ""):
        return parse(path, new)
    old_lines, new_lines = old.split("\n"), new.split("\n")
    same = 0  # the lines both texts end with
    for a, b in zip(reversed(old_lines), reversed(new_lines), strict=False):
        if a != b:
            break
        same += 1
    first_kept = len(old_lines) - same + 1  # the first line of ``old`` kept as it was
    kept = [s for s in tree.body if _first_line(s) >= first_kept]
    if not kept or len(kept) == len(tree.body):
        return parse(path, new)
    start = _first_line(kept[0])
    shift = len(new_lines) - len(old_lines)
    head = "\n".join(new_lines[: start - 1 + shift]) + "\n"
    try:
        edited = parse(path, head)
    except (SyntaxError, ValueError):
        return parse(path, new)
    for statement in kept:
        _move(statement, shift)
    return ast.Module(body=[*edited.body, *kept], type_ignores=[*edited.type_ignores])


def _first_line(statement: ast.stmt) -> int:
    """The line a top-level statement starts on (its first decorator's, if any)."""
    decorators = getattr(statement, "decorator_list", ())
    return min([statement.lineno, *(d.lineno for d in decorators)])


def _move(node: ast.AST, lines: int) -> None:
    """``ast.increment_lineno`` without its generators."""
    stack = [node]
    while stack:
        item = stack.pop()
        if "lineno" in item._attributes:
            item.lineno += lines  # type: ignore[attr-defined]
            end = getattr(item, "end_lineno", None)
            if end is not None:
                item.end_lineno = end + lines  # type: ignore[attr-defined]
        for field in item._fields:
            value = getattr(item, field, None)
            if isinstance(value, list):
                stack.extend(v for v in value if isinstance(v, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append(value)


def facts(path: Path, tree: ast.Module, source: str, config: Config) -> ModuleFacts:
    """The ``check`` engine's facts of one (already parsed) module."""
    return extract_tree(tree, str(path), source, config.contract())


def compiles(path: Path, source: bytes | ast.Module) -> str | None:
    """None when ``source`` (text or an already parsed tree) compiles, else the error."""
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


def findings(modules: Mapping[Path, ModuleFacts], config: Config) -> list[Finding]:
    """``runnercheck check`` findings over already extracted facts."""
    outcomes = [FileOutcome(str(p), facts=m) for p, m in modules.items()]
    select = parse_codes(config.select, "select")
    ignore = parse_codes(config.ignore, "ignore")
    return check_outcomes(outcomes, config.contract(), select, ignore).findings


def new_findings(
    old: Mapping[Path, ModuleFacts],
    new: Mapping[Path, ModuleFacts],
    config: Config,
    before: list[Finding] | None = None,
) -> list[Finding]:
    """Findings on ``new`` that ``old`` did not have, plus any RC106 still reported
    in a file that changed (``new`` entries that are not ``old``'s)."""
    before = before if before is not None else findings(old, config)
    seen = {_key(f) for f in before}
    changed = {str(p) for p, m in new.items() if old.get(p) is not m}
    return [
        f
        for f in findings(new, config)
        if _key(f) not in seen or (f.code == "RC106" and f.path in changed)
    ]


def changed_values(
    old: Mapping[Path, ModuleFacts],
    new: Mapping[Path, ModuleFacts],
    config: Config,
    old_values: ValueFacts,
    new_values: ValueFacts,
) -> list[ChangedValue | SourceChange]:
    """The literal flags a non-driver rank held at an entry point before the rewrite
    and holds otherwise after it, then every other value whose source changes at the
    model call, the sampler or a cache operation, at any entry point on either role
    (``old_values``, ``new_values``: the values of the methods of each version, see
    :class:`~codemods.facts.values.ValueFacts`)."""
    contract = config.contract()
    old_project = Project(old.values(), contract)
    new_project = Project(new.values(), contract)
    flags = compare_values(NonDriverValues(old_project).held(), NonDriverValues(new_project).held())
    told = {(c.entry, c.keyword) for c in flags}
    sources = [
        SourceChange(before, after)
        for before, after in changed_sources(
            ValueSources(old_project, old_values).reaches(),
            ValueSources(new_project, new_values).reaches(),
        )
        if (before.entry, before.slot.rpartition(".")[2]) not in told
    ]
    return [*flags, *sources]
