"""Small LibCST helpers shared by the codemods: names read and bound, name
substitution, re-indentation of moved code, and recognisers for the contract's
idioms (``self.<flag>``, ``broadcast_tensor_dict(...)``)."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import TypeVar, cast

import libcst as cst

from codemods.toolkit import node_index
from codemods.toolkit.node_index import children
from runnercheck.analysis.recognise import driver_split, is_step_broadcast

N = TypeVar("N", bound=cst.CSTNode)

_EMPTY = cst.Module(body=[])


def public_print_code(node: cst.CSTNode, default_indent: str, default_newline: str) -> str:
    """``code_for_node`` through LibCST's public API (what :func:`code` falls back to)."""
    return cst.Module(
        body=[], default_indent=default_indent, default_newline=default_newline
    ).code_for_node(node)


try:  # LibCST's internal code generation, printed without its position hook
    from codemods.toolkit.codegen_positions import print_code as _print_code
except (ImportError, AttributeError, TypeError):  # pragma: no cover - another LibCST
    _print_code = public_print_code


def code(node: cst.CSTNode) -> str:
    """Source text of a node (as it would print)."""
    if type(node) is cst.Name and not node.lpar and not node.rpar:
        return node.value  # (what a print of a bare name gives; many prints are of one)
    return _print_code(node, _EMPTY.default_indent, _EMPTY.default_newline)


def node_code(module: cst.Module, node: cst.CSTNode) -> str:
    """``module.code_for_node(node)``."""
    return _print_code(node, module.default_indent, module.default_newline)


def dotted(node: cst.BaseExpression) -> str | None:
    """``a.b.c`` for a Name/Attribute chain, else None."""
    if isinstance(node, cst.Name):
        return node.value
    if isinstance(node, cst.Attribute):
        head = dotted(node.value)
        return None if head is None else f"{head}.{node.attr.value}"
    return None


def is_self_attr(node: cst.CSTNode, attr: str | None = None) -> bool:
    return (
        isinstance(node, cst.Attribute)
        and isinstance(node.value, cst.Name)
        and node.value.value == "self"
        and (attr is None or node.attr.value == attr)
    )


def flag_test(test: cst.BaseExpression, flag: str) -> bool | None:
    """True when ``test`` sends the driver into the body and the other ranks into the
    ``else`` (``self.<flag>``), False for the reverse, None otherwise (the analysis
    layer's recogniser of the driver flag)."""
    return driver_split(code(test), flag)


def call_name(call: cst.Call) -> str | None:
    func = call.func
    if isinstance(func, cst.Name):
        return func.value
    if isinstance(func, cst.Attribute):
        return func.attr.value
    return None


def is_broadcast(node: cst.CSTNode, function: str) -> bool:
    """A call of the contract's step broadcast (the analysis layer's recogniser)."""
    if not isinstance(node, cst.Call):
        return False
    name = call_name(node)
    return name is not None and is_step_broadcast(name, function)


def broadcast_payload(call: cst.Call) -> cst.BaseExpression | None:
    """The dict a broadcast sends (None for a receive)."""
    for arg in call.args:
        if arg.keyword is None and arg.star == "":
            return arg.value
        if arg.keyword is not None and arg.keyword.value == "tensor_dict":
            return arg.value
    return None


def string_value(node: cst.BaseExpression) -> str | None:
    """The value of a plain string literal, else None."""
    if isinstance(node, (cst.SimpleString, cst.ConcatenatedString)):
        value: object = node.evaluated_value
        return value if isinstance(value, str) else None
    return None


def dict_method_key(node: cst.Call, var: str) -> str | None:
    """The literal key of ``var.get("key", ...)`` or ``var.pop("key", ...)``, else None."""
    func = node.func
    if (
        isinstance(func, cst.Attribute)
        and isinstance(func.value, cst.Name)
        and func.value.value == var
        and func.attr.value in {"get", "pop"}
        and node.args
    ):
        return string_value(node.args[0].value)
    return None


def walk(node: cst.CSTNode, visitor: cst.CSTVisitor) -> None:
    """``node.visit(visitor)`` for a visitor that only reads (its ``visit_*`` and
    ``leave_*`` methods; no ``*_attribute`` hooks), without the copy of every node
    that LibCST's visit makes."""
    if visitor.on_visit(node):
        for child in children(node):
            walk(child, visitor)
    visitor.on_leave(node)


