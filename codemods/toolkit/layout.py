"""The target's line length, and lines the migration writes kept within it.

:func:`line_limit` reads the limit the target enforces from the nearest
configuration above it (ruff's ``line-length``, black's ``line-length``, yapf's
``column_limit``, flake8's ``max-line-length``). The first directory holding any of
the configuration files decides. When none says and no formatter is named, the
column limit of the style the files follow
(:func:`codemods.toolkit.formatting.inferred_limit`), else the longest line they have, at
most 80.

:func:`wrap_long_statements` re-lays out, within that limit, the statements of a
rewritten module that the migration wrote or changed and that are too long: a call's
arguments move onto their own line (then one per line), a long call chain is put
in parentheses and broken before its last attribute, a ``from m import ...`` is
parenthesised and filled up to the limit. Lines as they were in the original file
are never touched, even when they are too long.
"""

from __future__ import annotations

import configparser
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

import libcst as cst

from codemods.toolkit import cstutil
from codemods.toolkit.kept_text import Kept
from codemods.toolkit.positions import Measured, measure_sizes
from runnercheck.errors import ConfigError
from runnercheck.tomlfile import load_toml

DEFAULT_LIMIT = 80
_INI_FILES = (("setup.cfg", "flake8"), ("tox.ini", "flake8"), (".flake8", "flake8"))


def _from_pyproject(path: Path) -> int | None:
    try:
        data = load_toml(path)
    except ConfigError:  # unreadable, not TOML, nested too deep: says no limit
        return None
    tool = data.get("tool")
    tables = tool if isinstance(tool, dict) else {}
    for name, key in (("ruff", "line-length"), ("black", "line-length"), ("yapf", "column_limit")):
        table = tables.get(name)
        value = table.get(key) if isinstance(table, dict) else None
        if isinstance(value, int) and value > 0:
            return value
    return None


def _from_ruff_toml(path: Path) -> int | None:
    try:
        value = load_toml(path).get("line-length")
    except ConfigError:
        return None
    return value if isinstance(value, int) and value > 0 else None


def _from_ini(path: Path, sections: Sequence[str], keys: Sequence[str]) -> int | None:
    parser = configparser.ConfigParser()
    try:
        parser.read(path, encoding="utf-8")
    except (OSError, configparser.Error, UnicodeDecodeError):
        return None
    for section in sections:
        for key in keys:
            value = parser.get(section, key, fallback=None)
            if value is not None and value.strip().isdigit():
                return int(value.strip())
    return None


def line_limit(start: Path) -> int:
    """The line length the code at ``start`` (a file or directory) is held to."""
    here = (start if start.is_dir() else start.parent).resolve()
    for directory in [here, *here.parents]:
        found = False
        for name in ("ruff.toml", ".ruff.toml"):
            if (directory / name).is_file():
                found = True
                value = _from_ruff_toml(directory / name)
                if value is not None:
                    return value
        if (directory / "pyproject.toml").is_file():
            found = True
            value = _from_pyproject(directory / "pyproject.toml")
            if value is not None:
                return value
        if (directory / ".style.yapf").is_file():
            found = True
            value = _from_ini(directory / ".style.yapf", ["style"], ["column_limit"])
            if value is not None:
                return value
        for name, _section in _INI_FILES:
            if (directory / name).is_file():
                found = True
                value = _from_ini(
                    directory / name,
                    ["flake8", "pycodestyle", "yapf"],
                    ["max-line-length", "max_line_length", "column_limit"],
                )
                if value is not None:
                    return value
        if found or (directory / ".git").exists():
            break
    # nothing says: the limit of the style the files follow (80 at most when none fits)
    from codemods.toolkit.formatting import find_formatter, inferred_limit

    if find_formatter(here) is not None:
        return DEFAULT_LIMIT
    return inferred_limit(here)


# ------------------------------------------------------------------- re-layout


def _newline_ws(extra: str) -> cst.ParenthesizedWhitespace:
    """A line break inside brackets, then the block's indentation and ``extra``."""
    return cst.ParenthesizedWhitespace(
        first_line=cst.TrailingWhitespace(),
        empty_lines=[],
        indent=True,
        last_line=cst.SimpleWhitespace(extra),
    )


