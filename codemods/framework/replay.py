"""The single-class rewrites replayed on the ``ast``, for ``migrate --check``: what the
verification of :mod:`codemods.framework.pipeline` reads, made without LibCST.

``--check`` writes nothing and shows no diff: what it prints of a file the single-class
codemods change (the file, the codemods, the refusals, the exit code) follows from the
analysis and from the verification of the rewritten code, which reads the rewritten
file's ``ast`` and, for ``# Driver-only`` comments, its text. :func:`replay` makes both
from the file as read, the way each rewrite changes it:

* ``super-dict`` (:mod:`codemods.super_dict`): the same classes, the same refusals
  (MIG202, MIG203) from :meth:`Project.dict_copy`, and a rewritten dict method whose
  statements are those the LibCST rewrite writes;
* ``driver-only`` (:mod:`codemods.driver_only`): the same refusals (MIG201) and the
  comment line written above each field it marks (a comment: the ``ast`` stays);
* ``self-return`` (:mod:`codemods.self_return`): the same annotations, ``cls(...)``
  calls, ``TypeVar`` line and ``typing`` imports.

Layout (line breaks, the place of a comment among others) is not replayed: the
verification compares findings and values without positions. Any shape the replay
does not follow exactly as the rewrite does (a class or a statement sharing a line with
another, a class name defined twice, a dict literal with ``**`` or non-string keys, the
fold of a wrapper worker) answers None: the file goes through LibCST.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TypeVar

from codemods.framework import registry
from codemods.toolkit.import_order import isort_key
from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.syntax import dotted
from runnercheck.contract import Contract, is_driver_only_comment
from runnercheck.records import Refused

SUPER_DICT = registry.SUPER_DICT.name
DRIVER_ONLY = registry.DRIVER_ONLY.name
SELF_RETURN = registry.SELF_RETURN.name
#: What ``driver-only`` writes above a field (:data:`codemods.driver_only.COMMENT`).
COMMENT = "# Driver-only: never broadcast; the other ranks hold its default."


_Node = TypeVar("_Node", bound=ast.AST)


class NotExact(Exception):
    """A shape the replay does not follow exactly: LibCST decides."""


@dataclass
class Replayed:
    #: the file's ``ast`` as read (given or parsed here; never changed)
    read: ast.Module
    #: the rewritten file's ``ast``, at the positions of the file as read: the
    #: statements the rewrites leave alone are the given tree's own nodes, a rewritten
    #: class is a copy, a new statement stands at the place of the one it joins
    tree: ast.Module
    #: the rewritten text (it differs from the file as read only by comment lines)
    text: str
    #: the codemods that change it, in the order the pipeline runs them
    applied: list[str] = field(default_factory=list)
    #: the classes they leave alone, with why
    refusals: list[Refused] = field(default_factory=list)
    #: per class, the fields ``driver-only`` marks with a comment line (``tree`` has no
    #: comments: :func:`codemods.framework.verify.rewritten_facts` reads the fields so)
    marked: dict[str, frozenset[str]] = field(default_factory=dict)
    #: the ``id`` of each class a rewrite copied into ``tree``
    copies: set[int] = field(default_factory=set)


def replay(
    project: Project,
    path: Path,
    text: str,
    select: Sequence[str],
    targets: set[str],
    contract: Contract,
    tree: ast.Module | None = None,
) -> Replayed | None:
    """The single-class codemods of ``select`` on ``path`` (its text as read, ``tree``:
    its ``ast`` when parsed already; it is not changed), or None when only LibCST can
    tell. ``targets``: the codemods the decision says may change it."""
    facts = project.modules.get(str(path))
    if facts is None or registry.FOLD_CONTROL_BROADCAST.name in targets:
        return None
    try:
        if tree is None:
            tree = ast.parse(text, filename=str(path))
        _plain_classes(tree, text)
        # a copy of the module's statement list; a statement is copied before it changes
        out = Replayed(tree, ast.Module(body=list(tree.body), type_ignores=[]), text)
        # each rewrite touches its own statements: the order does not change the result
        marked = DRIVER_ONLY in select and _driver_only(out, project, facts)
        driver_refusals, out.refusals = out.refusals, []
        merged = SUPER_DICT in select and _super_dict(out, project, facts, contract)
        returns = SELF_RETURN in select and _self_return(out, contract)
    except (NotExact, SyntaxError, ValueError, RecursionError):
        return None
    out.refusals += driver_refusals  # in the order the pipeline runs the codemods
    done = ((SUPER_DICT, merged), (DRIVER_ONLY, marked), (SELF_RETURN, returns))
    out.applied = [name for name, did in done if did]
    return out


# ------------------------------------------------------------------- shapes


def _lines(text: str) -> list[str]:
    return text.splitlines(keepends=True)


def _alone(block: Sequence[ast.stmt]) -> dict[int, bool]:
    """Per statement of a block (by ``id``): no other statement of it starts or ends on
    its lines (LibCST: a statement line holding one small statement)."""
    out: dict[int, bool] = {}
    for i, stmt in enumerate(block):
        before = block[i - 1] if i else None
        after = block[i + 1] if i + 1 < len(block) else None
        out[id(stmt)] = not (
            (before is not None and (before.end_lineno or before.lineno) >= stmt.lineno)
            or (after is not None and after.lineno <= (stmt.end_lineno or stmt.lineno))
        )
    return out


def _own_line(stmt: ast.stmt, block: Sequence[ast.stmt]) -> bool:
    return _alone(block)[id(stmt)]


def _statements(body: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """Every statement of ``body``, nested ones too (no expression is visited)."""
    stack = list(body)
    while stack:
        stmt = stack.pop()
        yield stmt
        for name in ("body", "orelse", "finalbody"):
            block = getattr(stmt, name, None)
            if isinstance(block, list):
                stack.extend(s for s in block if isinstance(s, ast.stmt))
        for handler in getattr(stmt, "handlers", ()):
            stack.extend(handler.body)
        for case in getattr(stmt, "cases", ()):
            stack.extend(case.body)


def _plain_classes(tree: ast.Module, text: str) -> None:
    """Classes each defined once (the facts keep one class of a name); the top-level
    ones with a body that is an indented block on lines of its own."""
    names: set[str] = set()
    for node in _statements(tree.body):
        if isinstance(node, ast.ClassDef):
            if node.name in names:
                raise NotExact(f"class {node.name} defined twice")
            names.add(node.name)
    lines: list[str] | None = None
    for stmt in tree.body:
        if not isinstance(stmt, ast.ClassDef):
            continue
        first = stmt.body[0]
        if first.lineno > stmt.lineno and first.col_offset > stmt.col_offset:
            if lines is None:
                lines = _lines(text)
            if not lines[first.lineno - 1][: first.col_offset].strip():
                continue
        raise NotExact(f"class {stmt.name}: a body on its header's line")


def _writable(out: Replayed, stmt: ast.ClassDef) -> ast.ClassDef:
    """``stmt`` of ``out.tree``, copied there first unless a rewrite copied it already:
    the class and the list of its statements (each stays the given tree's node until a
    rewrite changes it: :func:`_writable_item`)."""
    if id(stmt) in out.copies:
        return stmt
    copied = _forgotten(copy.copy(stmt))
    copied.body = list(stmt.body)
    out.tree.body[out.tree.body.index(stmt)] = copied
    out.copies.add(id(copied))
    return copied


def _writable_item(out: Replayed, cls: ast.ClassDef, index: int) -> ast.stmt:
    """Statement ``index`` of ``cls`` (a copy made by :func:`_writable`), copied there
    first, with everything under it, unless a rewrite copied it already."""
    item = cls.body[index]
    if id(item) in out.copies:
        return item
    copied = copy.deepcopy(item)
    for node in ast.walk(copied):
        _forgotten(node)
    cls.body[index] = copied
    out.copies.add(id(copied))
    return copied


def _forgotten(node: _Node) -> _Node:
    """``node`` without what the analysis remembered on it (e.g. a call's dotted name),
    which may change with the rewrite."""
    for key in [k for k in vars(node) if k not in node._fields + node._attributes]:
        delattr(node, key)
    return node


def _class_facts(facts: ModuleFacts, stmt: ast.stmt) -> ClassFacts | None:
    return facts.classes.get(stmt.name) if isinstance(stmt, ast.ClassDef) else None


def _refused(cls: ClassFacts, name: str, code: str, message: str) -> Refused:
    """``cls`` left alone by codemod ``name``, at its ``class`` line."""
    path = Path(cls.path)
    return Refused(name, code, path, cls.line, message, held_back=(f"{cls.name} ({path.name})",))


def _place(node: _Node, anchor: ast.AST | None) -> _Node:
    """``node`` and everything under it at ``anchor``'s position (a replayed statement
    has no text of its own; the verification compares no positions)."""
    for part in ast.walk(node):
        if "lineno" in part._attributes:
            for name in ("lineno", "col_offset", "end_lineno", "end_col_offset"):
                setattr(part, name, getattr(anchor, name, 1 if "lineno" in name else 0))
    return node


def _is_string(node: ast.expr) -> bool:
    return isinstance(node, ast.Constant) and isinstance(node.value, (str, bytes))


# --------------------------------------------------------------- super-dict


def _method(stmt: ast.ClassDef, name: str) -> ast.FunctionDef | ast.AsyncFunctionDef | None:
    for item in stmt.body:
        if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)) and item.name == name:
            return item
    return None


def _split(
    func: ast.FunctionDef | ast.AsyncFunctionDef,
) -> tuple[ast.stmt | None, ast.Dict, str, list[ast.stmt], ast.stmt] | None:
    """(docstring, literal, variable, middle statements, return), as
    :func:`codemods.super_dict._split` reads them."""
    body = list(func.body)
    alone = _alone(body)
    if not all(alone[id(s)] for s in body[:2] + body[-1:]):  # (LibCST: one small statement)
        raise NotExact(f"{func.name}: statements sharing a line")
    doc = None
    if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.JoinedStr):
        # (LibCST reads ``"a" f"b"`` as a docstring, ``f"b"`` as none)
        raise NotExact(f"{func.name}: an f-string first")
    if body and isinstance(body[0], ast.Expr) and _is_string(body[0].value):
        doc, body = body[0], body[1:]
    if len(body) < 2:
        return None
    first, last = body[0], body[-1]
    if not (isinstance(last, ast.Return) and isinstance(last.value, ast.Name)):
        return None
    target: ast.expr | None = None
    value: ast.expr | None = None
    if isinstance(first, ast.Assign) and len(first.targets) == 1:
        target, value = first.targets[0], first.value
    elif isinstance(first, ast.AnnAssign):
        target, value = first.target, first.value
    if not (isinstance(target, ast.Name) and isinstance(value, ast.Dict)):
        return None
    if target.id != last.value.id:
        return None
    return doc, value, target.id, body[1:-1], last


def _super_dict(out: Replayed, project: Project, facts: ModuleFacts, contract: Contract) -> bool:
    """Rewrite or refuse the classes :func:`codemods.super_dict.rewrite_module` does."""
    name = contract.as_dict_method
    changed = False
    for stmt in list(out.tree.body):
        cls = _class_facts(facts, stmt)
        found = project.dict_copy(cls) if cls is not None else None
        if found is None or cls is None:
            continue
        assert isinstance(stmt, ast.ClassDef)
        func = _method(stmt, name)
        parts = _split(func) if func is not None else None
        if func is None or parts is None:
            continue
        if found.missing:
            shared = len(found.parent_keys) - len(found.missing)
            out.refusals.append(
                _refused(
                    cls,
                    SUPER_DICT,
                    "MIG203",
                    f"{stmt.name} re-lists {shared} of {found.parent}'s "
                    f"{len(found.parent_keys)} keys (not {', '.join(found.missing)})",
                )
            )
            continue
        if not found.repeats_mutations:
            out.refusals.append(
                _refused(
                    cls,
                    SUPER_DICT,
                    "MIG202",
                    f"{stmt.name} does not repeat {found.parent}'s statements after "
                    "the dict; calling super() would reorder them",
                )
            )
            continue
        if found.own_keys and found.parent_mutations:
            out.refusals.append(
                _refused(
                    cls,
                    SUPER_DICT,
                    "MIG202",
                    f"{stmt.name} adds keys before {found.parent}'s own updates run; "
                    "calling super() would change which value wins",
                )
            )
            continue
        stmt = _writable(out, stmt)
        func = _method(stmt, name)
        assert func is not None
        copied = _writable_item(out, stmt, stmt.body.index(func))
        assert isinstance(copied, (ast.FunctionDef, ast.AsyncFunctionDef))
        func = copied
        parts = _split(func)
        assert parts is not None
        doc, literal, var, middle, ret = parts
        keys = literal.keys
        if not all(isinstance(k, ast.Constant) and isinstance(k.value, str) for k in keys):
            raise NotExact(f"{stmt.name}: a dict literal with ** or non-string keys")
        order = [k.value for k in keys if isinstance(k, ast.Constant)]
        keep = [order.index(k) for k in found.own_keys]
        first = ast.parse(f"{var} = super().{name}()\n").body[0]
        new_body: list[ast.stmt] = [doc] if doc is not None else []
        new_body.append(first)
        if found.own_keys:
            update = ast.parse(f"{var}.update({{}})\n").body[0]
            assert isinstance(update, ast.Expr) and isinstance(update.value, ast.Call)
            update.value.args[0] = ast.Dict(
                keys=[keys[i] for i in keep], values=[literal.values[i] for i in keep]
            )
            new_body.append(_place(update, literal))
        new_body.extend(middle[found.parent_mutations :])
        new_body.append(ret)
        _place(first, literal)
        func.body = new_body
        changed = True
    return changed


# -------------------------------------------------------------- driver-only


def _driver_only(out: Replayed, project: Project, facts: ModuleFacts) -> bool:
    """Mark the fields :func:`codemods.driver_only.rewrite_module` marks: a comment line
    above each in the text (the ``ast`` stays), and the fields in ``out.marked``."""
    inserts: dict[int, tuple[str, str]] = {}  # the (1-based) line a comment goes above
    for stmt in out.tree.body:
        cls = _class_facts(facts, stmt)
        if cls is None:
            continue
        assert isinstance(stmt, ast.ClassDef)
        if project.reads_unknown_parent(cls):
            out.refusals.append(
                _refused(
                    cls,
                    DRIVER_ONLY,
                    "MIG201",
                    f"{cls.name}: a base class of it is not in the given paths",
                )
            )
        wanted = {fld.name for fld in project.unbroadcast_fields(cls)}
        if not wanted:
            continue
        for item in stmt.body:
            if (
                isinstance(item, ast.AnnAssign)
                and isinstance(item.target, ast.Name)
                and item.target.id in wanted
            ):
                if not _own_line(item, stmt.body):
                    raise NotExact(f"{cls.name}.{item.target.id} shares a line")
                inserts[item.lineno] = (cls.name, item.target.id)
    if not inserts:
        return False
    lines = _lines(out.text)
    newline = "\r\n" if lines and lines[0].endswith("\r\n") else "\n"
    for lineno in sorted(inserts, reverse=True):
        line = lines[lineno - 1]
        indent = line[: len(line) - len(line.lstrip())]
        lines.insert(lineno - 1, f"{indent}{COMMENT}{newline}")
    out.text = "".join(lines)
    # each field reads as driver-only in the new text, as the facts of the rewrite say
    new_lines = out.text.splitlines()
    marked: dict[str, set[str]] = {}
    for shift, lineno in enumerate(sorted(inserts), start=1):
        if not is_driver_only_comment(new_lines, lineno + shift):
            raise NotExact(f"the comment above line {lineno} does not read as driver-only")
        cls_name, name = inserts[lineno]
        marked.setdefault(cls_name, set()).add(name)
    out.marked = {name: frozenset(fields) for name, fields in marked.items()}
    return True


# -------------------------------------------------------------- self-return


def _top_level(tree: ast.Module) -> list[ast.stmt]:
    """Top-level statements alone on their lines (LibCST: one small statement a line)."""
    alone = _alone(tree.body)
    return [s for s in tree.body if alone[id(s)]]


def _imported_names(tree: ast.Module) -> set[str]:
    """As :func:`codemods.toolkit.imports.imported_names`."""
    out: set[str] = set()
    for stmt in _top_level(tree):
        if isinstance(stmt, ast.ImportFrom) and not any(a.name == "*" for a in stmt.names):
            out.update(a.asname or a.name for a in stmt.names)
        elif isinstance(stmt, ast.Import):
            out.update(a.asname or a.name.split(".")[0] for a in stmt.names)
    return out


def _self_imported(tree: ast.Module) -> bool:
    return any(
        isinstance(stmt, ast.ImportFrom)
        and stmt.module in {"typing", "typing_extensions"}
        and any(a.name == "Self" and a.asname is None for a in stmt.names)
        for stmt in _top_level(tree)
    )


def _returns_class(func: ast.FunctionDef | ast.AsyncFunctionDef, cls_name: str) -> bool:
    ann = func.returns
    if isinstance(ann, ast.Name):
        return ann.id == cls_name
    return isinstance(ann, ast.Constant) and isinstance(ann.value, str) and ann.value == cls_name


def _fixed_returns(stmt: ast.ClassDef, contract: Contract) -> list[int]:
    """The positions in ``stmt``'s body of the classmethods ``from_broadcasted_tensor_dict``
    with parameters annotated to return ``stmt``'s own class."""
    found: list[int] = []
    for index, item in enumerate(stmt.body):
        if (
            isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            and item.name == contract.from_dict_method
            and any(dotted(d) == "classmethod" for d in item.decorator_list)
            and _returns_class(item, stmt.name)
            and item.args.args
        ):
            if item.args.posonlyargs:
                raise NotExact(f"{stmt.name}.{item.name}: positional-only parameters")
            found.append(index)
    return found


