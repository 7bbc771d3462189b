"""Before anything is written: the new sources must re-parse, ``compile()``,
re-analyse with ``runnercheck check`` as already migrated (no RC106 paired
broadcast, and no finding the old sources did not have), give every non-driver rank
the same literal flags (:mod:`runnercheck.analysis.holds`), and give the model call,
the sampler and the cache operations values from the same sources at every entry
point of the step on each role (:mod:`codemods.facts.sources`)."""

from __future__ import annotations

import ast
import dataclasses
import functools
import re
from collections.abc import Mapping
from pathlib import Path

from codemods.facts.sources import Reach, SourceChange, ValueSources, changed_sources
from codemods.facts.values import ValueFacts
from runnercheck.analysis.extract import FunctionReader, extract_tree
from runnercheck.analysis.holds import ChangedValue, Held, NonDriverValues
from runnercheck.analysis.holds import changed_values as compare_values
from runnercheck.analysis.model import ClassFacts, FunctionFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.syntax import module_level, read_import, shift_lines
from runnercheck.config import Config
from runnercheck.findings import Finding
from runnercheck.rules.outcomes import check_outcomes, parse_codes
from runnercheck.workspace.reading import FileOutcome

#: The positions a finding's message may cite: ``file.py:12``, ``(line 12)``, and the
#: pseudo names of unnamed dicts (``<return@12>``, ``<arg@12:5>``).
_LINES = re.compile(r"(\.py):\d+|(\bline )\d+|(@)\d+(?::\d+)?")


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
        shift_lines(statement, shift)
    return ast.Module(body=[*edited.body, *kept], type_ignores=[*edited.type_ignores])


def _first_line(statement: ast.stmt) -> int:
    """The line a top-level statement starts on (its first decorator's, if any)."""
    decorators = getattr(statement, "decorator_list", ())
    return min([statement.lineno, *(d.lineno for d in decorators)])


def facts(
    path: Path,
    tree: ast.Module,
    source: str,
    config: Config,
    readers: dict[int, FunctionReader] | None = None,
) -> ModuleFacts:
    """The ``check`` engine's facts of one (already parsed) module (``readers``: filled
    with the reader of each method read, see :func:`extract_tree`)."""
    return extract_tree(tree, str(path), source, config.contract(), readers=readers)


_DEFINITION = (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)
_Definition = ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef
_IMPORT = re.compile(r"\bimport\b")
_NEWLINE = re.compile(r"\r\n|\r|\n")


def rewritten_facts(
    path: Path,
    before: ast.Module,
    read: ModuleFacts,
    after: ast.Module,
    text: str,
    config: Config,
    marked: Mapping[str, frozenset[str]],
    readers: dict[int, FunctionReader] | None = None,
) -> tuple[ModuleFacts, frozenset[int]]:
    """The facts of a rewrite of a module, as the analysis reads the rewritten text
    (:func:`extract_tree`, ``names=True``), positions aside. ``before``: the module as
    read (its text ``text``, its facts ``read``); ``after``: the rewrite at the same
    positions, holding ``before``'s own nodes for what it leaves alone
    (:class:`codemods.framework.replay.Replayed`); ``marked``: per class, the fields it marks with
    a ``# Driver-only`` comment, which reads as driver-only; ``readers``: filled with the
    reader of each method read again (see :func:`extract_tree`).

    A class or function at module level that the rewrite left alone keeps the facts it
    was read with when reading it again gives the same facts: what it reads beyond its
    own node is the module's imports, and those are the same for every name its text
    holds (the rewrite's imports of new names, the lazy imports of the definitions
    read again before it). Returns the facts and the ``id`` of every method the rewrite
    left alone whose values carry over so (:meth:`ValueFacts.changed`)."""
    contract = config.contract()
    old_defs = [s for s in module_level(before.body) if isinstance(s, _DEFINITION)]
    defs = [s for s in module_level(after.body) if isinstance(s, _DEFINITION)]
    renamed = _changed_imports(before, after)
    spans = _Spans(text)
    kept: dict[int, ClassFacts | FunctionFacts] = {}
    lazy: set[int] = set()  # kept definitions that may import lazily
    last_read = -1  # the last definition read again
    if not _in_place(old_defs, defs, spans):
        defs = []  # every definition is read again
    for index, stmt in enumerate(defs):
        found = _facts_of(read, stmt) if stmt is old_defs[index] else None
        if found is None or (renamed and spans.mentions(renamed, stmt)):
            last_read = index
            continue
        kept[id(stmt)] = found
        if spans.has(_IMPORT, stmt):
            lazy.add(id(stmt))
    for stmt in defs[: last_read + 1]:  # their lazy imports count for what is read after
        if id(stmt) in lazy:
            del kept[id(stmt)]
            lazy.discard(id(stmt))
    facts = extract_tree(
        after, str(path), text, contract, names=True, loaded=False, known=kept, readers=readers
    )
    if lazy:  # the kept definitions after the last one read again import lazily
        facts.imports = _with_lazy_imports(facts.imports, read.imports, renamed)
    for name, fields in marked.items():
        cls = facts.classes[name]
        facts.classes[name] = dataclasses.replace(
            cls,
            fields=tuple(
                dataclasses.replace(f, driver_only=True) if f.name in fields else f
                for f in cls.fields
            ),
        )
    # a method node the rewrite left alone (in a class it changed or not) reads the
    # same values but for the names the module-level imports bind otherwise
    read_methods = {id(item) for stmt in old_defs for item in _methods(stmt)}
    methods = frozenset(
        id(item)
        for stmt in defs
        for item in _methods(stmt)
        if id(item) in read_methods and not (renamed and spans.mentions(renamed, item))
    )
    return facts, methods


