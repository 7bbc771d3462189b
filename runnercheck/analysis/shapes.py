"""The shape of a legacy runner method, read with ``ast``: what runs after the driver
split, which values of the split it reads, which values travel in the broadcast, and
the conditional extra broadcasts both sides make.

A legacy method looks like (vLLM 0.4.1's ``prepare_input_tensors``)::

    if self.is_driver_worker:
        ...                                   # prepare, then
        broadcast_tensor_dict(metadata_dict)  # the first broadcast
        if batch_type == BatchType.MIXED:     # an extra broadcast every rank expects
            broadcast_tensor_dict(decode_attn_metadata.asdict_zerocopy())
    else:
        metadata_dict = broadcast_tensor_dict()
        ...
        if batch_type == BatchType.MIXED:
            metadata_dict = broadcast_tensor_dict()
            decode_attn_metadata = self.attn_backend.make_metadata(**metadata_dict)
    attn_metadata = AttentionMetadata(...)    # the tail: every rank runs it
    return (input_tokens, ..., attn_metadata)

:func:`legacy_split` answers, for the migration: the statements of the tail (every
rank runs them after the split, so in the merged shape they run where every rank
has the model input: at the start of ``execute_model``), the values of the split they
read (fields of the input), the names they bind, the values that travel under a key
the other side binds to the same name (fields too), and the extra broadcasts, each
with the key prefix its values get in the one merged dict. A shape it cannot place
is a :class:`ShapeProblem` that names the line, the shape and what to change.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass

from runnercheck.analysis.recognise import broadcast_sends, is_step_broadcast, role_of
from runnercheck.analysis.scopes import bound, bound_in, loaded, ordered_loads, self_reads
from runnercheck.analysis.syntax import dotted, str_const, unparse, walk
from runnercheck.contract import Contract

AFTER_SPLIT = "statements after the driver split"
EXTRA_BROADCAST = "conditional extra broadcast"


@dataclass(frozen=True)
class ShapeProblem:
    """A shape the migration cannot place: where, which shape, why, what to change."""

    line: int
    shape: str
    message: str
    advice: str


@dataclass(frozen=True)
class ExtraBroadcast:
    """A second broadcast of the runner, under a condition both sides evaluate."""

    #: the driver's ``if`` holding the extra send, and the non-driver's holding the receive
    send_line: int
    receive_line: int
    condition: str
    #: key prefix of its values in the one merged dict (``"decode_attn_metadata."``)
    prefix: str
    #: the name the non-driver reads the extra values from in the merged shape
    received: str
    #: the name the legacy non-driver received them into
    receive_var: str
    #: that name is the first broadcast's dict's too (it is renamed to ``received``
    #: inside the ``if``); else the receive becomes ``receive_var = received``
    reuses_dict_name: bool = False


@dataclass(frozen=True)
class SplitShape:
    split_line: int
    returned: tuple[str, ...]
    #: lines of the statements between the split and the final ``return``
    tail_lines: tuple[int, ...] = ()
    #: names the tail binds (locals of ``execute_model`` in the merged shape)
    tail_bound: tuple[str, ...] = ()
    #: values bound before or in the split that the tail reads, in order
    tail_reads: tuple[str, ...] = ()
    #: driver locals the broadcast dict carries under a key that the non-driver
    #: binds to the same name (both sides hold them: fields of the input)
    travelling: tuple[str, ...] = ()
    extras: tuple[ExtraBroadcast, ...] = ()
    problem: ShapeProblem | None = None
    #: the type of a local as the old code states it (see :func:`local_types`)
    types: tuple[tuple[str, str], ...] = ()
    #: locals whose stated type is the value a prepare method assigns, not the
    #: annotation it declares: (name, the annotation, where it is declared)
    retyped: tuple[tuple[str, str, str], ...] = ()
    #: locals the method binds to ``None`` somewhere: a stated non-Optional type of
    #: theirs (a stale ``-> Tuple[...]`` element) is really ``Optional``
    nullable: tuple[str, ...] = ()
    #: locals unpacked from ``self.<method>(...)``: (local, method, index, count)
    unpacked: tuple[tuple[str, str, int, int], ...] = ()

    @property
    def fields(self) -> tuple[str, ...]:
        """The input's fields: returned values the tail does not rebind, then the
        split's values the tail reads, then the values that travel."""
        out = [name for name in self.returned if name not in self.tail_bound]
        for name in (*self.tail_reads, *self.travelling):
            if name not in out:
                out.append(name)
        return tuple(out)


