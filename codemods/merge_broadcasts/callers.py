"""Calls of the methods a migration removes, anywhere in the target's project.

The legacy method of a migrated runner (vLLM's ``prepare_input_tensors``) is gone
after the rewrite; code elsewhere in the project (its tests, benchmarks) may still
call it. Every ``*.py`` under the project directory above the given paths (the
first one holding ``pyproject.toml``, ``setup.cfg``, ``.git``, ...) is searched,
byte prefilter first, LibCST only on the files that mention the method.

A call is rewritten when the new API is a drop-in, as a rename refactor updates
every reference (the project's files, tests included; only the given paths with
``--no-callers``): ``(a, b, _) = r.prepare_input_tensors(x)`` becomes::

    model_input = r.prepare_model_input(x)
    a = model_input.a_field
    b = model_input.b_field

(each kept name reads the field that held its position; ``_`` positions go), laid out
within the file's line length. Otherwise the call is named, ``file:line``, with what
to change by hand.

The project directory is the first one above the given paths holding
``pyproject.toml``, ``setup.cfg``, ``.git``, ...; in a plain copy with none of them,
the directory holding the given paths' top package (:func:`search_root`).
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from codemods.merge_broadcasts.narrowing import narrow_reads
from codemods.toolkit import cstutil, layout
from codemods.toolkit.formatting import project_dir
from codemods.toolkit.positions import Lines
from runnercheck.files import MAX_ANALYSED_SIZE, ReadError, read_source

#: directories never searched (environments, caches, build output)
_SKIP_DIRS = {".git", ".venv", "venv", "node_modules", "build", "dist", "__pycache__", ".tox"}


@dataclass(frozen=True)
class Removed:
    """A runner method the rewrite removed, and what replaces it."""

    runner: str
    method: str
    #: the replacement (``prepare_model_input``) and its input class
    replacement: str
    input_class: str
    #: per position of the legacy result: the input field holding it ("" for none)
    fields: tuple[str, ...]
    #: the files of the group (their own calls were rewritten with them)
    files: frozenset[Path] = frozenset()
    #: the input's fields declared Optional (a name read from one is asserted set
    #: before the caller dereferences it, as the legacy untyped tuple allowed)
    optional: frozenset[str] = frozenset()
    #: the labels of the groups that removed it (a rewritten caller is written with them)
    groups: tuple[str, ...] = ()


@dataclass
class CallerEdits:
    #: file -> (old text, new text) for files whose calls were rewritten
    rewritten: dict[Path, tuple[str, str]] = field(default_factory=dict)
    #: (file, line, what) for each call left for a person
    named: list[tuple[Path, int, str]] = field(default_factory=list)
    #: file rewritten -> the labels of the groups whose methods it called
    groups: dict[Path, list[str]] = field(default_factory=dict)


def search_root(start: Path) -> Path:
    """The directory whose ``*.py`` files are searched for calls: the project directory
    above ``start`` (:func:`codemods.toolkit.formatting.project_dir`); in a plain copy with no
    project file, the directory holding the top package ``start`` lies in (``copy/``
    for ``copy/vllm/worker/``; ``start`` itself when it is no package)."""
    found = project_dir(start)
    if found is not None:
        return found
    here = (start if start.is_dir() else start.parent).resolve()
    if not (here / "__init__.py").is_file():
        return here
    while (here.parent / "__init__.py").is_file() and here.parent != here:
        here = here.parent
    return here.parent


#: the most ``*.py`` files searched per project (a project directory found far above
#: the given paths, say a home directory under git, must not mean a walk of everything)
MAX_FILES = 50_000


def _files(root: Path, known: Mapping[Path, bytes], walked: frozenset[Path]) -> list[Path]:
    """Every ``*.py`` under ``root`` (no links) in ``os.walk`` order, at most
    :data:`MAX_FILES`. The directories in ``walked`` are not walked again: their
    files are those of ``known``."""
    starts: list[Path] = []
    found: list[Path] = []
    if root.resolve() in walked:
        starts.append(root)
    else:
        for directory, dirs, files in os.walk(root):
            here = Path(directory)
            dirs[:] = sorted(d for d in dirs if d not in _SKIP_DIRS and not d.startswith("."))
            starts += [here / d for d in dirs if (here / d).resolve() in walked]
            dirs[:] = [d for d in dirs if (here / d).resolve() not in walked]
            found += [here / n for n in files if n.endswith(".py") and not (here / n).is_symlink()]
            if len(found) > MAX_FILES:
                break
    for start in starts:
        found += [path for path in known if _searched(path, start)]
    return sorted(found, key=_walk_order)[:MAX_FILES]


def _searched(path: Path, start: Path) -> bool:
    """Whether the walk from ``start`` would reach the ``*.py`` file ``path`` (compared
    as text: both are paths as ``Path`` spells them, so one lies under the other
    exactly when its text continues the other's with a separator)."""
    text, top = str(path), str(start)
    if not text.endswith(".py") or path.suffix != ".py":
        return False
    if text == top:
        return True
    head = top if top.endswith(os.sep) else top + os.sep
    if not text.startswith(head):
        return False
    between = text[len(head) :].split(os.sep)[:-1]
    return not any(part in _SKIP_DIRS or part.startswith(".") for part in between)


def _walk_order(path: Path) -> tuple[tuple[int, str], ...]:
    """``os.walk`` order: a directory's files before its subdirectories, each sorted."""
    return (*((1, part) for part in path.parent.parts), (0, path.name))


def _free_name(func: cst.CSTNode | None, wanted: str) -> str:
    taken = cstutil.bound(func) if func is not None else set()
    name, n = wanted, 1
    while name in taken:
        n += 1
        name = f"{wanted}{n}"
    return name


def _targets(assign: cst.Assign) -> list[str] | None:
    if len(assign.targets) != 1:
        return None
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)):
        return None
    names: list[str] = []
    for element in target.elements:
        if not isinstance(element, cst.Element) or not isinstance(element.value, cst.Name):
            return None
        names.append(element.value.value)
    return names


