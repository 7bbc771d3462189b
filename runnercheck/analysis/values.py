"""The value half of a function reader (see :mod:`runnercheck.analysis.extract`): what
each local name is assigned (:class:`~runnercheck.analysis.model.Binding`), what the
body returns, and the calls where a step's values are used
(:class:`~runnercheck.analysis.model.Sink`): the model, the sampler and the cache
operations. :mod:`runnercheck.analysis.sources` joins them along each entry point's
path into the source of every value that reaches those calls."""

from __future__ import annotations

import ast

from runnercheck.analysis.model import Binding, Condition, FunctionFacts, Role, Sink
from runnercheck.analysis.syntax import dotted, last_name, literal_text, str_const

#: ``self.<attr>(...)`` calls that run the model, and the local names bound to them.
MODEL_CALLEES = ("self.model", "self.model.forward")
#: Calls that sample from the model's output.
SAMPLER_CALLEES = ("self.sampler", "self.model.sample")
#: Methods of a cache engine that move or copy blocks.
CACHE_OPS = ("swap_in", "swap_out", "copy")
#: How an empty container literal is written as a value.
_EMPTY = {ast.Dict: "{}", ast.List: "[]", ast.Tuple: "()", ast.Set: "set()"}


def value_text(node: ast.expr) -> str:
    """A value as :class:`Binding` and :class:`Sink` record it: a name, a dotted chain
    of names (``model_input.input_tokens``), a literal's ``repr``, an empty container
    (``{}``), ``not <chain>``; else ``""`` (computed in place)."""
    literal = literal_text(node)
    if literal is not None:
        return literal
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        inner = value_text(node.value)
        return f"{inner}.{node.attr}" if inner and inner[0].isidentifier() else ""
    if isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        inner = value_text(node.operand)
        return f"not {inner}" if inner and inner[0].isidentifier() else ""
    empty = _EMPTY.get(type(node))
    if empty is not None and not getattr(node, "elts", None) and not getattr(node, "keys", None):
        return empty
    return ""


def _args_read(callee: str) -> bool:
    """Whether the sources read a call's arguments: a method the walk follows (on
    ``self``, ``cls``, ``super()`` or an attribute of ``self``), a constructor, or a
    rebuild from a received dict (``Cls.from_broadcasted_tensor_dict(d)``)."""
    head, _, name = callee.rpartition(".")
    return (
        head.split(".", 1)[0] in ("self", "cls", "super()")
        or name[:1].isupper()
        or head.rsplit(".", 1)[-1][:1].isupper()
    )


def binding_of(node: ast.expr, line: int, role: Role | None) -> Binding:
    """What assigning ``node`` gives a name."""
    if isinstance(node, ast.Call):
        func = node.func
        if (
            isinstance(func, ast.Attribute)
            and func.attr in ("pop", "get")
            and node.args
            and str_const(node.args[0]) is not None
        ):
            key = str_const(node.args[0])
            assert key is not None
            return Binding(line, role, "key", value_text(func.value), key)
        callee = dotted(func)
        if not _args_read(callee):
            return Binding(line, role, "call", callee)
        return Binding(
            line,
            role,
            "call",
            callee,
            args=tuple(value_text(a) for a in node.args),
            kwargs=tuple((k.arg, value_text(k.value)) for k in node.keywords if k.arg),
        )
    if isinstance(node, ast.Subscript) and str_const(node.slice) is not None:
        key = str_const(node.slice)
        assert key is not None
        return Binding(line, role, "key", value_text(node.value), key)
    text = value_text(node)
    return Binding(line, role, "value" if text else "expr", text)


