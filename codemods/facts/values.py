"""The values of a step's methods, read for ``migrate``'s verification only
(:mod:`codemods.facts.sources`): what each local name of a method is assigned
(:class:`Binding`), what the body returns, and the calls where a step's values are used
(:class:`Sink`): the model, the sampler and the cache operations.

``check`` never reads them, so they are not part of the facts every file gets
(:mod:`runnercheck.analysis.extract`): :class:`ValueFacts` reads a method's values from
its file's ``ast`` the first time the value sources walk through it, with the ranks
that run each statement and the conditions around each call as the facts' reader
records them (:meth:`~runnercheck.analysis.extract.FunctionReader.read_roles`)."""

from __future__ import annotations

import ast
import functools
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

from runnercheck.analysis.extract import FunctionReader
from runnercheck.analysis.model import Condition, FunctionFacts, Role
from runnercheck.analysis.syntax import (
    dotted,
    last_name,
    literal_text,
    module_level,
    read_import,
    str_const,
)
from runnercheck.contract import VLLM, Contract


@dataclass(frozen=True)
class Binding:
    """What one assignment gives a local name (a tuple target gives each of its names
    one, with ``index``), or what a ``return`` gives (the name ``"<return>"``; a
    returned tuple gives ``"<return>#0"``, ``"<return>#1"``, ...).

    ``kind`` is ``"key"`` (``d.pop("k")``, ``d["k"]``, ``d.get("k")``: ``text`` is
    ``d``, ``key`` is ``k``), ``"call"`` (``text`` is the callee, ``index`` the position
    unpacked from what it returns, ``args``/``kwargs`` the argument texts), ``"value"``
    (``text`` is a name, a dotted chain such as ``model_input.input_tokens``, or a
    literal's ``repr``) or ``"expr"`` (anything else: computed in place)."""

    line: int
    #: The ranks that run the assignment (None: every rank).
    role: Role | None
    kind: str
    text: str = ""
    key: str = ""
    index: int | None = None
    args: tuple[str, ...] = ()
    kwargs: tuple[tuple[str, str], ...] = ()


@dataclass(frozen=True)
class Sink:
    """A call where a step's values are used: the model call (``"model"``), the sampler
    (``"sampler"``) or a cache operation (``"cache"``), with the text of the value in
    each slot (``"#0"`` for the first positional argument, else the keyword; ``""`` for
    a value computed in place). A ``**kwargs`` dict literal of the body gives its keys."""

    line: int
    col: int
    role: Role | None
    conditions: tuple[Condition, ...]
    kind: str
    callee: str
    slots: tuple[tuple[str, str], ...] = ()


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


class FunctionValues(NamedTuple):
    """The values of one method."""

    #: What each local name is assigned, and what the body returns (see :class:`Binding`).
    bindings: Mapping[str, tuple[Binding, ...]]
    #: The model calls, sampler calls and cache operations of the body.
    sinks: tuple[Sink, ...]


_Def = ast.FunctionDef | ast.AsyncFunctionDef
#: The values of a function that is not read (not a method, or not in the files given).
NO_VALUES = FunctionValues({}, ())


