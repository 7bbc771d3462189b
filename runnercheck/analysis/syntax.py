"""Small, shared readings of ``ast`` nodes: dotted names, positions, literal strings,
the ``self`` attributes and parameters an expression reads, module-level statements,
imports and suppression comments. Every other module of the analysis layer uses these;
none of them keeps an AST node.
"""

from __future__ import annotations

import ast

from runnercheck.ignores import suppressions as suppressions

_DOTTED = "_runnercheck_dotted"


def unparse(node: ast.AST) -> str:
    """``ast.unparse(node)``, written here for the shapes most annotations and arguments
    take (names, dotted names, subscripts of them with one or more such items, ``None``,
    arithmetic on them and on integers), where it is many times cheaper than the general
    unparser."""
    if node.__class__ is ast.BinOp:
        text = _binop_text(node, _TOP)
    else:
        text = _plain_text(node)
    return text if text is not None else ast.unparse(node)


#: The binary operators as :func:`ast.unparse` writes them, and how tightly each binds
#: (its ``_Precedence``: ``|`` loosest, ``**`` tightest; unary ``+``/``-``/``~`` between
#: ``*`` and ``**``).
_BINOPS: dict[type[ast.operator], tuple[str, int]] = {
    ast.BitOr: ("|", 1),
    ast.BitXor: ("^", 2),
    ast.BitAnd: ("&", 3),
    ast.LShift: ("<<", 4),
    ast.RShift: (">>", 4),
    ast.Add: ("+", 5),
    ast.Sub: ("-", 5),
    ast.Mult: ("*", 6),
    ast.MatMult: ("@", 6),
    ast.Div: ("/", 6),
    ast.Mod: ("%", 6),
    ast.FloorDiv: ("//", 6),
    ast.Pow: ("**", 8),
}
#: The precedence around an expression unparsed on its own (below every operator's).
_TOP = 0


def _binop_text(node: ast.BinOp, around: int) -> str | None:
    """What :func:`ast.unparse` writes for arithmetic whose operands are plain (see
    :func:`_plain_text`), non-negative integers or such arithmetic, where the operators
    around it bind with precedence ``around``; None for anything else. An operand
    binds one step tighter on the side the operator does not group from (the right,
    but the left of ``**``), and is put in parentheses where it binds more loosely than
    that."""
    op, precedence = _BINOPS[node.op.__class__]
    if op == "**":
        left, right = precedence + 1, precedence
    else:
        left, right = precedence, precedence + 1
    left_text = _operand_text(node.left, left)
    if left_text is None:
        return None
    right_text = _operand_text(node.right, right)
    if right_text is None:
        return None
    text = f"{left_text} {op} {right_text}"
    return f"({text})" if around > precedence else text


def _operand_text(node: ast.expr, around: int) -> str | None:
    kind = node.__class__
    if kind is ast.BinOp:
        return _binop_text(node, around)  # type: ignore[arg-type]
    if kind is ast.Constant:
        value = node.value  # type: ignore[attr-defined]
        return repr(value) if value.__class__ is int and value >= 0 else _plain_text(node)
    return _plain_text(node)


_PLAIN_HEADS = (ast.Name, ast.Attribute)


def _plain_text(node: ast.AST) -> str | None:
    """What :func:`ast.unparse` writes for a name, a dotted name, ``None``, or a
    subscript of a (dotted) name by such items (several of them: a tuple written
    without its parentheses); None for anything else."""
    kind = node.__class__
    if kind is ast.Name:
        return node.id  # type: ignore[attr-defined]
    if kind is ast.Attribute:
        value = node.value  # type: ignore[attr-defined]
        head = _plain_text(value) if value.__class__ in _PLAIN_HEADS else None
        return None if head is None else f"{head}.{node.attr}"  # type: ignore[attr-defined]
    if kind is ast.Constant:
        return "None" if node.value is None else None  # type: ignore[attr-defined]
    if kind is ast.Subscript:
        value, index = node.value, node.slice  # type: ignore[attr-defined]
        head = _plain_text(value) if value.__class__ in _PLAIN_HEADS else None
        if head is None:
            return None
        if index.__class__ is ast.Tuple:
            if len(index.elts) < 2:
                return None
            items = [_plain_text(item) for item in index.elts]
            if None in items:
                return None
            return f"{head}[{', '.join(items)}]"  # type: ignore[arg-type]
        inner = _plain_text(index)
        return None if inner is None else f"{head}[{inner}]"
    return None


def walk(node: ast.AST) -> list[ast.AST]:
    """The nodes of ``ast.walk(node)``, in its order (breadth first), as a list: about
    twice as cheap (no generator per node). The tree must not change while it is read."""
    out = [node]
    append = out.append
    for item in out:  # (the list grows while it is read: a queue)
        for name in item._fields:
            value = getattr(item, name, None)
            if isinstance(value, list):
                for child in value:
                    if isinstance(child, ast.AST):
                        append(child)
            elif isinstance(value, ast.AST):
                append(value)
    return out