def _methods(stmt: _Definition) -> list[ast.FunctionDef | ast.AsyncFunctionDef]:
    if not isinstance(stmt, ast.ClassDef):
        return []
    return [s for s in stmt.body if isinstance(s, (ast.FunctionDef, ast.AsyncFunctionDef))]


def _in_place(before: list[_Definition], after: list[_Definition], spans: _Spans) -> bool:
    """Whether ``after`` holds the definitions of ``before`` in their order, each the
    same node or a rewrite of it that imports nothing lazily, as ``before``'s did not
    (then the imports every definition is read with are the same, but for the names
    the module-level imports bind otherwise)."""
    if len(before) != len(after):
        return False
    for old, new in zip(before, after, strict=True):
        if old is new:
            continue
        if type(old) is not type(new) or old.name != new.name or spans.has(_IMPORT, old):
            return False
        if _imports_within(new):
            return False
    return True


def _imports_within(stmt: ast.stmt) -> bool:
    """Whether an import statement stands anywhere in ``stmt`` (statements hold
    statements only in their blocks: no expression is visited)."""
    stack = [stmt]
    while stack:
        node = stack.pop()
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            return True
        for name in ("body", "orelse", "finalbody"):
            block = getattr(node, name, None)
            if isinstance(block, list):
                stack.extend(s for s in block if isinstance(s, ast.stmt))
        for part in [*getattr(node, "handlers", ()), *getattr(node, "cases", ())]:
            stack.extend(part.body)
    return False


def _facts_of(read: ModuleFacts, stmt: _Definition) -> ClassFacts | FunctionFacts | None:
    """The facts ``read`` holds of a definition at module level, if of that node."""
    table: Mapping[str, ClassFacts | FunctionFacts]
    table = read.classes if isinstance(stmt, ast.ClassDef) else read.functions
    found = table.get(stmt.name)
    if found is None or (found.line, found.col) != (stmt.lineno, stmt.col_offset + 1):
        return None
    return found


def _imports(tree: ast.Module) -> dict[str, str]:
    """The module's own imports (as :func:`extract_tree` reads them first)."""
    out: dict[str, str] = {}
    for stmt in module_level(tree.body):
        if isinstance(stmt, (ast.Import, ast.ImportFrom)):
            read_import(stmt, out)
    return out


def _changed_imports(before: ast.Module, after: ast.Module) -> frozenset[str]:
    """The names the module-level imports of ``after`` bind otherwise than ``before``'s."""
    old, new = _imports(before), _imports(after)
    return frozenset(k for k in old.keys() | new.keys() if old.get(k) != new.get(k))


def _with_lazy_imports(
    imports: dict[str, str], read: Mapping[str, str], renamed: frozenset[str]
) -> dict[str, str]:
    """``imports`` (read up to the last definition read again), followed by the lazy
    imports of the definitions after it, as ``read`` (the module's imports once read)
    holds them: none of those binds a name of ``renamed``."""
    out = {k: (v if k in renamed else read[k]) for k, v in imports.items()}
    for key, value in read.items():
        if key not in out and key not in renamed:
            out[key] = value
    return out