def _self_return(out: Replayed, contract: Contract) -> bool:
    """Rewrite the classes :func:`codemods.self_return.rewrite_module` does."""
    tree = out.tree
    if not all(_alone(tree.body).values()):
        raise NotExact("top-level statements sharing a line")
    use_self = _self_imported(tree)
    taken = _imported_names(tree) | {
        s.name
        for s in tree.body
        if isinstance(s, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
    }
    changed = False
    body: list[ast.stmt] = []
    for stmt in tree.body:
        if not isinstance(stmt, ast.ClassDef):
            body.append(stmt)
            continue
        name = stmt.name
        typevar = f"T{name}"
        touched = False
        for index in _fixed_returns(stmt, contract):
            if not use_self and typevar in taken:
                continue
            stmt = _writable(out, stmt)
            item = _writable_item(out, stmt, index)
            assert isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef))
            first = item.args.args[0]
            first.annotation = (
                None if use_self else _place(ast.parse(f"Type[{typevar}]", mode="eval").body, first)
            )
            returns = ast.parse("Self" if use_self else typevar, mode="eval").body
            item.returns = _place(returns, item.returns)
            for node in ast.walk(ast.Module(body=item.body, type_ignores=[])):
                if (
                    isinstance(node, ast.Call)
                    and isinstance(node.func, ast.Name)
                    and node.func.id == name
                ):
                    node.func.id = "cls"
            touched = True
        if touched and not use_self:
            typevar_line = ast.parse(f'{typevar} = TypeVar("{typevar}", bound="{name}")\n').body[0]
            body.append(_place(typevar_line, stmt))
            taken.add(typevar)
        body.append(stmt)
        changed = changed or touched
    if not changed:
        return False
    tree.body = body
    if not use_self:
        _add_typing(tree, ["Type", "TypeVar"])
    return True