class _Calls(cst.CSTTransformer):
    """Rewrites (``rewrite``) or names the calls of ``removed`` methods in ``module``;
    the lines of the calls named are measured only when there are some."""

    def __init__(
        self, removed: dict[str, list[Removed]], rewrite: bool, module: cst.Module
    ) -> None:
        super().__init__()
        self.removed = removed
        self.rewrite = rewrite
        self.lines = Lines(module)
        self.functions: list[cst.FunctionDef] = []
        #: per enclosing function, the names now read from Optional fields
        self.narrow: list[list[str]] = []
        #: per enclosing class, the methods it defines itself
        self.classes: list[set[str]] = []
        self.named: list[tuple[int, Removed, str]] = []
        self.changed = 0
        self.handled: set[int] = set()
        #: the removed methods of the calls rewritten
        self.used: list[Removed] = []

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self.classes.append(
            {
                item.name.value
                for item in cstutil.body_of(node.body)
                if isinstance(item, cst.FunctionDef)
            }
        )

    def leave_ClassDef(
        self, original_node: cst.ClassDef, updated_node: cst.ClassDef
    ) -> cst.ClassDef:
        self.classes.pop()
        return updated_node

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self.functions.append(node)
        self.narrow.append([])

    def leave_FunctionDef(
        self, original_node: cst.FunctionDef, updated_node: cst.FunctionDef
    ) -> cst.FunctionDef:
        self.functions.pop()
        return narrow_reads(updated_node, self.narrow.pop())

    def _candidates(self, call: cst.BaseExpression) -> list[Removed]:
        if not isinstance(call, cst.Call) or not isinstance(call.func, cst.Attribute):
            return []
        name = call.func.attr.value
        receiver = call.func.value
        if isinstance(receiver, cst.Name) and receiver.value == "self":
            if self.classes and name in self.classes[-1]:
                return []  # the class's own method of that name, still there
        return self.removed.get(name, [])

    def _removed(self, call: cst.BaseExpression) -> Removed | None:
        found = self._candidates(call)
        return found[0] if found else None

    def _choose(
        self, call: cst.BaseExpression, names: list[str] | None
    ) -> tuple[Removed, str | None]:
        """The removed method a call means (the receiver's type is not known here):
        the runners whose result has as many values as the call unpacks, when they
        agree on the fields the call keeps; else why the call is left alone."""
        found = self._candidates(call)
        if names is None:
            return found[0], "its result is not unpacked into names"
        same = [r for r in found if len(r.fields) == len(names)]
        if not same:
            sizes = ", ".join(f"{r.runner} {len(r.fields)}" for r in found)
            return found[0], f"it unpacks {len(names)} values; the method returned {sizes}"
        kept = {tuple(f for n, f in zip(names, r.fields, strict=True) if n != "_") for r in same}
        runners = " or ".join(dict.fromkeys(r.runner for r in same))
        chosen = dataclasses.replace(same[0], runner=runners)
        if len(kept) > 1:
            return chosen, "those runners keep different fields at these positions"
        missing = [n for n, f in zip(names, same[0].fields, strict=True) if n != "_" and not f]
        if missing:
            return chosen, f"{', '.join(missing)} is computed in execute_model now, not a field"
        return chosen, None

    def _line(self, node: cst.CSTNode) -> int:
        return self.lines.line(node)

    def visit_SimpleStatementLine(self, node: cst.SimpleStatementLine) -> None:
        if len(node.body) == 1 and isinstance(node.body[0], cst.Assign):
            if self._removed(node.body[0].value) is not None:
                self.handled.add(id(node.body[0].value))

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.BaseStatement | cst.FlattenSentinel[cst.BaseStatement]:
        if len(original_node.body) != 1 or not isinstance(original_node.body[0], cst.Assign):
            return updated_node
        assign = original_node.body[0]
        if self._removed(assign.value) is None:
            return updated_node
        names = _targets(assign)
        removed, why = self._choose(assign.value, names)
        if why is not None or not self.rewrite:
            self.named.append((self._line(assign.value), removed, why or ""))
            return updated_node
        assert names is not None and isinstance(assign.value, cst.Call)
        call = assign.value
        assert isinstance(call.func, cst.Attribute)
        var = _free_name(self.functions[-1] if self.functions else None, "model_input")
        new_call = call.with_changes(
            func=call.func.with_changes(attr=cst.Name(removed.replacement))
        )
        first = cst.SimpleStatementLine(
            body=[cst.Assign([cst.AssignTarget(cst.Name(var))], new_call)],
            leading_lines=original_node.leading_lines,
        )
        kept = [(n, f) for n, f in zip(names, removed.fields, strict=True) if n != "_"]
        self.changed += 1
        self.used += self._candidates(call)
        if self.narrow:
            self.narrow[-1] += [n for n, f in kept if f in removed.optional]
        if not kept:
            return first
        text = "".join(f"{name} = {var}.{field_name}\n" for name, field_name in kept)
        return cst.FlattenSentinel([first, *cstutil.parse_statements(text)])

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        removed = self._removed(original_node)
        if removed is not None and id(original_node) not in self.handled:
            why = "its result is not unpacked into names"
            self.named.append((self._line(original_node), removed, why))
        return updated_node


