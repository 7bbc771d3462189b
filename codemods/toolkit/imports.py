"""Adding and removing imports at the top of a module, touching only the
import statements concerned (everything else stays byte-identical)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence

import libcst as cst

from codemods.toolkit import cstutil
from codemods.toolkit.import_order import isort_key


def _is_import(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return isinstance(small, (cst.Import, cst.ImportFrom))


def _is_future(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return (
        isinstance(small, cst.ImportFrom)
        and isinstance(small.module, cst.Name)
        and small.module.value == "__future__"
    )


def _module_text(node: cst.ImportFrom) -> str:
    dots = "." * len(node.relative)
    return dots + (cstutil.dotted(node.module) or "") if node.module is not None else dots


def imported_names(module: cst.Module) -> set[str]:
    """Names bound by the module's top-level imports."""
    out: set[str] = set()
    for statement in module.body:
        small = cstutil.single_small(statement)
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            for alias in small.names:
                out.add(
                    cstutil.code(alias.asname.name) if alias.asname else cstutil.code(alias.name)
                )
        elif isinstance(small, cst.Import):
            for alias in small.names:
                if alias.asname:
                    out.add(cstutil.code(alias.asname.name))
                else:
                    out.add(cstutil.code(alias.name).split(".")[0])
    return out


def add_imports(
    module: cst.Module,
    plain: Iterable[str] = (),
    from_imports: Sequence[tuple[str, Sequence[str]]] = (),
) -> cst.Module:
    """Ensure ``import <plain>`` and ``from <module> import <names>``.

    Names already bound at top level are skipped; an existing ``from m import``
    statement for the same module gets the missing names; new statements go
    at the end of the leading import block (plain imports at its start)."""
    have = imported_names(module)
    body: list[cst.BaseStatement] = list(module.body)
    first_import = next(
        (i for i, s in enumerate(body) if _is_import(s) and not _is_future(s)), None
    )
    last_import = None
    for i, statement in enumerate(body):
        if _is_import(statement):
            last_import = i
        elif (
            first_import is not None and i > first_import and not _is_docstring_or_import(statement)
        ):
            break
    new_after: list[cst.BaseStatement] = []
    for mod, names in from_imports:
        missing = [n for n in names if n not in have]
        if not missing:
            continue
        existing = None
        for i, statement in enumerate(body):
            small = cstutil.single_small(statement)
            if (
                isinstance(small, cst.ImportFrom)
                and not isinstance(small.names, cst.ImportStar)
                and _module_text(small) == mod
            ):
                existing = (i, statement, small)
                break
        if existing is not None:
            i, statement, small = existing
            assert isinstance(statement, cst.SimpleStatementLine)
            body[i] = statement.with_changes(body=[_extend(small, missing)])
        else:
            new_after.extend(
                cstutil.parse_statements(f"from {mod} import {', '.join(sorted(missing))}\n")
            )
        have.update(missing)
    new_before = [
        cstutil.parse_statements(f"import {name}\n")[0] for name in plain if name not in have
    ]
    if last_import is None:
        insert_at = _after_docstring(body)
        body[insert_at:insert_at] = [*new_before, *new_after]
    else:
        body[last_import + 1 : last_import + 1] = new_after
        assert first_import is not None
        if new_before:
            anchor = body[first_import]
            new_before[0] = cstutil.with_leading(new_before[0], cstutil.leading(anchor))
            body[first_import] = cstutil.with_leading(anchor, [])
            body[first_import:first_import] = new_before
    return module.with_changes(body=body)


def _is_docstring_or_import(statement: cst.BaseStatement) -> bool:
    if _is_import(statement):
        return True
    if isinstance(statement, cst.Try):
        return all(_is_import(s) for s in cstutil.body_of(statement.body))
    if isinstance(statement, cst.If):
        return all(_is_import(s) for s in cstutil.body_of(statement.body))
    return False


def _after_docstring(body: Sequence[cst.BaseStatement]) -> int:
    index = 0
    if body:
        small = cstutil.single_small(body[0])
        if isinstance(small, cst.Expr) and isinstance(
            small.value, (cst.SimpleString, cst.ConcatenatedString)
        ):
            index = 1
    while index < len(body) and _is_future(body[index]):
        index += 1
    return index