def _body(func: ast.FunctionDef) -> list[ast.stmt]:
    body = list(func.body)
    if body and isinstance(body[0], ast.Expr) and str_const(body[0].value) is not None:
        body = body[1:]
    return body


def _is_broadcast(node: ast.AST, contract: Contract) -> bool:
    return isinstance(node, ast.Call) and is_step_broadcast(
        dotted(node.func), contract.broadcast_function
    )


def _broadcasts(node: ast.AST, contract: Contract) -> list[ast.Call]:
    return [n for n in walk(node) if isinstance(n, ast.Call) and _is_broadcast(n, contract)]


def _sends(node: ast.AST, contract: Contract) -> list[ast.Call]:
    return [c for c in _broadcasts(node, contract) if broadcast_sends(c)]


def _receives(node: ast.AST, contract: Contract) -> list[ast.Call]:
    return [c for c in _broadcasts(node, contract) if not broadcast_sends(c)]


def _payload(call: ast.Call) -> ast.expr | None:
    if call.args:
        return call.args[0]
    for kw in call.keywords:
        if kw.arg == "tensor_dict":
            return kw.value
    return None


def _received_into(stmt: ast.stmt, contract: Contract) -> str | None:
    """``V = broadcast(src=0)``: V."""
    if (
        isinstance(stmt, ast.Assign)
        and len(stmt.targets) == 1
        and isinstance(stmt.targets[0], ast.Name)
        and _is_broadcast(stmt.value, contract)
        and not broadcast_sends(stmt.value)  # type: ignore[arg-type]
    ):
        return stmt.targets[0].id
    return None


def _split_at(body: list[ast.stmt], flag: str) -> tuple[int, bool] | None:
    """Index of the driver split among the statements, and whether its body is the
    driver's."""
    for index, stmt in enumerate(body):
        if isinstance(stmt, ast.If):
            roles = role_of(stmt.test, flag)
            if roles == ("driver", "non-driver"):
                return index, True
            if roles == ("non-driver", "driver"):
                return index, False
    return None


def _literal_names(block: list[ast.stmt], var: str) -> dict[str, str]:
    """Keys of the dict literal assigned to ``var`` whose values are bare names."""
    out: dict[str, str] = {}
    for stmt in block:
        value = None
        if isinstance(stmt, ast.Assign) and any(
            isinstance(t, ast.Name) and t.id == var for t in stmt.targets
        ):
            value = stmt.value
        elif isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
            if stmt.target.id == var:
                value = stmt.value
        if isinstance(value, ast.Dict):
            out = {}
            for key, item in zip(value.keys, value.values, strict=True):
                text = str_const(key)
                if text is not None and isinstance(item, ast.Name):
                    out[text] = item.id
    return out


def _key_read(value: ast.expr, var: str) -> str | None:
    """``var.pop("k")``, ``var.get("k", ...)`` or ``var["k"]``: k."""
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and value.func.attr in ("pop", "get")
        and isinstance(value.func.value, ast.Name)
        and value.func.value.id == var
        and value.args
    ):
        return str_const(value.args[0])
    if isinstance(value, ast.Subscript) and isinstance(value.value, ast.Name):
        if value.value.id == var:
            return str_const(value.slice)
    return None


def _bound_from_keys(block: list[ast.stmt], var: str) -> dict[str, str]:
    """key -> the name the non-driver binds from it."""
    out: dict[str, str] = {}
    for stmt in block:
        for node in walk(stmt):
            if (
                isinstance(node, ast.Assign)
                and len(node.targets) == 1
                and isinstance(node.targets[0], ast.Name)
            ):
                key = _key_read(node.value, var)
                if key is not None:
                    out.setdefault(key, node.targets[0].id)
    return out


def _fresh(base: str, taken: set[str]) -> str:
    name, number = base, 2
    while name in taken:
        name, number = f"{base}{number}", number + 1
    return name