def find_callers(
    removed: Sequence[Removed],
    roots: Sequence[Path],
    within: Iterable[Path],
    skip: Iterable[Path] = (),
    known: Mapping[Path, bytes] | None = None,
    walked: Iterable[Path] = (),
    trees: Mapping[Path, ast.Module] | None = None,
) -> CallerEdits:
    """Calls of ``removed`` methods under the project directory of ``roots``.

    ``within``: the given paths (only files under them are rewritten);
    ``skip``: files already rewritten by the migration; ``known``: the contents of
    files the migration read, by their real paths, every ``*.py`` of the directories
    ``walked`` among them (those are not walked again); ``trees``: the ``ast`` of
    files of ``known``, parsed from those contents."""
    known = known or {}
    trees = trees or {}
    edits = CallerEdits()
    if not removed or not roots:
        return edits
    by_name: dict[str, list[Removed]] = {}
    for r in removed:
        by_name.setdefault(r.method, []).append(r)
    group_files = {p.resolve() for r in removed for p in r.files}
    skipped = {p.resolve() for p in skip} | group_files
    allowed = [p.resolve() for p in within]
    projects = {search_root(root) for root in roots}
    needles = [f".{name}(".encode() for name in by_name]
    seen: set[Path] = set()
    done = frozenset(p.resolve() for p in walked if p.is_dir())
    for project in sorted(projects):
        for path in _files(project, known, done):
            resolved = path if path in known else path.resolve()  # (known: real paths)
            if resolved in seen or resolved in skipped:
                continue
            seen.add(resolved)
            if path in known:
                data = known[path]
                if len(data) > MAX_ANALYSED_SIZE:
                    continue
            else:
                try:  # regular files only (never blocks on a FIFO), of a size it parses
                    data = read_source(path, MAX_ANALYSED_SIZE, follow=False)
                except ReadError:
                    continue
            if not any(n in data for n in needles):
                continue
            if not _may_call(data, by_name, trees.get(path) if path in known else None):
                continue
            try:
                module = cst.parse_module(data)
            except cst.ParserSyntaxError:
                continue
            inside = any(resolved == a or a in resolved.parents for a in allowed)
            visitor = _Calls(by_name, rewrite=inside, module=module)
            new = module.visit(visitor)
            if visitor.changed:
                new = layout.wrap_long_statements(new, module.code, layout.line_limit(path))
                edits.rewritten[path] = (module.code, new.code)
                edits.groups[path] = sorted({g for r in visitor.used for g in r.groups})
                # the calls left, at their lines in the rewritten text
                visitor = _Calls(by_name, rewrite=False, module=new)
                new.visit(visitor)
                visitor.named = [(ln, r, w) for ln, r, w in visitor.named if w]
            for line, found, why in visitor.named:
                edits.named.append((path, line, describe(found, why)))
    return edits