def _extend(node: cst.ImportFrom, names: Sequence[str]) -> cst.ImportFrom:
    assert not isinstance(node.names, cst.ImportStar)
    aliases = list(node.names)
    existing = [cstutil.code(a.name) for a in aliases]
    sorted_before = existing == sorted(existing, key=isort_key)
    template_comma = (
        aliases[0].comma
        if len(aliases) > 1
        else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
    )
    last_comma = aliases[-1].comma
    aliases[-1] = aliases[-1].with_changes(comma=template_comma)
    for name in names:
        alias = cst.ImportAlias(name=cst.Name(name), comma=template_comma)
        if sorted_before:
            position = len(aliases)
            for i, other in enumerate(aliases):
                if isort_key(cstutil.code(other.name)) > isort_key(name):
                    position = i
                    break
            aliases.insert(position, alias)
        else:
            aliases.append(alias)
    aliases[-1] = aliases[-1].with_changes(comma=last_comma)
    for i in range(len(aliases) - 1):
        if isinstance(aliases[i].comma, cst.MaybeSentinel):
            aliases[i] = aliases[i].with_changes(comma=template_comma)
    return node.with_changes(names=aliases)


def remove_unused(module: cst.Module, name: str, check_reads: bool = True) -> cst.Module:
    """Drop ``name`` from top-level ``from ... import`` lists when nothing reads it
    (``check_reads=False``: the caller knows)."""
    if check_reads and any(n.value == name for n in cstutil.name_uses(module)[0]):
        return module
    body: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] = []
    for original in module.body:
        statement: cst.BaseStatement = original
        if carry:
            statement = cstutil.with_leading(statement, [*carry, *cstutil.leading(statement)])
            carry = []
        small = cstutil.single_small(statement)
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            aliases = list(small.names)
            keep = [
                a
                for a in aliases
                if not (a.asname is None and isinstance(a.name, cst.Name) and a.name.value == name)
            ]
            if len(keep) != len(aliases):
                if not keep:
                    carry = cstutil.leading(statement)
                    continue
                if keep[-1] is not aliases[-1]:
                    keep[-1] = keep[-1].with_changes(comma=cst.MaybeSentinel.DEFAULT)
                assert isinstance(statement, cst.SimpleStatementLine)
                statement = statement.with_changes(body=[small.with_changes(names=keep)])
        body.append(statement)
    return module.with_changes(body=body)


def remove_names(module: cst.Module, code: str, names: set[str]) -> tuple[cst.Module, str]:
    """Drop ``names`` from the module's top-level ``from ... import`` statements and
    return the new module and its text (``code`` is ``module.code``). Only the
    statements down to the last import touched are printed again (imports sit at
    the top of a file); the rest of the text is reused as is."""
    new = remove_unused_many(module, names)
    touched = [i for i, s in enumerate(module.body) if _aliases_in(s, names)]
    if not touched:
        return new, code
    offset = len("".join(cstutil.node_code(module, line) for line in module.header))
    pieces = [code[:offset]]
    for statement in module.body[: touched[-1] + 1]:
        text = cstutil.node_code(module, statement)
        if code[offset : offset + len(text)] != text:
            return new, cstutil.module_code(new)  # unexpected layout: print the whole module
        offset += len(text)
        hit = _aliases_in(statement, names)
        if not hit:
            pieces.append(text)
        elif hit == "all":  # removed: its comment lines stay where it was
            pieces.append(
                "".join(cstutil.node_code(module, line) for line in cstutil.leading(statement))
            )
        else:
            edited = remove_unused_many(cst.Module(body=[statement]), names).body[0]
            pieces.append(cstutil.node_code(module, edited))
    pieces.append(code[offset:])
    return new, "".join(pieces)


def _aliases_in(statement: cst.BaseStatement, names: set[str]) -> str:
    """ "all" / "some" / "" of a ``from ... import`` statement's plain names in ``names``."""
    small = cstutil.single_small(statement)
    if not isinstance(small, cst.ImportFrom) or isinstance(small.names, cst.ImportStar):
        return ""
    hits = [
        a.asname is None and isinstance(a.name, cst.Name) and a.name.value in names
        for a in small.names
    ]
    return "all" if all(hits) else "some" if any(hits) else ""


def remove_unused_many(module: cst.Module, names: set[str]) -> cst.Module:
    for name in sorted(names):
        module = remove_unused(module, name, check_reads=False)
    return module