def legacy_split(
    func: ast.FunctionDef, contract: Contract, tree: ast.Module | None = None
) -> SplitShape | None:
    """The shape of a legacy driver/non-driver method, or None when it has no driver
    split (the codemod's own recogniser says why). ``tree`` (the module) lets it read
    the types the old code states for the method's locals."""
    body = _body(func)
    found = _split_at(body, contract.driver_flag)
    if found is None:
        return None
    index, driver_first = found
    split = body[index]
    assert isinstance(split, ast.If)
    driver = split.body if driver_first else split.orelse
    other = split.orelse if driver_first else split.body
    prologue, after = body[:index], body[index + 1 :]
    tail, final = after[:-1], after[-1] if after else None
    returned: tuple[str, ...] = ()
    if (
        isinstance(final, ast.Return)
        and isinstance(final.value, ast.Tuple)
        and all(isinstance(e, ast.Name) for e in final.value.elts)
    ):
        returned = tuple(e.id for e in final.value.elts)  # type: ignore[attr-defined]
    params = [a.arg for a in [*func.args.posonlyargs, *func.args.args]][1:]
    split_bound = bound_in([*prologue, split])
    shape = SplitShape(split.lineno, returned)
    problem = _tail_problem(tail, params, contract)
    tail_bound: list[str] = []
    tail_reads: list[str] = []
    for stmt in tail:
        for name in ordered_loads(stmt):
            if name in split_bound and name not in tail_bound and name not in tail_reads:
                tail_reads.append(name)
        tail_bound.extend(n for n in sorted(bound(stmt)) if n not in tail_bound)
    shape = SplitShape(
        split.lineno,
        returned,
        tuple(s.lineno for s in tail),
        tuple(tail_bound),
        tuple(tail_reads),
    )
    # the first broadcast: its dict's named values and what the non-driver binds from them
    sends = [i for i, s in enumerate(driver) if _sends(s, contract)]
    receive_var = _received_into(other[0], contract) if other else None
    if not sends or receive_var is None:
        return _with(shape, problem=problem)
    first_send = _sends(driver[sends[0]], contract)[0]
    payload = _payload(first_send)
    literal = (
        _literal_names(driver[: sends[0]], payload.id) if isinstance(payload, ast.Name) else {}
    )
    from_keys = _bound_from_keys(other[1:], receive_var)
    fields_so_far = set(shape.fields)
    travelling = tuple(
        name
        for key, name in literal.items()
        if from_keys.get(key) == name and name not in fields_so_far
    )
    shape = _with(shape, travelling=travelling)
    extras, extra_problem = _extras(
        func, driver, sends, other, receive_var, shape, contract, set(params)
    )
    retyped: dict[str, tuple[str, str]] = {}
    types = tuple(sorted(local_types(func, tree, retyped).items())) if tree is not None else ()
    nullable = tuple(
        sorted(
            {
                target.id
                for node in walk(func)
                if isinstance(node, ast.Assign)
                and isinstance(node.value, ast.Constant)
                and node.value.value is None
                for target in node.targets
                if isinstance(target, ast.Name)
            }
        )
    )
    return _with(
        shape,
        extras=extras,
        problem=problem or extra_problem,
        types=types,
        retyped=tuple((name, *why) for name, why in sorted(retyped.items())),
        nullable=nullable,
        unpacked=_unpacked(func),
    )


def _unpacked(func: ast.FunctionDef) -> tuple[tuple[str, str, int, int], ...]:
    out: list[tuple[str, str, int, int]] = []
    for node in walk(func):
        if not (isinstance(node, ast.Assign) and len(node.targets) == 1):
            continue
        target, value = node.targets[0], node.value
        if not isinstance(target, (ast.Tuple, ast.List)) or not isinstance(value, ast.Call):
            continue
        callee = dotted(value.func)
        if not callee.startswith("self.") or callee.count(".") != 1:
            continue
        for index, element in enumerate(target.elts):
            if isinstance(element, ast.Name):
                out.append((element.id, callee[5:], index, len(target.elts)))
    return tuple(out)