#: What a search keeps: nodes of a node class (or of one of several, as ``isinstance``
#: keeps them), or those a predicate accepts.
Match = type[cst.CSTNode] | tuple[type[cst.CSTNode], ...] | Callable[[cst.CSTNode], bool]


def find_all(
    root: cst.CSTNode,
    match: Match,
    where: Callable[[cst.CSTNode], bool] | None = None,
    words: Sequence[str] = (),
) -> list[cst.CSTNode]:
    """The nodes under ``root`` (itself included) that ``match`` keeps and ``where``
    (when given) accepts, in the order a visit meets them (read from the subtree's
    index, :mod:`.node_index`: whitespace, comments and punctuation are not searched).
    Give the node classes a search wants as ``match`` rather than a predicate that tests
    them: kinds are told by the node's class alone, without a call per node, and a
    function body the run left unparsed (:mod:`.unparsed`) is passed over where its
    ``ast`` holds none. ``words``: names that the text of every node looked for names
    one of (a body that names none is passed over too)."""
    if isinstance(match, (type, tuple)):
        found = node_index.of_kind(node_index.searched(root, match, words), match)
    else:
        found = [node for node in node_index.nodes(root) if match(node)]
    return found if where is None else [node for node in found if where(node)]


def find_read(
    root: cst.CSTNode, kinds: type[cst.CSTNode] | tuple[type[cst.CSTNode], ...]
) -> list[cst.CSTNode]:
    """:func:`find_all` of small statements for a search that reads what it finds and
    replaces none of it: in a function body the run left unparsed, they are parsed one
    statement at a time (copies, which are not nodes of ``root``'s tree)."""
    return node_index.read(root, kinds)


def contains(
    root: cst.CSTNode, match: Match, where: Callable[[cst.CSTNode], bool] | None = None
) -> bool:
    """Whether a node under ``root`` (itself included) is one :func:`find_all` finds."""
    if isinstance(match, (type, tuple)):
        nodes = node_index.of_kind(node_index.searched(root, match), match)
        return any(where(node) for node in nodes) if where is not None else bool(nodes)
    nodes = node_index.nodes(root)
    if where is None:
        return any(match(node) for node in nodes)
    return any(match(node) and where(node) for node in nodes)


def within(root: cst.CSTNode, node: cst.CSTNode) -> bool:
    """Whether ``node`` is ``root`` or lies under it."""
    return node_index.within(root, node)


# ---------------------------------------------------------------- names


def target_names(target: cst.BaseExpression) -> list[cst.Name]:
    """Names bound by an assignment target (``a``, ``a, (b, *c)``)."""
    if isinstance(target, cst.Name):
        return [target]
    if isinstance(target, (cst.Tuple, cst.List)):
        out: list[cst.Name] = []
        for element in target.elements:
            out.extend(target_names(element.value))
        return out
    if isinstance(target, cst.StarredElement):
        return target_names(target.value)
    return []