def dotted(node: ast.expr) -> str:
    """``self.model_runner.execute_model`` -> that string; calls become ``name()``.

    Iterative, and remembered on each node of the chain (the trees are only read), so
    that a chain of N calls costs N steps, not N * N / 2."""
    chain: list[ast.expr] = []
    current: ast.expr = node
    while True:
        known = getattr(current, _DOTTED, None)
        if known is not None:
            text = known
            break
        if isinstance(current, ast.Name):
            text = current.id
            break
        if isinstance(current, (ast.Attribute, ast.Subscript)):
            chain.append(current)
            current = current.value
        elif isinstance(current, ast.Call):
            chain.append(current)
            current = current.func
        else:
            text = "?"
            break
    for item in reversed(chain):
        if isinstance(item, ast.Attribute):
            text = f"{text}.{item.attr}"
        elif isinstance(item, ast.Call):
            text = f"{text}()"
        setattr(item, _DOTTED, text)
    return text


def last_name(callee: str) -> str:
    return callee.rsplit(".", 1)[-1]


def receiver(callee: str) -> str:
    return callee.rsplit(".", 1)[0] if "." in callee else ""


def col_of(node: ast.AST) -> int:
    return int(getattr(node, "col_offset", 0)) + 1


def line_of(node: ast.AST) -> int:
    return int(getattr(node, "lineno", 0))


def str_const(node: ast.expr | None) -> str | None:
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        return node.value
    return None


def self_fields(node: ast.AST, self_name: str | None) -> tuple[str, ...]:
    """``self`` attributes read anywhere in ``node`` (first attribute only)."""
    if self_name is None:
        return ()
    found: list[str] = []
    for sub in walk(node):
        if (
            isinstance(sub, ast.Attribute)
            and isinstance(sub.value, ast.Name)
            and sub.value.id == self_name
            and sub.attr not in found
        ):
            found.append(sub.attr)
    return tuple(found)


def params_read(node: ast.AST, params: dict[str, int]) -> tuple[int, ...]:
    found: list[int] = []
    for sub in walk(node):
        if isinstance(sub, ast.Name) and sub.id in params and params[sub.id] not in found:
            found.append(params[sub.id])
    return tuple(sorted(found))


def names_in(node: ast.AST) -> tuple[str, ...]:
    names: list[str] = []
    for sub in walk(node):
        name = None
        if isinstance(sub, ast.Name):
            name = sub.id
        elif isinstance(sub, ast.Attribute):
            name = sub.attr
        elif isinstance(sub, ast.Constant) and isinstance(sub.value, str):
            # string annotations: "ModelRunnerBase"
            name = sub.value.strip()
        if name and name not in names:
            names.append(name)
    return tuple(names)


def decorator_names(decorators: list[ast.expr]) -> tuple[str, ...]:
    out = []
    for dec in decorators:
        target = dec.func if isinstance(dec, ast.Call) else dec
        out.append(dotted(target))
    return tuple(out)


def is_stub_body(body: list[ast.stmt]) -> bool:
    for stmt in body:
        if isinstance(stmt, ast.Expr) and isinstance(stmt.value, ast.Constant):
            continue  # docstring or ``...``
        if isinstance(stmt, ast.Pass):
            continue
        if isinstance(stmt, ast.Raise) and stmt.exc is not None:
            exc = stmt.exc.func if isinstance(stmt.exc, ast.Call) else stmt.exc
            if last_name(dotted(exc)) == "NotImplementedError":
                continue
        return False
    return True


def read_import(node: ast.Import | ast.ImportFrom, out: dict[str, str]) -> None:
    if isinstance(node, ast.Import):
        for alias in node.names:
            if alias.asname:
                out[alias.asname] = alias.name
            else:
                head = alias.name.split(".", 1)[0]
                out.setdefault(head, head)
        return
    module = "." * node.level + (node.module or "")
    for alias in node.names:
        # `from . import base` is `.base`: a module of dots alone takes no separator
        joined = f"{module}{alias.name}" if module.endswith(".") else f"{module}.{alias.name}"
        out[alias.asname or alias.name] = joined if module else alias.name


def read_import_source(
    node: ast.Import | ast.ImportFrom, out: dict[str, tuple[str, str | None, int]]
) -> None:
    """An import as written: local name -> (module, imported name or None, level)."""
    if isinstance(node, ast.ImportFrom):
        for alias in node.names:
            out[alias.asname or alias.name] = (node.module or "", alias.name, node.level)
        return
    for alias in node.names:
        local = alias.asname or alias.name.split(".")[0]
        out[local] = (alias.name if alias.asname else local, None, 0)