def _with(shape: SplitShape, **changes: object) -> SplitShape:
    from dataclasses import replace

    return replace(shape, **changes)  # type: ignore[arg-type]


def _tail_problem(
    tail: list[ast.stmt], params: list[str], contract: Contract
) -> ShapeProblem | None:
    for stmt in tail:
        for node in walk(stmt):
            if isinstance(node, (ast.Return, ast.Yield, ast.YieldFrom)):
                return ShapeProblem(
                    node.lineno,
                    AFTER_SPLIT,
                    "a `return` or `yield` after the driver split, before the final `return`",
                    "end the method with one `return (a, b, ...)` after the split",
                )
            if isinstance(node, ast.Call) and _is_broadcast(node, contract):
                return ShapeProblem(
                    node.lineno,
                    AFTER_SPLIT,
                    "a broadcast after the driver split (every rank calls it, in the role "
                    "the split gave it)",
                    "move the send into the driver branch and the receive into the other",
                )
        read = sorted(loaded(stmt) & set(params))
        if read:
            return ShapeProblem(
                stmt.lineno,
                AFTER_SPLIT,
                f"the statement after the driver split reads the parameter `{read[0]}`, "
                "which the other ranks no longer get",
                f"compute what it needs from `{read[0]}` inside the driver branch",
            )
    return None


def _extras(
    func: ast.FunctionDef,
    driver: list[ast.stmt],
    sends: list[int],
    other: list[ast.stmt],
    receive_var: str,
    shape: SplitShape,
    contract: Contract,
    params: set[str],
) -> tuple[tuple[ExtraBroadcast, ...], ShapeProblem | None]:
    """Extra broadcasts after the first: ``if <cond>: ...; broadcast(X)`` on the driver,
    ``if <cond>: V = broadcast(); ...`` on the non-driver, pairwise in order."""
    fn = contract.broadcast_function
    send_ifs = [driver[i] for i in sends[1:]]
    if len(_sends(driver[sends[0]], contract)) > 1:
        send_ifs.insert(0, driver[sends[0]])
    receive_ifs = [s for s in other[1:] if _receives(s, contract)]
    if not send_ifs and not receive_ifs:
        return (), None
    advice = (
        "give the extra broadcast the shape `if <cond>: ...; "
        f"{fn}(<value>)` on the driver and `if <cond>: <dict> = {fn}(); ...` on the "
        "other ranks, with <cond> read from values the first broadcast carries"
    )
    for stmt in send_ifs:
        if (
            not isinstance(stmt, ast.If)
            or stmt.orelse
            or len(_broadcasts(stmt, contract)) != 1
            or not (isinstance(stmt.body[-1], ast.Expr) and _sends(stmt.body[-1], contract))
        ):
            return (), ShapeProblem(
                stmt.lineno,
                EXTRA_BROADCAST,
                "a second broadcast on the driver path that is not the last statement of "
                "an `if` without `else`",
                advice,
            )
    receives: list[tuple[ast.If, str]] = []
    for stmt in receive_ifs:
        into = None
        if isinstance(stmt, ast.If) and len(_broadcasts(ast.Module(stmt.body, []), contract)) == 1:
            into = next(
                (v for v in map(lambda s: _received_into(s, contract), stmt.body) if v), None
            )
        if into is None:
            return (), ShapeProblem(
                stmt.lineno,
                EXTRA_BROADCAST,
                "a second receive on the non-driver path that is not "
                f"`<dict> = {fn}(...)` inside the body of an `if`",
                advice,
            )
        assert isinstance(stmt, ast.If)
        receives.append((stmt, into))
    if len(send_ifs) != len(receives):
        where = (send_ifs or [r[0] for r in receives])[0]
        return (), ShapeProblem(
            where.lineno,
            EXTRA_BROADCAST,
            f"the driver sends {len(send_ifs) + 1} times but the other ranks receive "
            f"{len(receives) + 1} times",
            advice,
        )
    fields = set(shape.fields)
    everything = bound_in(func.body) | params
    taken = everything | {n.id for n in walk(func) if isinstance(n, ast.Name)}
    out: list[ExtraBroadcast] = []
    for number, (send_if, (recv_if, into)) in enumerate(
        zip(send_ifs, receives, strict=True), start=1
    ):
        assert isinstance(send_if, ast.If)
        if ast.dump(send_if.test) != ast.dump(recv_if.test):
            return (), ShapeProblem(
                recv_if.lineno,
                EXTRA_BROADCAST,
                f"the driver sends under `{unparse(send_if.test)}` but the other ranks "
                f"receive under `{unparse(recv_if.test)}`",
                "test the same condition on both sides",
            )
        unknown = sorted(n for n in loaded(send_if.test) if n in everything and n not in fields)
        if self_reads(send_if.test) or unknown:
            what = f"`{unknown[0]}`" if unknown else "runner state (`self`)"
            return (), ShapeProblem(
                send_if.lineno,
                EXTRA_BROADCAST,
                f"the condition of the extra broadcast reads {what}, which the first "
                "broadcast does not carry, so the other ranks cannot evaluate it from "
                "what they received",
                "send the values of the condition in the first broadcast's dict",
            )
        inner = bound_in(send_if.body)
        stray = sorted(
            n for n in loaded(send_if) if n in everything and n not in fields and n not in inner
        )
        if stray or self_reads(send_if):
            what = f"`{stray[0]}`" if stray else "runner state (`self`)"
            return (), ShapeProblem(
                send_if.lineno,
                EXTRA_BROADCAST,
                f"the extra broadcast sends a value built from {what}, which is not a "
                "value of the input",
                "build the extra values from values the method returns or broadcasts",
            )
        base = _payload_base(send_if, number)
        if _broadcasts(ast.Module(recv_if.orelse, []), contract):
            return (), ShapeProblem(
                recv_if.lineno,
                EXTRA_BROADCAST,
                "the `else` of the extra receive receives too",
                advice,
            )
        after = other[other.index(recv_if) + 1 :]
        if into == receive_var and into in {n for s in after for n in loaded(s)}:
            return (), ShapeProblem(
                recv_if.lineno,
                EXTRA_BROADCAST,
                f"`{into}` (the extra values) is read after the `if` that receives them",
                "read the extra values only inside that `if`",
            )
        if into != receive_var and into not in bound_in([s for s in other if s is not recv_if]):
            received = into
        else:
            received = _fresh(f"{base}_dict", taken)
        taken.add(received)
        out.append(
            ExtraBroadcast(
                send_if.lineno,
                recv_if.lineno,
                unparse(send_if.test),
                f"{base}.",
                received,
                into,
                into == receive_var,
            )
        )
    return tuple(out), None