class _NameUses(cst.CSTVisitor):
    """Classifies every Name under a node as read (load) or bound (store)."""

    def __init__(self) -> None:
        self.loads: list[cst.Name] = []
        self.stores: list[cst.Name] = []
        self._store_ids: set[int] = set()
        self._skip_ids: set[int] = set()

    def _mark_targets(self, target: cst.BaseExpression) -> None:
        for name in target_names(target):
            self._store_ids.add(id(name))

    def visit_Name(self, node: cst.Name) -> None:
        if id(node) in self._skip_ids:
            return
        if id(node) in self._store_ids:
            self.stores.append(node)
        else:
            self.loads.append(node)

    def visit_Attribute(self, node: cst.Attribute) -> None:
        self._skip_ids.add(id(node.attr))

    def visit_Arg(self, node: cst.Arg) -> None:
        if node.keyword is not None:
            self._skip_ids.add(id(node.keyword))

    def visit_AssignTarget(self, node: cst.AssignTarget) -> None:
        self._mark_targets(node.target)

    def visit_AnnAssign(self, node: cst.AnnAssign) -> None:
        self._mark_targets(node.target)

    def visit_AugAssign(self, node: cst.AugAssign) -> None:
        self._mark_targets(node.target)

    def visit_For(self, node: cst.For) -> None:
        self._mark_targets(node.target)

    def visit_CompFor(self, node: cst.CompFor) -> None:
        self._mark_targets(node.target)

    def visit_AsName(self, node: cst.AsName) -> None:
        if isinstance(node.name, cst.Name):
            self._store_ids.add(id(node.name))
        else:
            self._mark_targets(node.name)

    def visit_NamedExpr(self, node: cst.NamedExpr) -> None:
        self._mark_targets(node.target)

    def visit_Del(self, node: cst.Del) -> None:
        self._mark_targets(node.target)

    def visit_Param(self, node: cst.Param) -> None:
        self._store_ids.add(id(node.name))

    def visit_FunctionDef(self, node: cst.FunctionDef) -> None:
        self._store_ids.add(id(node.name))

    def visit_ClassDef(self, node: cst.ClassDef) -> None:
        self._store_ids.add(id(node.name))

    def visit_Global(self, node: cst.Global) -> None:
        for item in node.names:
            self._store_ids.add(id(item.name))

    def visit_Nonlocal(self, node: cst.Nonlocal) -> None:
        for item in node.names:
            self._store_ids.add(id(item.name))

    def visit_ImportAlias(self, node: cst.ImportAlias) -> bool:
        if node.asname is not None:
            node.asname.visit(self)
        elif isinstance(node.name, cst.Name):
            self._store_ids.add(id(node.name))
            self.stores.append(node.name)
        else:
            head = node.name
            while isinstance(head, cst.Attribute):
                head = head.value  # type: ignore[assignment]
            if isinstance(head, cst.Name):
                self.stores.append(head)
        return False

    def visit_ImportFrom(self, node: cst.ImportFrom) -> bool:
        if not isinstance(node.names, cst.ImportStar):
            for alias in node.names:
                alias.visit(self)
        return False


#: Per node class, the :class:`_NameUses` method its visit calls (None: none).
_NAME_VISITS: dict[type[cst.CSTNode], Callable[[_NameUses, cst.CSTNode], bool | None] | None] = {}
#: The names read and bound under a node, by its identity (the node is kept with them).
_NAME_USES: dict[int, tuple[cst.CSTNode, list[cst.Name], list[cst.Name]]] = node_index.kept()


def name_uses(node: cst.CSTNode) -> tuple[list[cst.Name], list[cst.Name]]:
    """(names read, names bound) anywhere under ``node``: what a visit of
    :class:`_NameUses` finds, read from the subtree's index once per node."""
    found = _NAME_USES.get(id(node))
    if found is None or found[0] is not node:
        uses = _NameUses()
        order, ends, position, end = node_index.span(node)
        while position < end:
            child = order[position]
            kind = type(child)
            if kind in _NAME_VISITS:
                visit = _NAME_VISITS[kind]
            else:
                visit = _NAME_VISITS[kind] = getattr(_NameUses, f"visit_{kind.__name__}", None)
            if visit is not None and visit(uses, child) is False:
                position = ends[position]  # its children are not visited
            else:
                position += 1
        found = (node, uses.loads, uses.stores)
        node_index.keep(_NAME_USES, id(node), found)
    return list(found[1]), list(found[2])


def loaded(node: cst.CSTNode) -> set[str]:
    return {name.value for name in name_uses(node)[0]}


def bound(node: cst.CSTNode) -> set[str]:
    return {name.value for name in name_uses(node)[1]}


def bound_in(statements: Iterable[cst.CSTNode]) -> set[str]:
    out: set[str] = set()
    for statement in statements:
        out |= bound(statement)
    return out


class Along(cst.CSTTransformer):
    """A transformer that visits only the nodes whose ids are in ``to_visit`` (the way
    to the nodes it changes, :func:`holding`): every other subtree stays as it is (not
    copied), and no ``visit_*`` or ``leave_*`` method runs for its nodes."""

    def __init__(self, to_visit: set[int]) -> None:
        super().__init__()
        self.to_visit = to_visit

    def on_visit(self, node: cst.CSTNode) -> bool:
        return id(node) in self.to_visit and super().on_visit(node)

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        if id(original_node) not in self.to_visit:
            return updated_node
        return super().on_leave(original_node, updated_node)


class _Substitute(Along):
    """Replaces the names ``targets`` under ``root`` (visiting only the way to them)."""

    def __init__(
        self, root: cst.CSTNode, targets: set[int], make: Callable[[cst.Name], cst.BaseExpression]
    ) -> None:
        super().__init__(holding(root, targets))
        self.targets = targets
        self.make = make

    def leave_Name(self, original_node: cst.Name, updated_node: cst.Name) -> cst.BaseExpression:
        if id(original_node) in self.targets:
            return self.make(original_node)
        return updated_node