class _ValueReader:
    """Reads the :class:`FunctionValues` of one method from its body's nodes, as
    :meth:`~runnercheck.analysis.extract.FunctionReader.read_roles` records them."""

    def __init__(self, reader: FunctionReader) -> None:
        self.nodes = reader.nodes
        self.node_roles: dict[int, Role] = reader.node_roles
        self.call_roles: dict[tuple[int, int], Role] = reader.call_roles
        self.call_conditions: dict[tuple[int, int], tuple[Condition, ...]] = reader.call_conditions

    def read(self) -> FunctionValues:
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
        return FunctionValues(
            {name: tuple(found) for name, found in out.items()},
            tuple(
                sink
                for call in candidates
                if (sink := self._sink(call, literals, models)) is not None
            ),
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


#: A facts path as the ``Path`` the sources are keyed by (made once per path).
_path = functools.lru_cache(maxsize=4096)(Path)


class ValueFacts:
    """One version of the analysed files and the values of their methods, each method
    read the first time it is asked for (its file parsed once, then).

    ``sources``: each file's text, or its tree when already parsed, by the path its
    facts record; a file this version does not hold is read in ``base`` (the version
    it changes: an unchanged file's methods are read once for both). ``readers``: the
    readers that read the facts of methods of these trees, by the ``id`` of the node
    (:func:`~runnercheck.analysis.extract.extract_tree`): a method one has read is not
    walked again."""

    def __init__(
        self,
        sources: Mapping[Path, bytes | str | ast.Module],
        contract: Contract = VLLM,
        base: ValueFacts | None = None,
        kept: frozenset[int] = frozenset(),
        readers: Mapping[int, FunctionReader] | None = None,
    ) -> None:
        self.sources = sources
        self.contract = contract
        self.base = base
        self.kept = kept
        self.readers = readers or {}
        self._methods: dict[Path, dict[tuple[int, int], tuple[_Def, str]]] = {}
        self._imports: dict[Path, dict[str, str]] = {}
        self._read: dict[tuple[Path, int, int], FunctionValues] = {}

    def changed(
        self,
        sources: Mapping[Path, bytes | str | ast.Module],
        kept: frozenset[int] = frozenset(),
        readers: Mapping[int, FunctionReader] | None = None,
    ) -> ValueFacts:
        """The version that replaces (or adds) ``sources`` in this one. ``kept``: the
        ``id`` of each method node of ``sources`` whose values are this version's, at
        the same line and column (read once for both); ``readers``: as for a new
        version."""
        return ValueFacts(sources, self.contract, base=self, kept=kept, readers=readers)

    def of(self, func: FunctionFacts) -> FunctionValues:
        """The values of ``func`` (:data:`NO_VALUES` for a function that is not a method
        of a class at module level, as in the facts, or that no version holds)."""
        path = _path(func.path)
        if path not in self.sources:
            return self.base.of(func) if self.base is not None else NO_VALUES
        key = (path, func.line, func.col)
        found = self._read.get(key)
        if found is None:
            found = self._read[key] = self._read_method(path, func)
        return found

    def _read_method(self, path: Path, func: FunctionFacts) -> FunctionValues:
        methods = self._methods.get(path)
        if methods is None:
            methods = self._methods[path] = self._index(path)
        method = methods.get((func.line, func.col))
        if method is None:
            return NO_VALUES
        node, qualname = method
        if self.base is not None and id(node) in self.kept:
            return self.base.of(func)
        reader = self.readers.get(id(node))
        if reader is None or reader.node is not node:
            reader = FunctionReader(
                node, qualname, str(path), dict(self._imports[path]), self.contract, in_class=True
            )
            reader.read_roles()
        return _ValueReader(reader).read()

    def _index(self, path: Path) -> dict[tuple[int, int], tuple[_Def, str]]:
        """The methods of the classes at module level in ``path``, by line and column."""
        source = self.sources[path]
        try:
            tree = source if isinstance(source, ast.Module) else ast.parse(source, str(path))
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            tree = ast.Module(body=[], type_ignores=[])
        imports: dict[str, str] = {}
        out: dict[tuple[int, int], tuple[_Def, str]] = {}
        for stmt in module_level(tree.body):
            if isinstance(stmt, (ast.Import, ast.ImportFrom)):
                read_import(stmt, imports)
            elif isinstance(stmt, ast.ClassDef):
                for item in stmt.body:
                    if isinstance(item, (ast.FunctionDef, ast.AsyncFunctionDef)):
                        where = (item.lineno, item.col_offset + 1)
                        out[where] = (item, f"{stmt.name}.{item.name}")
        self._imports[path] = imports
        return out