class _Spans:
    """The lines of a module's text, for what a definition's text holds."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.starts = [0] + [m.end() for m in _NEWLINE.finditer(text)]

    def of(self, stmt: _Definition) -> str:
        first = min([stmt.lineno, *(d.lineno for d in stmt.decorator_list)])
        last = stmt.end_lineno or stmt.lineno
        end = self.starts[last] if last < len(self.starts) else len(self.text)
        return self.text[self.starts[first - 1] : end]

    def has(self, pattern: re.Pattern[str], stmt: _Definition) -> bool:
        return pattern.search(self.of(stmt)) is not None

    def mentions(self, names: frozenset[str], stmt: _Definition) -> bool:
        """Whether the definition's text may hold one of ``names`` (a non-ASCII
        identifier may read as one)."""
        span = self.of(stmt)
        return not span.isascii() or any(
            re.search(rf"\b{re.escape(name)}\b", span) for name in names
        )


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
    """A finding without its positions (rewrites move lines)."""
    message = _LINES.sub(lambda m: next(g for g in m.groups() if g), finding.message)
    return (Path(finding.path).name, finding.code, message)


def findings(modules: Mapping[Path, ModuleFacts], config: Config) -> list[Finding]:
    """``runnercheck check`` findings over already extracted facts."""
    outcomes = [FileOutcome(str(p), facts=m) for p, m in modules.items()]
    select = parse_codes(config.select, "select")
    ignore = parse_codes(config.ignore, "ignore")
    return check_outcomes(outcomes, config.contract(), select, ignore).findings


class Baseline:
    """The files as read that a rewrite is compared with, and what the verification
    reads of them, each made once for every rewrite compared with the same files."""

    def __init__(self, modules: Mapping[Path, ModuleFacts], config: Config, values: ValueFacts):
        self.modules = modules
        self.config = config
        self.values = values

    @functools.cached_property
    def findings(self) -> list[Finding]:
        return findings(self.modules, self.config)

    @functools.cached_property
    def project(self) -> Project:
        return Project(self.modules.values(), self.config.contract())

    @functools.cached_property
    def held(self) -> list[Held]:
        return NonDriverValues(self.project).held()

    @functools.cached_property
    def reaches(self) -> list[Reach]:
        return ValueSources(self.project, self.values).reaches()


#: Findings a rewrite's verification leaves to ``check`` on the written tree.
WHOLE_TREE_CODES = frozenset({"RC112"})


def new_findings(baseline: Baseline, new: Mapping[Path, ModuleFacts]) -> list[Finding]:
    """Findings on ``new`` that the files of ``baseline`` did not have, plus any RC106
    still reported in a file that changed (``new`` entries that are not the
    baseline's). The baseline's findings are made only when ``new`` has some (a rewrite
    that verifies mostly leaves none)."""
    # RC112 compares whole schedules across the inner workers a wrapper drives, which
    # the facts of a verification (the group's files and their context only) do not
    # all hold: the written tree is judged by `check`, which reads them all
    now = [f for f in findings(new, baseline.config) if f.code not in WHOLE_TREE_CODES]
    if not now:
        return []
    seen = {_key(f) for f in baseline.findings}
    changed = {str(p) for p, m in new.items() if baseline.modules.get(p) is not m}
    return [f for f in now if _key(f) not in seen or (f.code == "RC106" and f.path in changed)]


def changed_values(
    old: Mapping[Path, ModuleFacts] | Baseline,
    new: Mapping[Path, ModuleFacts],
    config: Config,
    old_values: ValueFacts,
    new_values: ValueFacts,
) -> list[ChangedValue | SourceChange]:
    """The literal flags a non-driver rank held at an entry point before the rewrite
    and holds otherwise after it, then every other value whose source changes at the
    model call, the sampler or a cache operation, at any entry point on either role
    (``old_values``, ``new_values``: the values of the methods of each version, see
    :class:`~codemods.facts.values.ValueFacts`; ``old``: the files as read, or their
    :class:`Baseline` when several rewrites are compared with them)."""
    baseline = old if isinstance(old, Baseline) else Baseline(old, config, old_values)
    new_project = Project(new.values(), config.contract())
    flags = compare_values(baseline.held, NonDriverValues(new_project).held())
    told = {(c.entry, c.keyword) for c in flags}
    sources = [
        SourceChange(before, after)
        for before, after in changed_sources(
            baseline.reaches, ValueSources(new_project, new_values).reaches()
        )
        if (before.entry, before.slot.rpartition(".")[2]) not in told
    ]
    return [*flags, *sources]