def substitute_loads(node: N, replacements: Mapping[str, Callable[[], cst.BaseExpression]]) -> N:
    """Replace every *read* of the given names (not bindings, keywords, attributes)."""
    loads, _ = name_uses(node)
    targets = {id(name) for name in loads if name.value in replacements}
    if not targets:
        return node
    return cast(N, node.visit(_Substitute(node, targets, lambda n: replacements[n.value]())))


def self_attr(name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name("self"), attr=cst.Name(name))


def attr_of(base: str, name: str) -> cst.Attribute:
    return cst.Attribute(value=cst.Name(base), attr=cst.Name(name))


def holding(root: cst.CSTNode, targets: Iterable[int]) -> set[int]:
    """The ids of the nodes under ``root`` that are, or hold, a node whose id is in
    ``targets``: all that a transformer replacing those nodes needs to visit (it
    leaves the other subtrees as they are instead of copying them). A target is never
    whitespace, a comment or punctuation (:data:`.node_index.TRIVIA`: not indexed)."""
    wanted = set(targets)
    held: set[int] = set()
    order, ends, start, end = node_index.span(root, identities=True)
    following = end  # the first position at or after the current one with a target
    for position in range(end - 1, start - 1, -1):
        key = id(order[position])
        if key in wanted:
            following = position
        if following < ends[position]:
            held.add(key)
    return held


class _ReplaceNodes(Along):
    def __init__(self, mapping: dict[int, cst.CSTNode], to_visit: set[int]) -> None:
        super().__init__(to_visit)
        self.mapping = mapping

    def on_leave(self, original_node: cst.CSTNode, updated_node: cst.CSTNode):  # type: ignore[no-untyped-def]
        replacement = self.mapping.get(id(original_node))
        if replacement is not None:
            return replacement
        return updated_node


def replace_nodes(root: N, mapping: dict[int, cst.CSTNode]) -> N:
    """Replace nodes by identity (``id(original) -> new``)."""
    if not mapping:
        return root
    return cast(N, root.visit(_ReplaceNodes(mapping, holding(root, mapping))))


#: The nodes that hold blocks of statements: compound statements, their blocks and the
#: clauses that hold blocks (``else``, ``except``, ``finally``, ``case``).
BLOCK_HOLDERS = (
    cst.BaseCompoundStatement,
    cst.IndentedBlock,
    cst.Else,
    cst.ExceptHandler,
    cst.ExceptStarHandler,
    cst.Finally,
    cst.MatchCase,
)


def body_of(node: cst.BaseSuite) -> Sequence[cst.BaseStatement]:
    if isinstance(node, cst.IndentedBlock):
        return node.body
    return [cst.SimpleStatementLine(body=list(node.body))]  # type: ignore[arg-type]


def small_statements(statement: cst.CSTNode) -> Sequence[cst.BaseSmallStatement]:
    if isinstance(statement, cst.SimpleStatementLine):
        return statement.body
    return []


def single_small(statement: cst.CSTNode) -> cst.BaseSmallStatement | None:
    small = small_statements(statement)
    return small[0] if len(small) == 1 else None


def ends_with_exit(block: cst.BaseSuite) -> bool:
    body = body_of(block)
    if not body:
        return False
    last = single_small(body[-1]) if isinstance(body[-1], cst.SimpleStatementLine) else None
    if last is None and isinstance(body[-1], cst.SimpleStatementLine):
        last = body[-1].body[-1]
    return isinstance(last, (cst.Return, cst.Raise))


def parse_statements(text: str) -> list[cst.BaseStatement]:
    return list(cst.parse_module(text).body)


def typevar_line(name: str, bound: str) -> str:
    """``T = TypeVar("T", bound="X")``, wrapped when longer than 79 columns."""
    line = f'{name} = TypeVar("{name}", bound="{bound}")'
    if len(line) <= 79:
        return line + "\n"
    return f'{name} = TypeVar(\n    "{name}", bound="{bound}"\n)\n'


def call_text(func: str, args: list[str], indent: int) -> str:
    """``func(a, b)`` or, when longer than 79 columns at ``indent``, one argument a line."""
    flat = f"{func}({', '.join(args)})"
    if indent + len(flat) <= 79:
        return flat
    inner = "".join(f"    {a},\n" for a in args)
    return f"{func}(\n{inner})"