class ValueReader:
    """Reads :attr:`FunctionFacts.bindings` and :attr:`FunctionFacts.sinks`."""

    facts: FunctionFacts
    nodes: list[ast.AST]
    node_roles: dict[int, Role]
    call_roles: dict[tuple[int, int], Role]
    call_conditions: dict[tuple[int, int], tuple[Condition, ...]]

    def _read_values(self) -> None:
        out: dict[str, list[Binding]] = {}
        literals: dict[str, list[tuple[str, str]]] = {}
        candidates: list[ast.Call] = []
        models: set[str] = set()
        for node in self.nodes:
            kind = type(node)
            if kind is ast.Call:
                candidates.append(node)  # type: ignore[arg-type]
                continue
            role = self.node_roles.get(id(node))
            if kind is ast.Return:
                assert isinstance(node, ast.Return)
                if node.value is not None:
                    self._bind("<return>", node.value, node.lineno, role, out)
                continue
            if kind is ast.Assign:
                assert isinstance(node, ast.Assign)
                targets, value = node.targets, node.value
            elif kind is ast.AnnAssign:
                assert isinstance(node, ast.AnnAssign)
                if node.value is None:
                    continue
                targets, value = [node.target], node.value
            else:
                continue
            for target in targets:
                if isinstance(target, ast.Name):
                    self._bind(target.id, value, node.lineno, role, out)
                    if out[target.id][-1].text in MODEL_CALLEES:
                        models.add(target.id)
                    if isinstance(value, ast.Dict):
                        literals[target.id] = _items(value)
                elif isinstance(target, (ast.Tuple, ast.List)):
                    self._unpack(target, value, node.lineno, role, out)
        self.facts.bindings = {name: tuple(found) for name, found in out.items()}
        self.facts.sinks = tuple(
            sink for call in candidates if (sink := self._sink(call, literals, models)) is not None
        )

    def _bind(
        self,
        name: str,
        value: ast.expr,
        line: int,
        role: Role | None,
        out: dict[str, list[Binding]],
    ) -> None:
        out.setdefault(name, []).append(binding_of(value, line, role))
        if name == "<return>" and isinstance(value, ast.Tuple):
            for i, element in enumerate(value.elts):
                out.setdefault(f"<return>#{i}", []).append(binding_of(element, line, role))

    def _unpack(
        self,
        target: ast.Tuple | ast.List,
        value: ast.expr,
        line: int,
        role: Role | None,
        out: dict[str, list[Binding]],
    ) -> None:
        elements = value.elts if isinstance(value, (ast.Tuple, ast.List)) else None
        whole = binding_of(value, line, role)
        for i, item in enumerate(target.elts):
            if not isinstance(item, ast.Name):
                continue
            if elements is not None and len(elements) == len(target.elts):
                out.setdefault(item.id, []).append(binding_of(elements[i], line, role))
            elif whole.kind == "call":
                out.setdefault(item.id, []).append(
                    Binding(
                        line,
                        role,
                        "call",
                        whole.text,
                        index=i,
                        args=whole.args,
                        kwargs=whole.kwargs,
                    )
                )
            else:
                out.setdefault(item.id, []).append(Binding(line, role, "expr"))

    def _sink(
        self, call: ast.Call, literals: dict[str, list[tuple[str, str]]], models: set[str]
    ) -> Sink | None:
        callee = dotted(call.func)
        kind = None
        if callee in MODEL_CALLEES or callee in models:
            kind = "model"
        elif callee in SAMPLER_CALLEES:
            kind = "sampler"
        elif last_name(callee) in CACHE_OPS and "cache" in callee.rsplit(".", 1)[0].lower():
            kind = "cache"
        if kind is None:
            return None
        slots: list[tuple[str, str]] = [(f"#{i}", value_text(a)) for i, a in enumerate(call.args)]
        for keyword in call.keywords:
            if keyword.arg is not None:
                slots.append((keyword.arg, value_text(keyword.value)))
            elif isinstance(keyword.value, ast.Name):
                slots.extend(literals.get(keyword.value.id, ()))
        where = (call.lineno, call.col_offset + 1)
        return Sink(
            call.lineno,
            call.col_offset + 1,
            self.call_roles.get(where),
            self.call_conditions.get(where, ()),
            kind,
            callee,
            tuple(slots),
        )


def _items(node: ast.Dict) -> list[tuple[str, str]]:
    """The literal keys of a dict display with the text of each value."""
    out = []
    for key, value in zip(node.keys, node.values, strict=True):
        text = str_const(key) if key is not None else None
        if text is not None:
            out.append((text, value_text(value)))
    return out
