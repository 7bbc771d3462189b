"""Planning a worker's step: its broadcast, the keys it sends, the runner call."""

from __future__ import annotations

from collections.abc import Callable

import libcst as cst

from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts.driver_paths import Located
from codemods.merge_broadcasts.runner_model import MODEL_INPUT, methods
from codemods.merge_broadcasts.worker_condition import plan_condition
from codemods.merge_broadcasts.worker_model import (
    WORKER_INPUT,
    BroadcastCall,
    FunctionPaths,
    KeyPlan,
    WorkerPlan,
    function_paths,
    site_at,
)
from codemods.merge_broadcasts.worker_receive import plan_receive
from codemods.toolkit import cstutil
from runnercheck.contract import Contract


def _is_runner_execute(node: cst.CSTNode, attr: str, contract: Contract) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == contract.execute_method
        and cstutil.is_self_attr(node.func.value, attr)
    )


def plan_worker(
    plan: WorkerPlan, contract: Contract, input_fields: list[str], only: set[str] | None = None
) -> None:
    """Fill ``plan`` (or raise Refusal). ``input_fields`` are the runner input keys,
    which must not collide with the worker's; ``only`` names the methods that
    broadcast or call the runner (known from ``ast``; None: look at every method)."""
    path = plan.path
    fn = contract.broadcast_function
    flag = contract.driver_flag
    sends: list[tuple[cst.FunctionDef, cst.Call]] = []
    receives: list[tuple[cst.FunctionDef, cst.Call]] = []
    stops: list[cst.Call] = []
    sites: list[BroadcastCall] = []
    located: dict[int, FunctionPaths] = {}
    for method in methods(plan.cdef):
        if only is not None and method.name.value not in only:
            continue
        calls = cstutil.find_all(method, cst.Call, lambda n: cstutil.is_broadcast(n, fn))
        runner_calls = cstutil.find_all(
            method, cst.Call, lambda n: _is_runner_execute(n, plan.runner_attr, contract)
        )
        if not calls and not runner_calls:
            continue
        where = located.setdefault(id(method), function_paths(method, flag))
        for call in calls:
            assert isinstance(call, cst.Call)
            payload = cstutil.broadcast_payload(call)
            if payload is None:
                receives.append((method, call))
            elif isinstance(payload, cst.Dict) and not payload.elements:
                stops.append(call)
            else:
                sends.append((method, call))
        for call in runner_calls:
            assert isinstance(call, cst.Call)
            site = site_at(where, call)
            sites.append(BroadcastCall(call, site, method))
    if len(sends) != 1:
        raise Refusal(
            "MIG101",
            path,
            f"{plan.name} must broadcast its own dict exactly once per step (found {len(sends)})",
            sends[1][1] if len(sends) > 1 else plan.cdef,
        )
    if len(receives) != 1:
        raise Refusal(
            "MIG101",
            path,
            f"{plan.name} must receive exactly once per step (found {len(receives)})",
            receives[1][1] if len(receives) > 1 else plan.cdef,
        )
    if len(stops) > 1:
        raise Refusal("MIG101", path, f"{plan.name} sends the stop signal twice", stops[1])
    send_func, send_call = sends[0]
    recv_func, recv_call = receives[0]
    send_at = site_at(located[id(send_func)], send_call)
    recv_at = site_at(located[id(recv_func)], recv_call)
    if send_at.path != "driver" or recv_at.path != "non-driver":
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the broadcast is not on the driver path and the receive on "
            f"the non-driver path (`self.{flag}` branches)",
            send_call,
        )
    driver_sites = [s for s in sites if s.where.path in ("driver", "both")]
    other_sites = [s for s in sites if s.where.path in ("non-driver", "both")]
    if len(driver_sites) != 1 or len(other_sites) != 1:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name} must call `self.{plan.runner_attr}.{contract.execute_method}` "
            "once on the driver path and once on the non-driver path",
            sites[0].call if sites else plan.cdef,
        )
    plan.driver_site, plan.non_driver_site = driver_sites[0], other_sites[0]
    for call_site in sites:
        if not call_site.call.args or call_site.call.args[0].keyword is not None:
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: the runner call does not pass the request positionally",
                call_site.call,
            )
    _plan_send(plan, send_func, send_at, send_call, contract)
    plan_condition(plan, send_func, send_at, contract)
    plan_receive(plan, recv_func, recv_at, contract)
    _type_from_parameters(plan, send_func, recv_func)
    collide = {k.key for k in plan.keys} & set(input_fields)
    if collide:
        raise Refusal(
            "MIG107",
            path,
            f"{plan.name} and its runner both broadcast {sorted(collide)[0]!r}",
            plan.literal_stmt,
        )
    for func in {
        id(send_func): send_func,
        id(recv_func): recv_func,
        id(plan.driver_site.func): plan.driver_site.func,
        id(plan.non_driver_site.func): plan.non_driver_site.func,
    }.values():
        used = {n.value for group in cstutil.name_uses(func) for n in group}
        for name in (WORKER_INPUT, MODEL_INPUT):
            if name in used:
                raise Refusal(
                    "MIG108",
                    path,
                    f"{plan.name}.{func.name.value} already uses the name `{name}`",
                    func,
                )


