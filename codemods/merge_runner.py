"""``merge-broadcasts``, runner side: plan and rewrite one model runner class.

The legacy runner method (vLLM 0.5.0's ``prepare_input_tensors``) looks like::

    def prepare_input_tensors(self, seq_group_metadata_list):
        <prologue>
        if self.is_driver_worker:
            <driver: compute the values>
            metadata_dict = {"input_tokens": input_tokens, ...}
            metadata_dict.update(attn_metadata.asdict_zerocopy())   # optional
            broadcast_tensor_dict(metadata_dict, src=0)
        else:
            metadata_dict = broadcast_tensor_dict(src=0)
            <non-driver: rebuild the values from metadata_dict>
        return (input_tokens, input_positions, ...)

and ``execute_model(self, seq_group_metadata_list, kv_caches)`` starts with
``(input_tokens, ...) = self.prepare_input_tensors(seq_group_metadata_list)``.

It becomes an input dataclass (one field per returned value; the dict moves to
``as_broadcastable_tensor_dict``, the non-driver block to the classmethod
``from_broadcasted_tensor_dict``), ``prepare_model_input`` (the driver block
without the broadcast), ``make_model_input_from_broadcasted_tensor_dict`` and
``execute_model(model_input, kv_caches)``. Anything else is a refusal.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import libcst as cst

from codemods import cstutil as cu
from codemods.refusal import Refusal
from codemods.results import DroppedKey
from runnercheck.contract import Contract

#: The runner attribute the non-driver block may read (passed to the input's classmethod).
ATTN_BACKEND = "attn_backend"
MODEL_INPUT = "model_input"


@dataclass
class FieldPlan:
    name: str
    annotation: str
    driver_only: bool


@dataclass
class RunnerPlan:
    path: Path
    name: str
    cdef: cst.ClassDef
    #: the legacy method (None: the runner inherits its input from a base runner)
    method: cst.FunctionDef | None = None
    input_name: str = ""
    typevar: str = ""
    fields: list[FieldPlan] = field(default_factory=list)
    #: plan of the runner whose input type this runner uses
    owner: RunnerPlan | None = None
    #: the runner gets ``ModelRunnerBase[input]`` as a base
    add_base: bool = False
    #: a subclass runner whose input is not its parent runner's: its contract
    #: methods narrow the parent's types (marked ``# type: ignore[override]``)
    narrows: bool = False
    narrows_from: str = ""
    # legacy method pieces
    docstring: cst.BaseStatement | None = None
    prologue: list[cst.BaseStatement] = field(default_factory=list)
    driver_before: list[cst.BaseStatement] = field(default_factory=list)
    driver_after: list[cst.BaseStatement] = field(default_factory=list)
    dict_var: str = ""
    literal: cst.Dict | None = None
    #: statements whose own comments move with the code they introduce
    literal_stmt: cst.BaseStatement | None = None
    send_stmt: cst.BaseStatement | None = None
    receive_stmt: cst.BaseStatement | None = None
    return_stmt: cst.BaseStatement | None = None
    branch_stmt: cst.BaseStatement | None = None
    mutations: list[cst.BaseStatement] = field(default_factory=list)
    receive_var: str = ""
    #: ``assert <received dict> is not None`` right after the receive (not moved)
    receive_checks: list[cst.BaseStatement] = field(default_factory=list)
    nondriver: list[cst.BaseStatement] = field(default_factory=list)
    uses_attn_backend: bool = False
    keys: list[str] = field(default_factory=list)
    dropped: list[DroppedKey] = field(default_factory=list)
    # execute_model rewrite
    execute: cst.FunctionDef | None = None
    unpack: cst.BaseStatement | None = None
    unpack_targets: list[str] = field(default_factory=list)
    #: calls ``self.execute_model(a, ...)`` in other methods -> wrap ``a``
    self_execute_calls: list[cst.Call] = field(default_factory=list)
    #: names of the methods holding those calls
    self_execute_in: set[str] = field(default_factory=set)

    @property
    def input_plan(self) -> RunnerPlan:
        return self.owner if self.owner is not None else self


def _method(cdef: cst.ClassDef, name: str) -> cst.FunctionDef | None:
    for item in cu.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == name:
            return item
    return None


def methods(cdef: cst.ClassDef) -> list[cst.FunctionDef]:
    return [item for item in cu.body_of(cdef.body) if isinstance(item, cst.FunctionDef)]


def broadcast_methods(
    cdef: cst.ClassDef, contract: Contract, only: set[str] | None = None
) -> list[cst.FunctionDef]:
    """Methods that call the broadcast function (``only``: names known to, from ``ast``)."""
    function = contract.broadcast_function
    return [
        m
        for m in methods(cdef)
        if (only is None or m.name.value in only)
        and cu.contains(m, lambda n: cu.is_broadcast(n, function))
    ]


def _is_docstring(statement: cst.BaseStatement) -> bool:
    small = cu.single_small(statement)
    return isinstance(small, cst.Expr) and isinstance(
        small.value, (cst.SimpleString, cst.ConcatenatedString)
    )


def _params(func: cst.FunctionDef) -> list[cst.Param]:
    return list(func.params.params)


def plan_legacy_method(plan: RunnerPlan, method: cst.FunctionDef, contract: Contract) -> None:
    """Fill ``plan`` from the legacy driver/non-driver method, or raise Refusal."""
    path = plan.path
    fn = contract.broadcast_function
    plan.method = method
    body = list(cu.body_of(method.body))
    start = 0
    if body and _is_docstring(body[0]):
        plan.docstring = body[0]
        start = 1
    branch_at = None
    for index, statement in enumerate(body[start:], start):
        if (
            isinstance(statement, cst.If)
            and cu.flag_test(statement.test, contract.driver_flag) is not None
        ):
            branch_at = index
            break
    if branch_at is None:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value} broadcasts outside an "
            f"`if self.{contract.driver_flag}: ... else: ...` split",
            method,
        )
    branch = body[branch_at]
    assert isinstance(branch, cst.If)
    if not isinstance(branch.orelse, cst.Else):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value}: the driver split has no plain `else` branch",
            branch,
        )
    plan.prologue = body[start:branch_at]
    plan.branch_stmt = branch
    epilogue = body[branch_at + 1 :]
    driver_first = cu.flag_test(branch.test, contract.driver_flag)
    driver_block = list(cu.body_of(branch.body if driver_first else branch.orelse.body))
    other_block = list(cu.body_of(branch.orelse.body if driver_first else branch.body))
    for statement in plan.prologue:
        if cu.contains(statement, lambda n: cu.is_broadcast(n, fn)):
            raise Refusal(
                "MIG101",
                path,
                f"{plan.name}.{method.name.value}: a broadcast before the driver split",
                statement,
            )
    for statement in epilogue[:-1]:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value}: statements after the driver split "
            "other than the final `return`",
            statement,
        )
    # ---- the returned values are the input fields
    returned = cu.single_small(epilogue[-1]) if epilogue else None
    plan.return_stmt = epilogue[-1] if epilogue else None
    if not (isinstance(returned, cst.Return) and isinstance(returned.value, cst.Tuple)):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value} does not end with `return (a, b, ...)`",
            epilogue[-1] if epilogue else method,
        )
    names: list[str] = []
    for element in returned.value.elements:
        if not isinstance(element.value, cst.Name):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value} returns `{cu.code(element.value)}`, "
                "not a plain name",
                element.value,
            )
        names.append(element.value.value)
    if len(set(names)) != len(names):
        raise Refusal(
            "MIG105", path, f"{plan.name}.{method.name.value} returns a name twice", returned
        )
    for statement in [*plan.prologue, *driver_block, *other_block]:
        if cu.contains(statement, lambda n: isinstance(n, cst.Return)):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: an early `return` in the driver split",
                statement,
            )
    annotations = _tuple_annotations(method, len(names))
    _plan_driver(plan, method, driver_block, names, contract)
    _plan_nondriver(plan, method, other_block, names, contract)
    tainted = _tainted(plan.receive_var, plan.nondriver)
    plan.fields = [
        FieldPlan(name, annotation, driver_only=name not in tainted)
        for name, annotation in zip(names, annotations, strict=True)
    ]
    driver_bound = cu.bound_in([*plan.prologue, *plan.driver_before, *plan.driver_after])
    nondriver_bound = cu.bound_in([*plan.prologue, *plan.nondriver])
    for name in names:
        if name not in driver_bound or name not in nondriver_bound:
            side = "driver" if name not in driver_bound else "non-driver"
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: `{name}` is returned but never "
                f"bound on the {side} path",
                returned,
            )


def _tuple_annotations(method: cst.FunctionDef, count: int) -> list[str]:
    ann = method.returns.annotation if method.returns is not None else None
    if (
        isinstance(ann, cst.Subscript)
        and cu.dotted(ann.value) in {"Tuple", "tuple", "typing.Tuple"}
        and len(ann.slice) == count
    ):
        out = []
        for element in ann.slice:
            if isinstance(element.slice, cst.Index):
                out.append(cu.code(element.slice.value))
            else:
                return ["Any"] * count
        return out
    return ["Any"] * count


def _plan_driver(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    block: list[cst.BaseStatement],
    fields: list[str],
    contract: Contract,
) -> None:
    path = plan.path
    fn = contract.broadcast_function
    sends = [
        i
        for i, statement in enumerate(block)
        if cu.contains(statement, lambda n: cu.is_broadcast(n, fn))
    ]
    if len(sends) != 1 or len(cu.find_all(block[sends[0]], lambda n: cu.is_broadcast(n, fn))) != 1:
        raise Refusal(
            "MIG101",
            path,
            f"{plan.name}.{method.name.value}: the driver branch must broadcast exactly once",
            block[sends[1]] if len(sends) > 1 else method,
        )
    send_at = sends[0]
    plan.send_stmt = block[send_at]
    small = cu.single_small(block[send_at])
    call = small.value if isinstance(small, cst.Expr) else None
    payload = cu.broadcast_payload(call) if isinstance(call, cst.Call) else None
    if not isinstance(payload, cst.Name):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value}: the driver broadcast is not "
            f"`{fn}(<dict variable>, ...)` on its own line",
            block[send_at],
        )
    var = payload.value
    literal_at = None
    for index in range(send_at - 1, -1, -1):
        value = _assigned_value(block[index], var)
        if value is not None:
            literal_at = index
            if not isinstance(value, cst.Dict):
                raise Refusal(
                    "MIG105",
                    path,
                    f"{plan.name}.{method.name.value}: `{var}` is not built from a dict literal",
                    block[index],
                )
            plan.literal = value
            plan.literal_stmt = block[index]
            break
    if literal_at is None or plan.literal is None:
        raise Refusal(
            "MIG102",
            path,
            f"{plan.name}.{method.name.value}: cannot trace `{var}` to a dict literal",
            block[send_at],
        )
    plan.dict_var = var
    plan.driver_before = block[:literal_at]
    plan.mutations = block[literal_at + 1 : send_at]
    plan.driver_after = block[send_at + 1 :]
    for statement in plan.mutations:
        if not _is_mutation(statement, var):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: `{cu.code(statement).strip()}` "
                f"between the dict and the broadcast",
                statement,
            )
    for statement in plan.driver_after:
        if var in cu.loaded(statement):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: `{var}` is used after the broadcast",
                statement,
            )
    plan.keys = []
    for element in plan.literal.elements:
        if not isinstance(element, cst.DictElement) or cu.string_value(element.key) is None:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}.{method.name.value}: a dict entry without a literal string key",
                element,
            )
        plan.keys.append(cu.string_value(element.key) or "")
    for statement in plan.mutations:
        key = _subscript_key(statement, var)
        if key is not None:
            plan.keys.append(key)


def _assigned_value(statement: cst.BaseStatement, var: str) -> cst.BaseExpression | None:
    small = cu.single_small(statement)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if isinstance(target, cst.Name) and target.value == var:
            return small.value
    if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
        if small.target.value == var and small.value is not None:
            return small.value
    return None


def _update_call(statement: cst.BaseStatement, var: str) -> cst.Call | None:
    small = cu.single_small(statement)
    if isinstance(small, cst.Expr) and isinstance(small.value, cst.Call):
        func = small.value.func
        if (
            isinstance(func, cst.Attribute)
            and func.attr.value == "update"
            and isinstance(func.value, cst.Name)
            and func.value.value == var
            and len(small.value.args) == 1
        ):
            return small.value
    return None


def _subscript_key(statement: cst.BaseStatement, var: str) -> str | None:
    small = cu.single_small(statement)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        target = small.targets[0].target
        if (
            isinstance(target, cst.Subscript)
            and isinstance(target.value, cst.Name)
            and target.value.value == var
            and len(target.slice) == 1
            and isinstance(target.slice[0].slice, cst.Index)
        ):
            return cu.string_value(target.slice[0].slice.value)
    return None


def _is_mutation(statement: cst.BaseStatement, var: str) -> bool:
    if _update_call(statement, var) is not None or _subscript_key(statement, var) is not None:
        return True
    if isinstance(statement, cst.If) and statement.orelse is None:
        inner = cu.body_of(statement.body)
        return (
            len(inner) == 1
            and _update_call(inner[0], var) is not None
            and var not in cu.loaded(statement.test)
        )
    return False


def _mutation_update(statement: cst.BaseStatement, var: str) -> cst.Call | None:
    call = _update_call(statement, var)
    if call is None and isinstance(statement, cst.If):
        call = _update_call(cu.body_of(statement.body)[0], var)
    return call


def _plan_nondriver(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    block: list[cst.BaseStatement],
    fields: list[str],
    contract: Contract,
) -> None:
    path = plan.path
    fn = contract.broadcast_function
    first = cu.single_small(block[0]) if block else None
    call = first.value if isinstance(first, cst.Assign) else None
    if not (
        isinstance(first, cst.Assign)
        and len(first.targets) == 1
        and isinstance(first.targets[0].target, cst.Name)
        and isinstance(call, cst.Call)
        and cu.is_broadcast(call, fn)
        and cu.broadcast_payload(call) is None
    ):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value}: the non-driver branch does not start "
            f"with `<dict> = {fn}(src=...)`",
            block[0] if block else method,
        )
    target = first.targets[0].target
    assert isinstance(target, cst.Name)
    plan.receive_var = var = target.value
    plan.receive_stmt = block[0]
    rest = block[1:]
    # `assert <dict> is not None` right after the receive only narrows the broadcast's
    # Optional result; the input's classmethod gets a dict, so the check stays behind.
    while rest and _is_not_none_assert(rest[0], var):
        plan.receive_checks.append(rest.pop(0))
    plan.nondriver = rest
    for statement in plan.nondriver:
        if cu.contains(statement, lambda n: cu.is_broadcast(n, fn)):
            raise Refusal(
                "MIG101",
                path,
                f"{plan.name}.{method.name.value}: a second broadcast on the non-driver path",
                statement,
            )
    # runner state read on the non-driver path
    for statement in [*plan.prologue, *plan.nondriver]:
        attrs = {
            n.attr.value  # type: ignore[attr-defined]
            for n in cu.find_all(statement, lambda n: cu.is_self_attr(n))
        }
        bare_self = sum(1 for n in cu.name_uses(statement)[0] if n.value == "self") - len(
            cu.find_all(statement, lambda n: cu.is_self_attr(n))
        )
        extra = attrs - {ATTN_BACKEND}
        if extra or bare_self > 0:
            what = f"self.{sorted(extra)[0]}" if extra else "self"
            raise Refusal(
                "MIG106",
                path,
                f"{plan.name}.{method.name.value}: the non-driver path reads `{what}`",
                statement,
            )
        if ATTN_BACKEND in attrs:
            plan.uses_attn_backend = True
    # keys read by name, and the spread
    consumed, spreads, other = _receive_uses(plan.nondriver, var)
    if other:
        raise Refusal(
            "MIG102",
            path,
            f"{plan.name}.{method.name.value}: `{var}` is used in a way the planner "
            f"cannot trace: `{cu.code(other[0]).strip()}`",
            other[0],
        )
    produced = set(plan.keys)
    for key in consumed:
        if key not in produced:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}.{method.name.value}: the non-driver reads key {key!r} "
                "that the driver's dict literal does not carry",
                method,
            )
    _plan_keys(plan, method, fields, consumed, spreads)


def _is_not_none_assert(statement: cst.BaseStatement, var: str) -> bool:
    small = cu.single_small(statement)
    if not (isinstance(small, cst.Assert) and small.msg is None):
        return False
    test = small.test
    return (
        isinstance(test, cst.Comparison)
        and isinstance(test.left, cst.Name)
        and test.left.value == var
        and len(test.comparisons) == 1
        and isinstance(test.comparisons[0].operator, cst.IsNot)
        and isinstance(test.comparisons[0].comparator, cst.Name)
        and test.comparisons[0].comparator.value == "None"
    )


def _receive_uses(
    statements: list[cst.BaseStatement], var: str
) -> tuple[set[str], list[cst.Call], list[cst.CSTNode]]:
    """Keys read by name from ``var``, calls spreading ``**var``, other uses."""
    consumed: set[str] = set()
    spreads: list[cst.Call] = []
    accounted: set[int] = set()
    for statement in statements:
        for node in cu.find_all(
            statement, lambda n: isinstance(n, (cst.Call, cst.Subscript, cst.If))
        ):
            if isinstance(node, cst.Call):
                read = cu.dict_method_key(node, var)
                if read is not None:
                    consumed.add(read)
                    accounted.add(id(cst.ensure_type(node.func, cst.Attribute).value))
                for arg in node.args:
                    if (
                        arg.star == "**"
                        and isinstance(arg.value, cst.Name)
                        and arg.value.value == var
                    ):
                        spreads.append(node)
                        accounted.add(id(arg.value))
            elif isinstance(node, cst.Subscript):
                if (
                    isinstance(node.value, cst.Name)
                    and node.value.value == var
                    and len(node.slice) == 1
                    and isinstance(node.slice[0].slice, cst.Index)
                    and cu.string_value(node.slice[0].slice.value) is not None
                ):
                    consumed.add(cu.string_value(node.slice[0].slice.value) or "")
                    accounted.add(id(node.value))
            elif isinstance(node, cst.If):
                test = node.test
                if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
                    test = test.expression
                if isinstance(test, cst.Name) and test.value == var:
                    accounted.add(id(test))
    other: list[cst.CSTNode] = []
    for statement in statements:
        for name in cu.name_uses(statement)[0]:
            if name.value == var and id(name) not in accounted:
                other.append(name)
    return consumed, spreads, other


def _plan_keys(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    fields: list[str],
    consumed: set[str],
    spreads: list[cst.Call],
) -> None:
    """Check every literal value is an expression of the fields, or drop a
    provably redundant duplicate."""
    assert plan.literal is not None
    params = {p.name.value for p in _params(method)}
    locals_ = cu.bound_in([*plan.prologue, *plan.driver_before]) | params
    fieldset = set(fields)
    kept: list[str] = []
    for element in plan.literal.elements:
        assert isinstance(element, cst.DictElement)
        key = cu.string_value(element.key) or ""
        foreign = (cu.loaded(element.value) & locals_) - fieldset
        if not foreign:
            kept.append(key)
            continue
        found = _redundant(plan, key, consumed, spreads, fieldset)
        if found is None:
            raise Refusal(
                "MIG102",
                plan.path,
                f"{plan.name}.{method.name.value}: key {key!r} carries "
                f"`{cu.code(element.value).strip()}`, which is not one of the returned values "
                "and is not provably carried by another broadcast value",
                element,
            )
        plan.dropped.append(DroppedKey(key, *found, node=element))
    for statement in plan.mutations:
        foreign = (cu.loaded(statement) & locals_) - fieldset - {plan.dict_var}
        if foreign:
            raise Refusal(
                "MIG102",
                plan.path,
                f"{plan.name}.{method.name.value}: `{cu.code(statement).strip()}` "
                f"reads `{sorted(foreign)[0]}`, which is not one of the returned values",
                statement,
            )
    plan.keys = [k for k in plan.keys if k not in {d.key for d in plan.dropped}]


def _redundant(
    plan: RunnerPlan, key: str, consumed: set[str], spreads: list[cst.Call], fields: set[str]
) -> tuple[str, str, str] | None:
    """(carrier, merged call, constructor) proving ``key`` may be dropped, or None
    when that cannot be proved.

    Proof: (1) the driver merges ``<value>.<m>()`` of a returned value into the
    same dict after the literal, so that dict's entry for ``key`` wins; (2) the
    non-driver never reads ``key`` by name, only through ``**dict`` into the
    call that rebuilds that value; (3) every call of that constructor in the
    runner modules passes ``key=`` explicitly, so the value always carries it.
    Whether (3) holds is checked by the group planner (it sees all modules);
    here the local part is checked and the constructor is recorded."""
    if key in consumed or len(spreads) != 1:
        return None
    spread = spreads[0]
    rebuilt = _spread_target(plan.nondriver, spread)
    if rebuilt is None or rebuilt not in fields:
        return None
    merged = None
    for statement in plan.mutations:
        call = _mutation_update(statement, plan.dict_var)
        if call is None:
            continue
        arg = call.args[0].value
        if (
            isinstance(arg, cst.Call)
            and isinstance(arg.func, cst.Attribute)
            and isinstance(arg.func.value, cst.Name)
            and arg.func.value.value == rebuilt
            and not arg.args
        ):
            merged = f"{rebuilt}.{arg.func.attr.value}()"
    if merged is None:
        return None
    return rebuilt, merged, cu.call_name(spread) or "?"


def _spread_target(statements: list[cst.BaseStatement], spread: cst.Call) -> str | None:
    for statement in statements:
        for node in cu.find_all(statement, lambda n: isinstance(n, cst.Assign)):
            assert isinstance(node, cst.Assign)
            if node.value is spread and len(node.targets) == 1:
                target = node.targets[0].target
                if isinstance(target, cst.Name):
                    return target.value
    return None


def _tainted(var: str, statements: list[cst.BaseStatement]) -> set[str]:
    """Names whose non-driver value derives from the received dict."""
    tainted = {var}
    assigns: list[tuple[set[str], set[str]]] = []
    for statement in statements:
        for node in cu.find_all(
            statement, lambda n: isinstance(n, (cst.Assign, cst.AnnAssign, cst.AugAssign))
        ):
            value = node.value  # type: ignore[attr-defined]
            if value is None:
                continue
            targets: set[str] = set()
            if isinstance(node, cst.Assign):
                for t in node.targets:
                    targets |= {n.value for n in cu.target_names(t.target)}
            else:
                targets |= {n.value for n in cu.target_names(node.target)}  # type: ignore[attr-defined]
            assigns.append((targets, cu.loaded(value)))
    changed = True
    while changed:
        changed = False
        for targets, reads in assigns:
            if reads & tainted and not targets <= tainted:
                tainted |= targets
                changed = True
    return tainted


# ------------------------------------------------------------------ execute_model


def plan_execute(plan: RunnerPlan, method_name: str, contract: Contract) -> None:
    """Find the unpacking of ``self.<method_name>(...)`` in this runner's own
    ``execute_model``, or raise Refusal."""
    execute = _method(plan.cdef, contract.execute_method)
    if execute is None:
        return
    calls = cu.find_all(execute, lambda n: _is_self_call(n, method_name))
    if not calls:
        return
    input_plan = plan.input_plan
    body = list(cu.body_of(execute.body))
    found = None
    for statement in body:
        small = cu.single_small(statement)
        if isinstance(small, cst.Assign) and len(small.targets) == 1 and small.value in calls:
            found = (statement, small)
            break
    if found is None or len(calls) != 1:
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} calls `self.{method_name}` other than in "
            "one top-level `a, b, ... = self.<method>(...)`",
            calls[0],
        )
    statement, assign = found
    target = assign.targets[0].target
    if not isinstance(target, (cst.Tuple, cst.List)) or not all(
        isinstance(e.value, cst.Name) for e in target.elements
    ):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value}: the result of `self.{method_name}` is "
            "not unpacked into plain names",
            statement,
        )
    names = [e.value.value for e in target.elements]  # type: ignore[attr-defined]
    if len(names) != len(input_plan.fields):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} unpacks {len(names)} values, "
            f"`{method_name}` returns {len(input_plan.fields)}",
            statement,
        )
    params = _params(execute)
    call = assign.value
    assert isinstance(call, cst.Call)
    if (
        len(params) < 2
        or len(call.args) != 1
        or not isinstance(call.args[0].value, cst.Name)
        or call.args[0].value.value != params[1].name.value
        or call.args[0].keyword is not None
    ):
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value}: `self.{method_name}` is not called with "
            "the method's first argument alone",
            statement,
        )
    request = params[1].name.value
    reads = [n for n in cu.name_uses(execute.body)[0] if n.value == request]
    if len(reads) != 1:
        raise Refusal(
            "MIG105",
            plan.path,
            f"{plan.name}.{execute.name.value} uses `{request}` besides preparing the input",
            execute,
        )
    if MODEL_INPUT in {n.value for group in cu.name_uses(execute) for n in group}:
        raise Refusal(
            "MIG108",
            plan.path,
            f"{plan.name}.{execute.name.value} already uses the name `{MODEL_INPUT}`",
            execute,
        )
    plan.execute = execute
    plan.unpack = statement
    plan.unpack_targets = names


def _is_self_call(node: cst.CSTNode, name: str) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == name
        and isinstance(node.func.value, cst.Name)
        and node.func.value.value == "self"
    )


def self_calls(
    cdef: cst.ClassDef, name: str, skip: cst.FunctionDef | None, only: set[str] | None = None
) -> list[cst.Call]:
    """Calls ``self.<name>(...)`` in the methods (``only``: the methods known, from
    ``ast``, to make such calls)."""
    out: list[cst.Call] = []
    for method in methods(cdef):
        if method is skip or (only is not None and method.name.value not in only):
            continue
        out.extend(c for c in cu.find_all(method, lambda n: _is_self_call(n, name)))  # type: ignore[misc]
    return out


# ------------------------------------------------------------------ rewriting


def _field_line(f: FieldPlan) -> str:
    if f.driver_only:
        return (
            "    # Driver-only: the legacy code never broadcast it.\n"
            f"    {f.name}: {f.annotation} = dataclasses.field(\n"
            f'        metadata={{"runnercheck": "driver-only"}})\n'
        )
    return f"    {f.name}: {f.annotation}\n"


def input_class(plan: RunnerPlan, base: str, contract: Contract) -> list[cst.BaseStatement]:
    """The input dataclass (and its TypeVar) that replaces the metadata dict."""
    assert plan.literal is not None
    fields = "".join(_field_line(f) for f in plan.fields)
    names = [f.name for f in plan.fields]
    backend = f"{ATTN_BACKEND}: Any = None"
    cls_call = cu.call_text("cls", [f"{n}={n}" for n in names], 15).replace("\n", "\n        ")
    text = (
        f"{cu.typevar_line(plan.typevar, plan.input_name)}"
        "\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {plan.input_name}({base}):\n"
        f'    """The input of ``{plan.name}``, rebuilt from the one broadcast per step."""\n\n'
        f"{fields}\n"
        f"    def {contract.as_dict_method}(self) -> Dict[str, Any]:\n"
        "        tensor_dict: Dict[str, Any] = {}\n"
        "        return tensor_dict\n\n"
        "    @classmethod\n"
        f"    def {contract.from_dict_method}(\n"
        f"        cls: Type[{plan.typevar}],\n"
        "        tensor_dict: Dict[str, Any],\n"
        f"        {backend},\n"
        f"    ) -> {plan.typevar}:\n"
        f"        return {cls_call}\n"
    )
    statements = cu.parse_statements(text)
    typevar, cdef = statements[0], statements[1]
    assert isinstance(cdef, cst.ClassDef)
    new_items = []
    for item in cu.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef) and item.name.value == contract.as_dict_method:
            item = _fill_as_dict(plan, item)
        elif isinstance(item, cst.FunctionDef) and item.name.value == contract.from_dict_method:
            item = _fill_from_dict(plan, item)
        new_items.append(item)
    cdef = cdef.with_changes(body=cdef.body.with_changes(body=new_items))
    return [typevar, cdef]


def _to_self(node: cu.N, fields: set[str]) -> cu.N:
    def attr(name: str) -> Callable[[], cst.BaseExpression]:
        return lambda: cu.self_attr(name)

    return cu.substitute_loads(node, {f: attr(f) for f in fields})


def _renamed(node: cu.N, old: str) -> cu.N:
    return cu.substitute_loads(node, {old: lambda: cst.Name("tensor_dict")})


def _fill_as_dict(plan: RunnerPlan, method: cst.FunctionDef) -> cst.FunctionDef:
    assert plan.literal is not None
    fields = {f.name for f in plan.fields}
    dropped = {d.key for d in plan.dropped}
    keep = [
        i
        for i, e in enumerate(plan.literal.elements)
        if isinstance(e, cst.DictElement) and cu.string_value(e.key) not in dropped
    ]
    literal = _to_self(cu.keep_elements(plan.literal, keep), fields)
    body = list(cu.body_of(method.body))
    first = body[0]
    assert isinstance(first, cst.SimpleStatementLine)
    assign = first.body[0]
    assert isinstance(assign, cst.AnnAssign)
    lead = cu.comments(cu.leading(plan.literal_stmt)) if plan.literal_stmt else []
    new_first = first.with_changes(body=[assign.with_changes(value=literal)], leading_lines=lead)
    mutations = [_to_self(_renamed(s, plan.dict_var), fields) for s in plan.mutations]
    ret = body[-1]
    if plan.send_stmt is not None:
        ret = cu.with_leading(ret, cu.comments(cu.leading(plan.send_stmt)))
    return method.with_changes(body=method.body.with_changes(body=[new_first, *mutations, ret]))


def _fill_from_dict(plan: RunnerPlan, method: cst.FunctionDef) -> cst.FunctionDef:
    statements: list[cst.BaseStatement] = []
    for statement in [*plan.prologue, *plan.nondriver]:
        moved = _renamed(statement, plan.receive_var)
        statements.append(cast(cst.BaseStatement, moved.visit(_SelfAttnBackend())))
    body = list(cu.body_of(method.body))
    if statements:
        lead = cu.leading(plan.receive_stmt) if plan.receive_stmt is not None else []
        for check in plan.receive_checks:
            lead = [*lead, *cu.comments(cu.leading(check))]
        first = statements[0]
        statements[0] = cu.with_leading(first, cu.comments([*lead, *cu.leading(first)]))
    if plan.uses_attn_backend:
        guard = cu.parse_statements(
            f"if {ATTN_BACKEND} is None:\n"
            f'    raise ValueError("{plan.input_name} is rebuilt with the runner\'s {ATTN_BACKEND}")\n'
        )
        statements = [*guard, *statements]
    return method.with_changes(body=method.body.with_changes(body=[*statements, body[-1]]))


class _SelfAttnBackend(cst.CSTTransformer):
    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if cu.is_self_attr(original_node, ATTN_BACKEND):
            return cst.Name(ATTN_BACKEND)
        return updated_node


def runner_methods(plan: RunnerPlan, contract: Contract) -> list[cst.FunctionDef]:
    """``prepare_model_input`` and ``make_model_input_from_broadcasted_tensor_dict``
    in place of the legacy method."""
    method = plan.method
    assert method is not None
    fields = [f.name for f in plan.fields]
    body: list[cst.BaseStatement] = []
    if plan.docstring is not None:
        body.append(plan.docstring)
    driver = [*plan.driver_before, *plan.driver_after]
    above = cu.comments(cu.leading(plan.branch_stmt)) if plan.branch_stmt is not None else []
    if above and driver:
        driver[0] = cu.with_leading(driver[0], [*above, *cu.leading(driver[0])])
    body.extend([*plan.prologue, *driver])
    call = cu.call_text(plan.input_name, [f"{n}={n}" for n in fields], 15)
    ret = cu.parse_statements(f"return {call}\n")[0]
    if plan.return_stmt is not None:
        ret = cu.with_leading(ret, cu.comments(cu.leading(plan.return_stmt)))
    body.append(ret)
    returns = cst.Annotation(annotation=cst.Name(plan.input_name))
    prepare = method.with_changes(
        name=cst.Name(contract.prepare_input_method),
        returns=returns,
        body=method.body.with_changes(body=body),
    )
    args = ["tensor_dict"]
    if plan.uses_attn_backend:
        args.append(f"{ATTN_BACKEND}=self.{ATTN_BACKEND}")
    make_call = cu.call_text(f"{plan.input_name}.{contract.from_dict_method}", args, 15).replace(
        "\n", "\n        "
    )
    text = (
        "class _:\n"
        f"    def {contract.make_input_method}(\n"
        "        self, tensor_dict: Dict[str, Any]\n"
        f"    ) -> {plan.input_name}:\n"
        f"        return {make_call}\n"
    )
    holder = cu.parse_statements(text)[0]
    assert isinstance(holder, cst.ClassDef)
    make = cu.body_of(holder.body)[0]
    assert isinstance(make, cst.FunctionDef)
    make = make.with_changes(leading_lines=[cst.EmptyLine(indent=False)])
    return [prepare, make]


def rewrite_execute(plan: RunnerPlan) -> cst.FunctionDef:
    """``execute_model(self, model_input, kv_caches)`` reading the input's fields."""
    execute = plan.execute
    assert execute is not None and plan.unpack is not None
    input_plan = plan.input_plan
    fields = [f.name for f in input_plan.fields]
    stored = cu.bound(execute.body)
    # every unpacked name stored only by the unpack itself becomes model_input.<field>
    unpack_bound = cu.bound(plan.unpack)
    others = cu.bound_in(s for s in cu.body_of(execute.body) if s is not plan.unpack)
    direct: dict[str, str] = {}
    bindings: list[tuple[str, str]] = []
    for name, field_name in zip(plan.unpack_targets, fields, strict=True):
        if name == "_":
            continue
        if name in others or name not in unpack_bound or name in stored - unpack_bound:
            bindings.append((name, field_name))
        else:
            direct[name] = field_name
    fixed: list[cst.BaseStatement] = []
    carry: list[cst.EmptyLine] | None = None
    for index, original in enumerate(cu.body_of(execute.body)):
        statement: cst.BaseStatement = original
        if statement is plan.unpack:
            lines = [
                cu.parse_statements(f"{name} = {MODEL_INPUT}.{field_name}\n")[0]
                for name, field_name in bindings
            ]
            if lines:
                lines[0] = cu.with_leading(lines[0], cu.leading(statement))
                fixed.extend(lines)
            else:
                carry = cu.leading(statement)
                if index == 0:
                    carry = cu.comments(carry)
            continue
        if carry is not None:
            own = cu.leading(statement)
            if not fixed:  # nothing above it any more: no blank line at the top
                own = cu.comments(own)
            statement = cu.with_leading(statement, [*carry, *own])
            carry = None
        fixed.append(statement)

    def field_of(name: str) -> Callable[[], cst.BaseExpression]:
        return lambda: cu.attr_of(MODEL_INPUT, name)

    block = cu.substitute_loads(
        execute.body.with_changes(body=fixed), {n: field_of(f) for n, f in direct.items()}
    )
    params = list(execute.params.params)
    first = params[1]
    params[1] = first.with_changes(
        name=cst.Name(MODEL_INPUT),
        annotation=cst.Annotation(annotation=cst.Name(input_plan.input_name)),
        default=None,
        equal=cst.MaybeSentinel.DEFAULT,
    )
    return execute.with_changes(params=execute.params.with_changes(params=params), body=block)


def wrap_self_execute(call: cst.Call, contract: Contract) -> cst.Call:
    """``self.execute_model(a, b)`` -> ``self.execute_model(self.prepare_model_input(a), b)``."""
    first = call.args[0]
    prepared = cst.Call(
        func=cu.self_attr(contract.prepare_input_method), args=[cst.Arg(value=first.value)]
    )
    return call.with_changes(args=[first.with_changes(value=prepared), *call.args[1:]])