def leading(statement: cst.BaseStatement) -> list[cst.EmptyLine]:
    """The blank and comment lines above a statement."""
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return list(statement.leading_lines)
    return []


def with_leading(statement: cst.BaseStatement, lines: Sequence[cst.EmptyLine]) -> cst.BaseStatement:
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        return cast(cst.BaseStatement, statement.with_changes(leading_lines=list(lines)))
    return statement


def comments(lines: Sequence[cst.EmptyLine]) -> list[cst.EmptyLine]:
    """Only the comment lines (blank lines dropped)."""
    return [line for line in lines if line.comment is not None]


def _before(literal: cst.Dict, index: int) -> cst.BaseParenthesizableWhitespace:
    """The whitespace (with any comment lines) just before element ``index``."""
    if index == 0:
        return literal.lbrace.whitespace_after
    comma = literal.elements[index - 1].comma
    if isinstance(comma, cst.Comma):
        return comma.whitespace_after
    return cst.SimpleWhitespace(" ")


def comment_before(literal: cst.Dict, index: int) -> bool:
    """Whether a comment stands just before element ``index`` of the literal."""
    return "#" in cst.Module([]).code_for_node(_before(literal, index))


def keep_elements(literal: cst.Dict, keep: Sequence[int]) -> cst.Dict:
    """The dict literal with only the elements at ``keep`` (in order); each kept
    element brings the comment lines that preceded it, the layout stays."""
    if not keep:
        return literal.with_changes(elements=[])
    elements: list[cst.BaseDictElement] = []
    last = len(literal.elements) - 1
    for position, index in enumerate(keep):
        element = literal.elements[index]
        if position + 1 < len(keep):
            following = _before(literal, keep[position + 1])
            comma = element.comma if isinstance(element.comma, cst.Comma) else cst.Comma()
            element = element.with_changes(comma=comma.with_changes(whitespace_after=following))
        else:
            element = element.with_changes(comma=literal.elements[last].comma)
        elements.append(element)
    return literal.with_changes(
        lbrace=literal.lbrace.with_changes(whitespace_after=_before(literal, keep[0])),
        elements=elements,
    )


def _param_texts(func: cst.FunctionDef) -> list[str]:
    params = func.params
    if (
        params.star_arg is not cst.MaybeSentinel.DEFAULT
        or params.kwonly_params
        or (params.star_kwarg is not None or params.posonly_params)
    ):
        return []
    return [code(p.with_changes(comma=cst.MaybeSentinel.DEFAULT)).strip() for p in params.params]


def def_line_length(func: cst.FunctionDef, indent: int) -> int:
    """Columns of the ``def`` line with its parameters on one line."""
    returns = f" -> {code(func.returns.annotation)}" if func.returns is not None else ""
    return indent + len(f"def {func.name.value}({', '.join(_param_texts(func))}){returns}:")


def one_param_per_line(func: cst.FunctionDef) -> cst.FunctionDef:
    """``def f(a, b) -> R:`` laid out with one parameter a line (its body untouched);
    unchanged when it has star or keyword-only parameters."""
    texts = _param_texts(func)
    if not texts:
        return func
    returns = f" -> {code(func.returns.annotation)}" if func.returns is not None else ""
    lines = "".join(f"    {p},\n" for p in texts)
    template = cst.parse_statement(f"def {func.name.value}(\n{lines}){returns}: pass\n")
    assert isinstance(template, cst.FunctionDef)
    return func.with_changes(
        params=template.params,
        whitespace_before_params=template.whitespace_before_params,
        returns=template.returns,
        whitespace_before_colon=template.whitespace_before_colon,
    )


def ignore_on_def_line(func: cst.FunctionDef, code_name: str) -> cst.FunctionDef:
    """``func`` with ``# type: ignore[<code_name>]`` on its ``def`` line (where mypy
    reports an incompatible override)."""
    comment = cst.Comment(f"# type: ignore[{code_name}]")
    before = func.whitespace_before_params
    if isinstance(before, cst.ParenthesizedWhitespace):
        if before.first_line.comment is not None:
            return func
        first = before.first_line.with_changes(
            whitespace=cst.SimpleWhitespace("  "), comment=comment
        )
        return func.with_changes(whitespace_before_params=before.with_changes(first_line=first))
    body = func.body
    if isinstance(body, cst.IndentedBlock) and body.header.comment is None:
        header = body.header.with_changes(whitespace=cst.SimpleWhitespace("  "), comment=comment)
        return func.with_changes(body=body.with_changes(header=header))
    return func