def _plan_send(
    plan: WorkerPlan, func: cst.FunctionDef, at: Located, call: cst.Call, contract: Contract
) -> None:
    path = plan.path
    payload = cstutil.broadcast_payload(call)
    small = cstutil.single_small(at.statement)
    if not (isinstance(small, cst.Expr) and small.value is call and isinstance(payload, cst.Name)):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the broadcast is not `{contract.broadcast_function}(<dict "
            "variable>, ...)` on its own line",
            at.statement,
        )
    var = payload.value
    block, index = at.chain[-1]
    literal_at = None
    for i in range(index - 1, -1, -1):
        small = cstutil.single_small(block[i])
        value = None
        if isinstance(small, cst.Assign) and len(small.targets) == 1:
            target = small.targets[0].target
            if isinstance(target, cst.Name) and target.value == var:
                value = small.value
        elif isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name):
            if small.target.value == var:
                value = small.value
        if value is not None:
            if not isinstance(value, cst.Dict):
                raise Refusal(
                    "MIG102",
                    path,
                    f"{plan.name}: `{var}` is not built from a dict literal",
                    block[i],
                )
            literal_at = (i, value)
            break
        if var in cstutil.loaded(block[i]) | cstutil.bound(block[i]):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: `{var}` changes between the dict and the broadcast",
                block[i],
            )
    if literal_at is None:
        raise Refusal(
            "MIG102", path, f"{plan.name}: cannot trace `{var}` to a dict literal", at.statement
        )
    i, literal = literal_at
    plan.literal_stmt = block[i]
    plan.send = at.statement  # type: ignore[assignment]
    plan.send_func = func
    plan.dict_var = var
    annotations = _local_annotations(func)
    values = _local_values(func)
    for element in literal.elements:
        key = cstutil.string_value(element.key) if isinstance(element, cst.DictElement) else None
        if key is None or not key.isidentifier():
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}: a dict entry whose key is not a literal identifier",
                element,
            )
        assert isinstance(element, cst.DictElement)
        annotation = _annotation(element.value, annotations, values)
        plan.keys.append(
            KeyPlan(key, element.value, annotation, "None", valued=_never_none(annotation))
        )