def top_level_names(body: list[ast.stmt]) -> frozenset[str]:
    """Names a module binds at its top level (classes, functions, assignments, imports)."""
    names: set[str] = set()
    for node in body:
        if isinstance(node, (ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            names.add(node.name)
        elif isinstance(node, ast.Assign):
            for target in node.targets:
                names |= {n.id for n in walk(target) if isinstance(n, ast.Name)}
        elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            names.add(node.target.id)
        elif isinstance(node, (ast.Import, ast.ImportFrom)):
            for alias in node.names:
                names.add((alias.asname or alias.name).split(".")[0])
    return frozenset(names)


def loaded_names(tree: ast.AST) -> frozenset[str]:
    """Every bare name that appears in ``tree`` (the ``ast.Name`` nodes of ``ast.walk``,
    found by a walk of its own: about three times cheaper, as it reads only the fields
    that can hold a name)."""
    names: set[str] = set()
    stack = [tree]
    push, pop = stack.append, stack.pop
    fields_of = _NAME_FIELDS
    while stack:
        node = pop()
        kind = node.__class__
        if kind is ast.Name:
            names.add(node.id)  # type: ignore[attr-defined]
            continue
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f not in _NAMELESS)
        for field in fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)
    return frozenset(names)


def shift_lines(tree: ast.AST, lines: int) -> None:
    """``ast.increment_lineno(tree, lines)`` without its generators, walking only the
    fields :func:`loaded_names` walks (an operator or an expression context has no
    position)."""
    stack = [tree]
    push, pop = stack.append, stack.pop
    fields_of = _NAME_FIELDS
    while stack:
        node = pop()
        kind = node.__class__
        if "lineno" in kind._attributes:
            node.lineno += lines  # type: ignore[attr-defined]
            end = getattr(node, "end_lineno", None)
            if end is not None:
                node.end_lineno = end + lines  # type: ignore[attr-defined]
        fields = fields_of.get(kind)
        if fields is None:
            fields = fields_of[kind] = tuple(f for f in kind._fields if f not in _NAMELESS)
        for field in fields:
            value = getattr(node, field, None)
            if isinstance(value, list):
                for item in value:
                    if isinstance(item, ast.AST):
                        push(item)
            elif isinstance(value, ast.AST):
                push(value)


#: Fields that hold only an operator or an expression context: never a name, no position.
_NAMELESS = frozenset({"ctx", "op", "ops"})
#: Per node class, its fields but :data:`_NAMELESS` (filled as classes are met).
_NAME_FIELDS: dict[type, tuple[str, ...]] = {}


def module_level(body: list[ast.stmt]) -> list[ast.stmt]:
    """Top-level statements, descending into ``if``/``try``/``with`` blocks."""
    out: list[ast.stmt] = []
    for stmt in body:
        if isinstance(stmt, ast.If):
            out.extend(module_level(stmt.body))
            out.extend(module_level(stmt.orelse))
        elif isinstance(stmt, ast.Try):
            out.extend(module_level(stmt.body))
            for handler in stmt.handlers:
                out.extend(module_level(handler.body))
            out.extend(module_level(stmt.orelse))
            out.extend(module_level(stmt.finalbody))
        elif isinstance(stmt, ast.With):
            out.extend(module_level(stmt.body))
        else:
            out.append(stmt)
    return out


def literal_text(node: ast.expr | None) -> str | None:
    """The ``repr`` of a literal ``True``/``False``/``None``, int or str (a negative
    number included), else None."""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.USub):
        inner = literal_text(node.operand)
        return f"-{inner}" if inner is not None and inner[0].isdigit() else None
    if isinstance(node, ast.Constant) and (
        node.value is None or isinstance(node.value, (bool, int, str))
    ):
        return repr(node.value)
    return None


def param_defaults(args: ast.arguments) -> dict[str, str]:
    """Parameters whose default is a literal: name -> its ``repr``."""
    positional = [*args.posonlyargs, *args.args]
    out: dict[str, str] = {}
    pairs = list(
        zip(positional[len(positional) - len(args.defaults) :], args.defaults, strict=True)
    )
    pairs += [
        (a, d) for a, d in zip(args.kwonlyargs, args.kw_defaults, strict=True) if d is not None
    ]
    for arg, default in pairs:
        text = literal_text(default)
        if text is not None:
            out[arg.arg] = text
    return out


def arg_text(node: ast.expr) -> str:
    """An argument as :attr:`CallStep.args` records it: a name, an arithmetic expression
    in parentheses (``(count - 1)``), a literal's ``repr``, an attribute of ``self``
    (``self.flag``) or its negation (``not self.flag``), else ``""``."""
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = arg_text(node.operand)
        return f"not {inner}" if inner.startswith("self.") else ""
    if (
        isinstance(node, ast.Attribute)
        and isinstance(node.value, ast.Name)
        and node.value.id == "self"
    ):
        return f"self.{node.attr}"
    literal = literal_text(node)
    if literal is not None:
        return literal
    if isinstance(node, ast.BinOp):
        return f"({unparse(node)})"
    return ""