def _payload_base(send_if: ast.If, number: int) -> str:
    """A readable prefix for the extra values: the object whose dict is sent
    (``decode_attn_metadata.asdict_zerocopy()`` -> ``decode_attn_metadata``)."""
    last = send_if.body[-1]
    assert isinstance(last, ast.Expr) and isinstance(last.value, ast.Call)
    payload = _payload(last.value)
    value: ast.expr | None = payload
    if isinstance(payload, ast.Name):
        for stmt in send_if.body[:-1]:
            if (
                isinstance(stmt, ast.Assign)
                and len(stmt.targets) == 1
                and isinstance(stmt.targets[0], ast.Name)
                and stmt.targets[0].id == payload.id
            ):
                value = stmt.value
    if (
        isinstance(value, ast.Call)
        and isinstance(value.func, ast.Attribute)
        and isinstance(value.func.value, ast.Name)
    ):
        return value.func.value.id
    if isinstance(value, ast.Name):
        return value.id
    return f"extra{number}"


# --------------------------------------------------------------------- types


_BUILTIN_RESULTS = {"len": "int", "sum": "int", "bool": "bool", "int": "int", "str": "str"}


def _class_named(tree: ast.Module, name: str) -> ast.ClassDef | None:
    for node in tree.body:
        if isinstance(node, ast.ClassDef) and node.name == name:
            return node
    return None