def _may_call(data: bytes, methods: Mapping[str, object], tree: ast.Module | None = None) -> bool:
    """Whether the file may call one of ``methods`` as ``_Calls`` finds calls (``x.m(...)``,
    except ``self.m(...)`` in a class that defines ``m`` itself), read with ``ast``
    (``tree``: the file's, when already parsed) before any LibCST parse; True when
    ``ast`` cannot tell."""
    if tree is None:
        try:
            tree = ast.parse(data)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return True
    # every node, with the methods of the innermost class around it (no generator per
    # node: the order does not matter)
    stack: list[tuple[ast.AST, frozenset[str] | None]] = [(tree, None)]
    while stack:
        node, own = stack.pop()
        if isinstance(node, ast.ClassDef):
            own = frozenset(
                item.name
                for item in node.body
                if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            )
        elif isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute):
            name, receiver = node.func.attr, node.func.value
            mine = isinstance(receiver, ast.Name) and receiver.id == "self"
            if name in methods and not (mine and own is not None and name in own):
                return True
        for field_name in node._fields:
            value = getattr(node, field_name, None)
            if isinstance(value, list):
                stack.extend((child, own) for child in value if isinstance(child, ast.AST))
            elif isinstance(value, ast.AST):
                stack.append((value, own))
    return False


def describe(removed: Removed, why: str) -> str:
    """The note for a call left for a person (``why`` empty: the file lies outside
    the given paths)."""
    reason = why or "outside the given paths (give it too, to rewrite it)"
    return (
        f"calls {removed.runner}.{removed.method}, which the migration removes: "
        f"use {removed.replacement}(), which returns {removed.input_class}; "
        f"not rewritten: {reason}"
    )