def rename(node: N, old: str, new: str) -> N:
    """Every read and binding of the name ``old`` becomes ``new`` (not keywords or
    attributes)."""
    loads, stores = name_uses(node)
    targets = {id(name) for name in [*loads, *stores] if name.value == old}
    if not targets:
        return node
    return cast(N, node.visit(_Substitute(node, targets, lambda n: n.with_changes(value=new))))


def docstring(text: str, indent: int, short: str = "", width: int = 79) -> str:
    """A one-line docstring at ``indent`` columns: ``text``, or ``short`` when ``text``
    does not fit in ``width`` (a docstring stays on one line: its newlines would
    not follow the file's)."""
    pad = " " * indent
    if short and indent + len(text) + 6 > width:
        text = short
    return f'{pad}"""{text}"""\n'


def is_optional(annotation: str) -> bool:
    """The annotation text admits None at its top level (``Optional[X]``, ``X | None``)."""
    text = annotation.replace(" ", "")
    return text.startswith(("Optional[", "typing.Optional[")) or (
        text.endswith("|None") or text.startswith("None|")
    )


def without_optional(annotation: str) -> str:
    """``Optional[X]`` -> ``X`` (the text as it was when it is not Optional)."""
    text = annotation.strip()
    for prefix in ("Optional[", "typing.Optional["):
        if text.startswith(prefix) and text.endswith("]"):
            return text[len(prefix) : -1].strip()
    return text


def dominant_newline(data: bytes | str, default: str = "\n") -> str:
    """The line ending most lines of ``data`` end with (``default`` when none does)."""
    raw = data.encode("utf-8", "surrogateescape") if isinstance(data, str) else data
    crlf = raw.count(b"\r\n")
    lf = raw.count(b"\n") - crlf
    if not crlf and not lf:
        return default
    return "\r\n" if crlf > lf else "\n"


class _ExplicitNewlines(cst.CSTTransformer):
    """Spell out every line ending that follows the module's default."""

    def __init__(self, newline: str) -> None:
        super().__init__()
        self.newline = newline

    def leave_Newline(self, original: cst.Newline, updated: cst.Newline) -> cst.Newline:
        return updated.with_changes(value=self.newline) if updated.value is None else updated


#: The text of modules parsed or printed here (by ``id``; the module is held, so the id
#: stays its own), the most recent last.
_TEXTS: dict[int, tuple[cst.Module, str]] = {}
#: How many module texts are kept.
TEXTS_KEPT = 32


def remember_code(module: cst.Module, text: str) -> None:
    """``text`` is ``module.code`` (:func:`module_code` gives it without printing)."""
    _TEXTS[id(module)] = (module, text)
    while len(_TEXTS) > TEXTS_KEPT:
        del _TEXTS[next(iter(_TEXTS))]


def forget_codes() -> None:
    """Drop the texts kept (and the modules they hold)."""
    _TEXTS.clear()


def module_code(module: cst.Module) -> str:
    """``module.code``, printed at most once: the text of a module that
    :func:`parse_module` parsed, or that was printed here before, is given again."""
    found = _TEXTS.get(id(module))
    if found is not None and found[0] is module:
        return found[1]
    text = node_code(module, module)
    remember_code(module, text)
    return text


def parse_module(data: bytes) -> cst.Module:
    """``data`` parsed, with the file's dominant line ending as the one new lines take.

    LibCST takes a module's default line ending from its first line; in a file that
    mixes CRLF and LF, lines added by a rewrite must take the ending most lines have.
    The lines parsed keep theirs (they are spelled out first), so untouched code stays
    byte-identical."""
    module = cst.parse_module(data)
    newline = dominant_newline(data, module.default_newline)
    if newline == module.default_newline:
        if module.encoding == "utf-8" and not data.startswith(b"\xef\xbb\xbf"):
            remember_code(module, data.decode("utf-8"))  # LibCST prints back what it parsed
        return module
    explicit = module.visit(_ExplicitNewlines(module.default_newline))
    return explicit.with_changes(default_newline=newline)