def tuple_elements(annotation: ast.expr) -> list[str] | None:
    """``Tuple[a, b]`` -> [a, b]; None for anything else (``Tuple[a, ...]`` too)."""
    if not (
        isinstance(annotation, ast.Subscript)
        and dotted(annotation.value) in ("Tuple", "tuple", "typing.Tuple")
    ):
        return None
    inner = annotation.slice
    elements = inner.elts if isinstance(inner, ast.Tuple) else [inner]
    if any(isinstance(e, ast.Constant) and e.value is Ellipsis for e in elements):
        return None
    return [unparse(e) for e in elements]


def _element_types(annotation: ast.expr, tree: ast.Module) -> list[str] | None:
    """``Tuple[a, b]`` -> [a, b]; a NamedTuple class of the module -> its field types."""
    elements = tuple_elements(annotation)
    if elements is not None:
        return elements
    if isinstance(annotation, ast.Name):
        cls = _class_named(tree, annotation.id)
        if cls is not None and any(dotted(b).endswith("NamedTuple") for b in cls.bases):
            return [
                unparse(item.annotation)
                for item in cls.body
                if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
            ]
    return None


def _method_returns(tree: ast.Module, func: ast.FunctionDef, name: str) -> ast.expr | None:
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and func in cls.body:
            for item in cls.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item.returns
    return None


def _value_type(value: ast.expr, imports: set[str]) -> str | None:
    if isinstance(value, ast.Constant) and value.value is None:
        return "None"
    if isinstance(value, (ast.Compare, ast.BoolOp)) or (
        isinstance(value, ast.UnaryOp) and isinstance(value.op, ast.Not)
    ):
        return "bool"
    if isinstance(value, ast.Call):
        callee = dotted(value.func)
        if callee in _BUILTIN_RESULTS:
            return _BUILTIN_RESULTS[callee]
        if callee in ("torch.tensor", "torch.as_tensor", "torch.zeros", "torch.empty"):
            return "torch.Tensor" if "torch" in imports else None
        head = callee.split(".")[0]
        if callee[:1].isupper() and "." not in callee and callee in imports:
            return callee
        if head in imports and callee.split(".")[-1][:1].isupper() and "." not in callee:
            return callee
    return None


def _method_named(tree: ast.Module, func: ast.FunctionDef, name: str) -> ast.FunctionDef | None:
    for cls in tree.body:
        if isinstance(cls, ast.ClassDef) and func in cls.body:
            for item in cls.body:
                if isinstance(item, ast.FunctionDef) and item.name == name:
                    return item
    return None


def same_type(annotated: str, assigned: str) -> bool:
    """Whether a value of type ``assigned`` is what ``annotated`` declares (up to
    ``Optional`` and the spelling of builtin generics)."""

    def plain(text: str) -> str:
        text = text.replace(" ", "")
        for typing_name in ("List", "Dict", "Set", "Tuple"):
            text = text.replace(f"{typing_name}[", f"{typing_name.lower()}[")
        if text.startswith("Optional[") and text.endswith("]"):
            text = text[len("Optional[") : -1]
        return text

    return plain(annotated) == plain(assigned) or annotated == "Any"


def _assigned_types(
    tree: ast.Module,
    func: ast.FunctionDef,
    method: str,
    annotation: ast.expr,
    count: int,
    depth: int,
) -> list[str | None]:
    """Per position of what ``self.<method>()`` returns, the type of the values its
    ``return`` statements assign (a tuple of values, or the NamedTuple of its
    annotation built by position or keyword), where every such return agrees;
    None where that is not known."""
    found = _method_named(tree, func, method)
    unknown: list[str | None] = [None] * count
    if found is None or depth > 1:
        return unknown
    named = annotation.id if isinstance(annotation, ast.Name) else None
    cls = _class_named(tree, named) if named is not None else None
    fields = (
        [
            item.target.id
            for item in cls.body
            if isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)
        ]
        if cls is not None
        else None
    )
    imports = _imports(tree)
    types = local_types(found, tree, depth=depth + 1)
    seen: list[set[str | None]] = [set() for _ in range(count)]
    for node in walk(found):
        if not isinstance(node, ast.Return) or node.value is None:
            continue
        value = node.value
        values: list[ast.expr | None] = [None] * count
        if isinstance(value, ast.Tuple) and len(value.elts) == count:
            values = list(value.elts)
        elif isinstance(value, ast.Call) and fields is not None and dotted(value.func) == named:
            for index, arg in enumerate(value.args[:count]):
                values[index] = arg
            for keyword in value.keywords:
                if keyword.arg in fields and fields.index(keyword.arg) < count:
                    values[fields.index(keyword.arg)] = keyword.value
        else:
            continue  # (another constructor, an early empty result: says nothing)
        for index, item in enumerate(values):
            if item is None:
                seen[index].add(None)
            elif isinstance(item, ast.Name):
                seen[index].add(types.get(item.id))
            else:
                seen[index].add(_value_type(item, imports))
    out = list(unknown)
    for index, kinds in enumerate(seen):
        known = {k for k in kinds if k is not None and k != "None"}
        if len(known) == 1 and None not in kinds:
            out[index] = known.pop()
    return out