def _hugged(call: cst.Call, extra: str) -> cst.Call:
    """``f(a, b)`` -> ``f(\\n    a, b\\n)``."""
    args = list(call.args)
    last = args[-1].with_changes(
        comma=cst.MaybeSentinel.DEFAULT, whitespace_after_arg=_newline_ws(extra)
    )
    return call.with_changes(
        whitespace_before_args=_newline_ws(extra + "    "), args=[*args[:-1], last]
    )


def _one_per_line(call: cst.Call, extra: str) -> cst.Call:
    """``f(a, b)`` -> ``f(\\n    a,\\n    b,\\n)``."""
    args = []
    for index, arg in enumerate(call.args):
        last = index == len(call.args) - 1
        after = _newline_ws(extra if last else extra + "    ")
        args.append(
            arg.with_changes(
                comma=cst.Comma(whitespace_after=after),
                whitespace_after_arg=cst.SimpleWhitespace(""),
            )
        )
    return call.with_changes(whitespace_before_args=_newline_ws(extra + "    "), args=args)


def _fluent(value: cst.Call, extra: str) -> cst.BaseExpression | None:
    """``a.b.c(x)`` -> ``(\\n    a.b\\n    .c(x)\\n)``."""
    func = value.func
    if not isinstance(func, cst.Attribute):
        return None
    broken = func.with_changes(dot=cst.Dot(whitespace_before=_newline_ws(extra + "    ")))
    return value.with_changes(
        func=broken,
        lpar=[cst.LeftParen(whitespace_after=_newline_ws(extra + "    "))],
        rpar=[cst.RightParen(whitespace_before=_newline_ws(extra))],
    )


def _parenthesized(value: cst.BaseExpression, extra: str) -> cst.BaseExpression:
    """``x = <value>`` -> ``x = (\\n    <value>\\n)``."""
    return value.with_changes(
        lpar=[cst.LeftParen(whitespace_after=_newline_ws(extra + "    "))],
        rpar=[cst.RightParen(whitespace_before=_newline_ws(extra))],
    )


def _broken_test(test: cst.BaseExpression) -> cst.BaseExpression | None:
    """``a and b or c`` -> ``(\n    a\n    and b\n    or c\n)`` (an ``if``'s test)."""
    if not isinstance(test, cst.BooleanOperation) or test.lpar:
        return None

    def broken(node: cst.BaseExpression) -> cst.BaseExpression:
        if isinstance(node, cst.BooleanOperation) and not node.lpar:
            return node.with_changes(
                left=broken(node.left),
                operator=node.operator.with_changes(whitespace_before=_newline_ws("    ")),
            )
        return node

    return broken(test).with_changes(
        lpar=[cst.LeftParen(whitespace_after=_newline_ws("    "))],
        rpar=[cst.RightParen(whitespace_before=_newline_ws(""))],
    )


def _value_of(small: cst.BaseSmallStatement) -> cst.BaseExpression | None:
    if isinstance(small, (cst.Assign, cst.AugAssign, cst.Expr, cst.Return)):
        return small.value
    if isinstance(small, cst.AnnAssign):
        return small.value
    if isinstance(small, cst.Raise):
        return small.exc
    return None


def _with_value(small: cst.BaseSmallStatement, value: cst.BaseExpression) -> cst.BaseSmallStatement:
    if isinstance(small, cst.Raise):
        return small.with_changes(exc=value)
    return small.with_changes(value=value)


def _fits(module: cst.Module, statement: cst.BaseStatement, indent: int, limit: int) -> bool:
    text = cstutil.node_code(module, statement)
    lines = text.rstrip("\n").split("\n")
    # continuation lines in brackets are written without the block's indentation
    return all(indent + len(line) <= limit for line in lines)