def _add_typing(tree: ast.Module, names: list[str]) -> None:
    """As :func:`codemods.toolkit.imports.add_imports` with ``from typing import <names>``."""
    missing = [n for n in names if n not in _imported_names(tree)]
    if not missing:
        return
    for stmt in _top_level(tree):
        if (
            isinstance(stmt, ast.ImportFrom)
            and stmt.level == 0
            and stmt.module == "typing"
            and not any(a.name == "*" for a in stmt.names)
        ):
            extended = copy.copy(stmt)  # (the statement may be the given tree's)
            extended.names = _extended(
                stmt.names, [_place(ast.alias(name=n), stmt) for n in missing]
            )
            tree.body[tree.body.index(stmt)] = extended
            return
    new = ast.ImportFrom(
        module="typing", names=[ast.alias(name=n) for n in sorted(missing)], level=0
    )
    body = tree.body
    position = _import_position(body)
    body.insert(position, _place(new, body[position - 1] if position else body[0]))


def _extended(aliases: list[ast.alias], new: list[ast.alias]) -> list[ast.alias]:
    """``aliases`` with ``new`` added: each in its sorted place when they are sorted, else
    at the end."""
    out = list(aliases)
    in_order = [a.name for a in out] == sorted((a.name for a in out), key=isort_key)
    for alias in new:
        position = len(out)
        if in_order:
            later = (i for i, a in enumerate(out) if isort_key(a.name) > isort_key(alias.name))
            position = next(later, position)
        out.insert(position, alias)
    return out


def _import_position(body: list[ast.stmt]) -> int:
    """After the leading import block, or after the docstring when there is none (as
    :func:`codemods.toolkit.imports.add_imports` places a new ``from`` import)."""

    alone = _alone(body)

    def is_import(s: ast.stmt, block: dict[int, bool] = alone) -> bool:
        return isinstance(s, (ast.Import, ast.ImportFrom)) and block[id(s)]

    def is_future(s: ast.stmt) -> bool:
        return isinstance(s, ast.ImportFrom) and s.module == "__future__" and s.level == 0

    def docstring_or_import(s: ast.stmt) -> bool:
        if is_import(s):
            return True
        if isinstance(s, (ast.Try, ast.If)):
            inner = _alone(s.body)
            return all(is_import(t, inner) for t in s.body)
        return False

    first = next((i for i, s in enumerate(body) if is_import(s) and not is_future(s)), None)
    last = None
    for i, s in enumerate(body):
        if is_import(s):
            last = i
        elif first is not None and i > first and not docstring_or_import(s):
            break
    if last is not None:
        return last + 1
    if body and isinstance(body[0], ast.Expr) and _is_string(body[0].value):
        return 1
    return 0