def _imports(tree: ast.Module) -> set[str]:
    return {
        (alias.asname or alias.name).split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}


def local_types(
    func: ast.FunctionDef,
    tree: ast.Module,
    retyped: dict[str, tuple[str, str]] | None = None,
    depth: int = 0,
) -> dict[str, str]:
    """The type of each local of ``func`` as the old code states it: an annotation,
    the element of a ``Tuple[...]`` (or NamedTuple) a method of the class returns
    when its result is unpacked, the class a local is constructed from, or the
    result of ``len``/comparisons. A local also bound to ``None`` is ``Optional``;
    a local whose stated bindings disagree, or that nothing states, is left out.

    An unpacked element whose value the method assigns has a known type that is not
    its annotation (``input_tokens: List[int]`` in the NamedTuple, a tensor built by
    ``torch.tensor`` in the method) takes the value's type; ``retyped`` then holds
    the local's annotation and where it is declared."""
    imports = {
        (alias.asname or alias.name).split(".")[0]
        for node in tree.body
        if isinstance(node, (ast.Import, ast.ImportFrom))
        for alias in node.names
    } | {n.name for n in tree.body if isinstance(n, ast.ClassDef)}
    seen: dict[str, set[str | None]] = {}

    def note(name: str, kind: str | None) -> None:
        seen.setdefault(name, set()).add(kind)

    for node in walk(func):
        if isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
            note(node.target.id, unparse(node.annotation))
        elif isinstance(node, ast.Assign) and len(node.targets) == 1:
            target = node.targets[0]
            if isinstance(target, ast.Name):
                note(target.id, _value_type(node.value, imports))
            elif isinstance(target, (ast.Tuple, ast.List)):
                elements: list[str] | None = None
                value = node.value
                if (
                    isinstance(value, ast.Call)
                    and isinstance(value.func, ast.Attribute)
                    and isinstance(value.func.value, ast.Name)
                    and value.func.value.id == "self"
                ):
                    returns = _method_returns(tree, func, value.func.attr)
                    if returns is not None:
                        elements = _element_types(returns, tree)
                if elements is not None and len(elements) != len(target.elts):
                    elements = None
                if elements is not None:
                    assert isinstance(value, ast.Call) and isinstance(value.func, ast.Attribute)
                    assert returns is not None
                    assigned = _assigned_types(
                        tree, func, value.func.attr, returns, len(elements), depth
                    )
                    for index, kind in enumerate(assigned):
                        element = target.elts[index]
                        if kind is None or same_type(elements[index], kind):
                            continue
                        if retyped is not None and isinstance(element, ast.Name):
                            where = f"{value.func.attr}() -> {unparse(returns)}"
                            retyped[element.id] = (elements[index], where)
                        elements[index] = kind
                for index, element in enumerate(target.elts):
                    if isinstance(element, ast.Name):
                        note(element.id, elements[index] if elements is not None else None)
    out: dict[str, str] = {}
    for name, kinds in seen.items():
        # a binding that states nothing (a value read from the received dict, a call
        # of unknown result) takes what the other bindings state
        optional = "None" in kinds
        rest = {k for k in kinds if k != "None" and k is not None}
        if len(rest) != 1:
            continue
        kind = rest.pop()
        if optional and not kind.startswith("Optional["):
            kind = f"Optional[{kind}]"
        out[name] = kind
    return out