def _import_packed(small: cst.ImportFrom, limit: int) -> cst.ImportFrom:
    """``from m import a, b, ...`` parenthesised and filled up to the limit."""
    assert not isinstance(small.names, cst.ImportStar)
    where = "." * len(small.relative)
    if small.module is not None:
        where += cstutil.code(small.module)
    head = f"from {where} import ("
    column = len(head)
    names = list(small.names)
    out: list[cst.ImportAlias] = []
    width = column
    for index, alias in enumerate(names):
        text = cstutil.code(alias.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        last = index == len(names) - 1
        need = len(text) + (2 if not last else 1)
        if out and width + need > limit:
            prev = out[-1]
            out[-1] = prev.with_changes(
                comma=cst.Comma(
                    whitespace_after=cst.ParenthesizedWhitespace(
                        first_line=cst.TrailingWhitespace(),
                        empty_lines=[],
                        indent=False,
                        last_line=cst.SimpleWhitespace(" " * column),
                    )
                )
            )
            width = column
        comma = (
            cst.MaybeSentinel.DEFAULT
            if last
            else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
        )
        out.append(alias.with_changes(comma=comma))
        width += need
    return small.with_changes(names=out, lpar=cst.LeftParen(), rpar=cst.RightParen())


def _dict_entries(value: cst.Dict, indent: int, limit: int) -> cst.Dict:
    """The entries of a dict laid out one per line that are too long: the value
    moves onto the next line (``"key":\\n    value``)."""
    elements = list(value.elements)
    for index, element in enumerate(elements):
        if not isinstance(element, cst.DictElement):
            continue
        before = value.lbrace.whitespace_after if index == 0 else elements[index - 1].comma
        if isinstance(before, cst.Comma):
            before = before.whitespace_after
        if not isinstance(before, cst.ParenthesizedWhitespace):
            continue
        column = (indent if before.indent else 0) + len(before.last_line.value)
        text = cstutil.code(element.with_changes(comma=cst.MaybeSentinel.DEFAULT))
        if "\n" in text or column + len(text) + 1 <= limit:
            continue
        elements[index] = element.with_changes(
            whitespace_after_colon=cst.ParenthesizedWhitespace(
                first_line=cst.TrailingWhitespace(),
                empty_lines=[],
                indent=before.indent,
                last_line=cst.SimpleWhitespace(before.last_line.value + "    "),
            )
        )
    return value.with_changes(elements=elements)


_Headed = TypeVar("_Headed", cst.If, cst.While)


class _Wrapper(cst.CSTTransformer):
    def __init__(
        self, module: cst.Module, targets: set[int], limit: int, ancestors: set[int]
    ) -> None:
        self.module = module
        self.targets = targets
        self.limit = limit
        self.ancestors = ancestors
        self.depth = 0
        #: per target (by ``id``): what it became
        self.laid_out: dict[int, cst.CSTNode] = {}

    def on_leave(
        self, original_node: cstutil.N, updated_node: cstutil.N
    ) -> cstutil.N | cst.RemovalSentinel | cst.FlattenSentinel[cstutil.N]:
        key = id(original_node)
        if key not in self.ancestors and key not in self.targets:
            return updated_node  # (neither its visit_ nor its leave_ method is called)
        result = super().on_leave(original_node, updated_node)
        if key in self.targets and isinstance(result, cst.CSTNode):
            self.laid_out[key] = result
        return result

    def on_visit(self, node: cst.CSTNode) -> bool:
        # the children of a node that holds no target are left as they are, unvisited
        return id(node) in self.ancestors and super().on_visit(node)

    def visit_IndentedBlock(self, node: cst.IndentedBlock) -> None:
        self.depth += 1

    def leave_IndentedBlock(
        self, original_node: cst.IndentedBlock, updated_node: cst.IndentedBlock
    ) -> cst.IndentedBlock:
        self.depth -= 1
        return updated_node

    def leave_If(self, original_node: cst.If, updated_node: cst.If) -> cst.If:
        return self._header(original_node, updated_node)

    def leave_While(self, original_node: cst.While, updated_node: cst.While) -> cst.While:
        return self._header(original_node, updated_node)

    def _header(self, original: _Headed, updated: _Headed) -> _Headed:
        """A written ``if``/``elif``/``while`` line that is too long: its boolean test
        in parentheses, one operand per line."""
        if id(original) not in self.targets:
            return updated
        test = _broken_test(updated.test)
        return updated if test is None else updated.with_changes(test=test)

    def leave_SimpleStatementLine(
        self, original_node: cst.SimpleStatementLine, updated_node: cst.SimpleStatementLine
    ) -> cst.SimpleStatementLine:
        if id(original_node) not in self.targets or len(updated_node.body) != 1:
            return updated_node
        indent = len(self.module.default_indent) * self.depth
        small = updated_node.body[0]
        if isinstance(small, cst.ImportFrom) and not isinstance(small.names, cst.ImportStar):
            return updated_node.with_changes(body=[_import_packed(small, self.limit)])
        value = _value_of(small)
        if isinstance(value, cst.Dict):
            laid = _dict_entries(value, indent, self.limit)
            return updated_node.with_changes(body=[_with_value(small, laid)])
        if value is None or "\n" in cstutil.node_code(self.module, small):
            return updated_node  # nothing to wrap, or laid out over several lines already
        candidates: list[Callable[[], cst.BaseExpression | None]] = []
        if isinstance(value, cst.Call) and value.args:
            call = value
            candidates += [lambda: _hugged(call, ""), lambda: _one_per_line(call, "")]
        if isinstance(small, (cst.Assign, cst.AnnAssign)) and not value.lpar:
            candidates.append(lambda: _parenthesized(value, ""))
        if isinstance(value, cst.Call):
            chained = value
            candidates.append(lambda: _fluent(chained, ""))
        for make in candidates:
            candidate = make()
            if candidate is None:
                continue
            statement = updated_node.with_changes(body=[_with_value(small, candidate)])
            if _fits(self.module, statement, indent, self.limit):
                return statement
        return updated_node


def wrap_long_statements(
    module: cst.Module, original: str, limit: int, kept: Kept | None = None
) -> cst.Module:
    """``module`` with the too-long statements it does not share with ``original``
    laid out within ``limit`` columns (where one of the forms above fits). ``kept``:
    the text of the statements of the module parsed from ``original`` (those
    ``module`` still holds are written as they were read, not printed)."""
    # the code, and the statements' sizes should it be long
    measured = measure_sizes(module, kept)
    read = set(original.splitlines())
    lines = measured.code.splitlines()
    long = {n for n, line in enumerate(lines, 1) if len(line) > limit and line not in read}
    if not long:
        return module
    finder = _LongStatements(measured, lines, long, limit)
    finder.container(module, 1)
    if not finder.targets:
        return module
    wrapper = _Wrapper(module, finder.targets, limit, finder.ancestors)
    wrapped = module.visit(wrapper)
    code = _spliced(module, measured.code, finder.spans, wrapper.laid_out)
    if code is not None:
        cstutil.remember_code(wrapped, code)
    return wrapped


def _spliced(
    module: cst.Module,
    code: str,
    spans: dict[int, _Span],
    laid_out: dict[int, cst.CSTNode],
) -> str | None:
    """The code of the wrapped module without printing it again: ``code`` with the
    lines of each statement laid out anew replaced by its new print, indented as where
    it stands. None where that cannot be told (an ``elif`` laid out, a module that does
    not end with a line break): the caller prints the module."""
    if not module.has_trailing_newline or not code.endswith(("\n", "\r")):
        return None
    lines = code.split("\n")  # the spans count "\n" (a "\r\n" line keeps its "\r")
    out: list[str] = []
    done = 0  # lines of ``code`` used up
    for key, span in sorted(spans.items(), key=lambda item: item[1].line):
        first = span.line - 1
        if first < done:
            continue  # inside a statement already laid out anew
        if not span.in_block:
            return None
        new = laid_out.get(key)
        if new is None:
            continue
        text = _printed_within(new, module, span.indents)
        if text is None:
            return None
        out.append("\n".join(lines[done:first]) + ("\n" if first > done else ""))
        out.append(text)
        done = first + span.size
    out.append("\n".join(lines[done:]))
    return "".join(out)


#: Nodes that hold statements (searched for long lines, block by block).
_CONTAINERS = cstutil.BLOCK_HOLDERS
#: What ends a compound statement after its header: blocks, and the lines between them.
_TAIL = (*_CONTAINERS, cst.EmptyLine, cst.TrailingWhitespace)


def _printed_within(node: cst.CSTNode, module: cst.Module, indents: tuple[str, ...]) -> str | None:
    """``node``'s code as printed in ``module`` inside blocks indented by ``indents``;
    None with a LibCST whose internal code generation this cannot use."""
    try:
        from codemods.toolkit.codegen_positions import printed_within

        return printed_within(node, module, indents)
    except (ImportError, AttributeError, TypeError):
        return None


@dataclass(frozen=True)
class _Span:
    """Where a statement stands in the printed module: its first line (1-based), its
    line breaks, the indents of the blocks around it, and whether it is a statement of a
    block (not an ``elif``)."""

    line: int
    size: int
    indents: tuple[str, ...]
    in_block: bool


class _LongStatements:
    """The statements on the long lines, found from the text: a block's first line is
    counted from the code of the statements before it (or after it, for the blocks that
    end a compound statement), and only blocks that hold a long line are searched
    further (the sizes come from one measured print of the module)."""

    def __init__(self, measured: Measured, lines: list[str], long: set[int], limit: int) -> None:
        self.measured = measured
        self.lines = lines
        self.long = sorted(long)
        self.limit = limit
        self.targets: set[int] = set()
        #: per target (by ``id``): where it stands
        self.spans: dict[int, _Span] = {}
        #: The containers on the way to a target (the transformer visits only these).
        self.ancestors: set[int] = set()

    def _holds_long(self, first: int, last: int) -> bool:
        return any(first <= n <= last for n in self.long)

    def _size(self, node: cst.CSTNode) -> int:
        return self.measured.size(node)

    def container(
        self,
        node: cst.CSTNode,
        start: int,
        indents: tuple[str, ...] = (),
        in_block: bool = True,
    ) -> bool:
        """Search ``node``, whose code starts on line ``start`` inside blocks indented by
        ``indents`` (``in_block``: a statement of a block); whether it holds a target."""
        found = False
        if isinstance(node, (cst.If, cst.While)) and start + len(node.leading_lines) in self.long:
            self._target(node, start, indents, in_block)
            found = True
        if isinstance(node, (cst.Module, cst.IndentedBlock)):
            if isinstance(node, cst.IndentedBlock):
                indent = node.indent
                indents = (
                    *indents,
                    self.measured.module.default_indent if indent is None else indent,
                )
            line = start
            for child in cstutil.children(node):  # lines, then statements, in turn
                size = self._size(child)
                found = self._child(child, line, size, indents, True) or found
                line += size
        else:  # a compound statement: its header, then its blocks up to its end
            line = start + self._size(node)
            for child in reversed(cstutil.children(node)):
                if not isinstance(child, _TAIL):
                    break
                size = self._size(child)
                line -= size
                found = self._child(child, line, size, indents, False) or found
        if found:
            self.ancestors.add(id(node))
        return found

    def _target(
        self, node: cst.CSTNode, line: int, indents: tuple[str, ...], in_block: bool
    ) -> None:
        self.targets.add(id(node))
        self.spans[id(node)] = _Span(line, self._size(node), indents, in_block)

    def _child(
        self, child: cst.CSTNode, line: int, size: int, indents: tuple[str, ...], in_block: bool
    ) -> bool:
        if isinstance(child, cst.SimpleStatementLine):
            if self._holds_long(line + len(child.leading_lines), line + max(size, 1) - 1):
                self._target(child, line, indents, in_block)
                return True
        elif (
            isinstance(child, _CONTAINERS)
            and id(child) not in self.measured.written  # its lines are the lines read
            and self._holds_long(line, line + size)
        ):
            return self.container(child, line, indents, in_block)
        return False