def _local_annotations(func: cst.FunctionDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in cstutil.find_all(func, cst.AnnAssign):
        assert isinstance(node, cst.AnnAssign)
        if isinstance(node.target, cst.Name):
            out[node.target.value] = cstutil.code(node.annotation.annotation)
    return out


def _local_values(func: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """Locals assigned exactly once (``x = <value>``) in the function."""
    seen: dict[str, list[cst.BaseExpression]] = {}
    for node in cstutil.find_all(func, cst.Assign):
        assert isinstance(node, cst.Assign)
        for target in node.targets:
            for name in cstutil.target_names(target.target):
                seen.setdefault(name.value, []).append(node.value)
    return {name: found[0] for name, found in seen.items() if len(found) == 1}


def _never_none(annotation: str) -> bool:
    """Whether a value of this type is never None (``Any`` may be anything)."""
    text = annotation.replace(" ", "")
    return not (
        text in ("Any", "None", "object")
        or text.startswith(("Optional[", "Union["))
        or "|None" in text
        or "None|" in text
    )


def _annotation(
    value: cst.BaseExpression,
    annotations: dict[str, str],
    values: dict[str, cst.BaseExpression],
    depth: int = 0,
) -> str:
    if isinstance(value, cst.Name) and value.value in annotations:
        return annotations[value.value]
    if isinstance(value, cst.Name) and value.value in values and depth < 5:
        return _annotation(values[value.value], annotations, values, depth + 1)
    if (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Name)
        and value.func.value == "len"
    ):
        return "int"
    root = value
    while isinstance(root, (cst.Call, cst.Attribute)):
        if isinstance(root, cst.Call):
            text = cstutil.dotted(root.func)
            if (
                text
                and text.startswith("torch.")
                and text.split(".")[1]
                in {
                    "tensor",
                    "empty",
                    "zeros",
                    "ones",
                    "full",
                    "arange",
                    "as_tensor",
                    "from_numpy",
                }
            ):
                return "torch.Tensor"
            root = root.func
        else:
            root = root.value
    return "Any"


def _parameter_annotations(
    cdef: cst.ClassDef,
) -> dict[str, tuple[list[str | None], dict[str, str]]]:
    """Per method of the class: the annotation of each positional parameter after
    ``self`` (None where unannotated), and of each parameter by name."""
    out: dict[str, tuple[list[str | None], dict[str, str]]] = {}
    for method in methods(cdef):
        params = [*method.params.posonly_params, *method.params.params]
        if not params:
            continue
        positional = [
            cstutil.code(p.annotation.annotation) if p.annotation is not None else None
            for p in params[1:]
        ]
        named = {
            p.name.value: cstutil.code(p.annotation.annotation)
            for p in [*params[1:], *method.params.kwonly_params]
            if p.annotation is not None
        }
        out[method.name.value] = (positional, named)
    return out


def _passed_as(
    func: cst.FunctionDef,
    is_value: Callable[[cst.BaseExpression], bool],
    annotations: dict[str, tuple[list[str | None], dict[str, str]]],
) -> set[str]:
    """The annotations of the worker's own method parameters that ``func`` passes a
    value to (``self.m(value)`` or ``self.m(p=value)``)."""
    found: set[str] = set()
    for call in cstutil.find_all(func, cst.Call):
        assert isinstance(call, cst.Call)
        if not (
            cstutil.is_self_attr(call.func)
            and isinstance(call.func, cst.Attribute)
            and call.func.attr.value in annotations
        ):
            continue
        positional, named = annotations[call.func.attr.value]
        for index, arg in enumerate(call.args):
            if arg.star or not is_value(arg.value):
                continue
            if arg.keyword is not None:
                annotation = named.get(arg.keyword.value)
            else:
                annotation = positional[index] if index < len(positional) else None
            if annotation is not None:
                found.add(annotation)
    return found


def _is_received(reads: set[int], names: set[str]) -> Callable[[cst.BaseExpression], bool]:
    """A value that is one of the receive's key reads, or a local bound to one."""

    def test(value: cst.BaseExpression) -> bool:
        return id(value) in reads or (isinstance(value, cst.Name) and value.value in names)

    return test


def _type_from_parameters(
    plan: WorkerPlan, send_func: cst.FunctionDef, recv_func: cst.FunctionDef
) -> None:
    """A field whose value has no type the planner can read takes the type the worker
    states for it: the annotation of the worker's own method parameter that the sent
    value, the received value or the local bound to it is passed to (one type only)."""
    untyped = [k for k in plan.keys if k.annotation == "Any"]
    if not untyped:
        return
    annotations = _parameter_annotations(plan.cdef)
    reads: dict[str, set[int]] = {}
    for node_id, name in plan.key_reads.items():
        reads.setdefault(name, set()).add(node_id)
    bound_to: dict[int, str] = {}
    for node in cstutil.find_all(recv_func, cst.Assign):
        assert isinstance(node, cst.Assign)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            bound_to[id(node.value)] = node.targets[0].target.value
    for key in untyped:
        ids = reads.get(key.key, set())
        locals_ = {bound_to[i] for i in ids if i in bound_to}
        found = _passed_as(recv_func, _is_received(ids, locals_), annotations)
        found |= _passed_as(send_func, key.value.deep_equals, annotations)
        if len(found) == 1:
            stated = found.pop()
            # a receiver that defaults the key to None makes the field Optional itself
            key.annotation = cstutil.without_optional(stated) if key.default == "None" else stated
        key.contested = len(found) > 1
