"""``merge-broadcasts``, worker side: plan and rewrite one worker class.

The legacy worker broadcasts its own dict on the driver, receives it on the
other ranks, and calls ``self.model_runner.execute_model(<request list>, ...)``
(the runner then broadcasts a second time). After the rewrite::

    driver:      worker_input = WorkerInput(k=v, ...)           # the old dict
                 data = worker_input.as_broadcastable_tensor_dict()
                 if <the runner will run>:
                     model_input = self.model_runner.prepare_model_input(<request list>)
                     data.update(model_input.as_broadcastable_tensor_dict())
                 broadcast_tensor_dict(data, src=0)             # the only broadcast
    non-driver:  data = broadcast_tensor_dict(src=0)
                 worker_input = WorkerInput.from_broadcasted_tensor_dict(data)  # pops its keys
                 ... data.get("k") -> worker_input.k ...
                 model_input = self.model_runner.make_model_input_from_broadcasted_tensor_dict(data)
    everyone:    self.model_runner.execute_model(model_input, ...)

"The runner will run" is the conjunction of the early exits between the
broadcast and the runner call in the legacy code (``if num_seq_groups == 0:
return []``), so the driver prepares the model input exactly when the legacy
runner would have, and the stop signal (an empty dict) is kept as it was.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import libcst as cst

from codemods import cstutil as cu
from codemods.merge_runner import MODEL_INPUT, methods
from codemods.paths import Located, locate, owners
from codemods.refusal import Refusal
from runnercheck.contract import Contract

WORKER_INPUT = "worker_input"


@dataclass
class KeyPlan:
    key: str
    value: cst.BaseExpression
    annotation: str
    default: str | None  # None: no default (the receiver indexed it)


@dataclass
class CallSite:
    call: cst.Call
    where: Located
    func: cst.FunctionDef


@dataclass
class WorkerPlan:
    path: Path
    name: str
    cdef: cst.ClassDef
    runner_attr: str
    input_name: str = ""
    typevar: str = ""
    keys: list[KeyPlan] = field(default_factory=list)
    # driver
    send_func: cst.FunctionDef | None = None
    send: cst.BaseStatement | None = None
    literal_stmt: cst.BaseStatement | None = None
    dict_var: str = ""
    condition: cst.BaseExpression | None = None
    request: cst.BaseExpression | None = None
    # non-driver
    recv_func: cst.FunctionDef | None = None
    recv_var: str = ""
    #: insert WorkerInput.from_broadcasted_tensor_dict after this statement
    recv_anchor: cst.BaseStatement | None = None
    key_reads: dict[int, str] = field(default_factory=dict)
    #: the receive is followed by ``if not <dict>: <exit>``
    recv_guarded: bool = False
    # runner call sites
    driver_site: CallSite | None = None
    nondriver_site: CallSite | None = None


def _is_runner_execute(node: cst.CSTNode, attr: str, contract: Contract) -> bool:
    return (
        isinstance(node, cst.Call)
        and isinstance(node.func, cst.Attribute)
        and node.func.attr.value == contract.execute_method
        and cu.is_self_attr(node.func.value, attr)
    )


def _is_pure(node: cst.BaseExpression) -> bool:
    """Re-evaluating it has no effect: names, attributes, constants, comparisons,
    boolean logic and ``len()``."""

    def ok(n: cst.CSTNode) -> bool:
        if isinstance(n, cst.Call):
            return isinstance(n.func, cst.Name) and n.func.value == "len"
        return not isinstance(n, (cst.Await, cst.Yield, cst.NamedExpr, cst.Lambda))

    return all(ok(n) for n in cu.find_all(node, lambda n: True))


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
    sites: list[CallSite] = []
    located: dict[int, FunctionPaths] = {}
    for method in methods(plan.cdef):
        if only is not None and method.name.value not in only:
            continue
        calls = cu.find_all(method, lambda n: cu.is_broadcast(n, fn))
        runner_calls = cu.find_all(
            method, lambda n: _is_runner_execute(n, plan.runner_attr, contract)
        )
        if not calls and not runner_calls:
            continue
        where = located.setdefault(id(method), _locate(method, flag))
        for call in calls:
            assert isinstance(call, cst.Call)
            payload = cu.broadcast_payload(call)
            if payload is None:
                receives.append((method, call))
            elif isinstance(payload, cst.Dict) and not payload.elements:
                stops.append(call)
            else:
                sends.append((method, call))
        for call in runner_calls:
            assert isinstance(call, cst.Call)
            site = _site(where, call)
            sites.append(CallSite(call, site, method))
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
    send_at = _site(located[id(send_func)], send_call)
    recv_at = _site(located[id(recv_func)], recv_call)
    if send_at.path != "driver" or recv_at.path != "nondriver":
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the broadcast is not on the driver path and the receive on "
            f"the non-driver path (`self.{flag}` branches)",
            send_call,
        )
    driver_sites = [s for s in sites if s.where.path in ("driver", "both")]
    other_sites = [s for s in sites if s.where.path in ("nondriver", "both")]
    if len(driver_sites) != 1 or len(other_sites) != 1:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name} must call `self.{plan.runner_attr}.{contract.execute_method}` "
            "once on the driver path and once on the non-driver path",
            sites[0].call if sites else plan.cdef,
        )
    plan.driver_site, plan.nondriver_site = driver_sites[0], other_sites[0]
    for call_site in sites:
        if not call_site.call.args or call_site.call.args[0].keyword is not None:
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: the runner call does not pass the request positionally",
                call_site.call,
            )
    _plan_send(plan, send_func, send_at, send_call, contract)
    _plan_condition(plan, send_func, send_at, contract)
    _plan_receive(plan, recv_func, recv_at, contract)
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
        id(plan.nondriver_site.func): plan.nondriver_site.func,
    }.values():
        used = {n.value for group in cu.name_uses(func) for n in group}
        for name in (WORKER_INPUT, MODEL_INPUT):
            if name in used:
                raise Refusal(
                    "MIG108",
                    path,
                    f"{plan.name}.{func.name.value} already uses the name `{name}`",
                    func,
                )


@dataclass
class FunctionPaths:
    """One function's statements with their paths, and which statement holds a node."""

    func: cst.FunctionDef
    located: list[Located]
    owner: dict[int, Located] | None = None

    def site(self, node: cst.CSTNode) -> Located:
        if self.owner is None:
            self.owner = owners(self.func, self.located)
        found = self.owner.get(id(node))
        assert found is not None
        return found


def _site(where: FunctionPaths, node: cst.CSTNode) -> Located:
    return where.site(node)


def _locate(func: cst.FunctionDef, flag: str) -> FunctionPaths:
    return FunctionPaths(func, locate(func, flag))


def _plan_send(
    plan: WorkerPlan, func: cst.FunctionDef, at: Located, call: cst.Call, contract: Contract
) -> None:
    path = plan.path
    payload = cu.broadcast_payload(call)
    small = cu.single_small(at.statement)
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
        small = cu.single_small(block[i])
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
        if var in cu.loaded(block[i]) | cu.bound(block[i]):
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
        key = cu.string_value(element.key) if isinstance(element, cst.DictElement) else None
        if key is None or not key.isidentifier():
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}: a dict entry whose key is not a literal identifier",
                element,
            )
        assert isinstance(element, cst.DictElement)
        plan.keys.append(
            KeyPlan(key, element.value, _annotation(element.value, annotations, values), "None")
        )


def _local_annotations(func: cst.FunctionDef) -> dict[str, str]:
    out: dict[str, str] = {}
    for node in cu.find_all(func, lambda n: isinstance(n, cst.AnnAssign)):
        assert isinstance(node, cst.AnnAssign)
        if isinstance(node.target, cst.Name):
            out[node.target.value] = cu.code(node.annotation.annotation)
    return out


def _local_values(func: cst.FunctionDef) -> dict[str, cst.BaseExpression]:
    """Locals assigned exactly once (``x = <value>``) in the function."""
    seen: dict[str, list[cst.BaseExpression]] = {}
    for node in cu.find_all(func, lambda n: isinstance(n, cst.Assign)):
        assert isinstance(node, cst.Assign)
        for target in node.targets:
            for name in cu.target_names(target.target):
                seen.setdefault(name.value, []).append(node.value)
    return {name: found[0] for name, found in seen.items() if len(found) == 1}


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
            text = cu.dotted(root.func)
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


def _plan_condition(
    plan: WorkerPlan, func: cst.FunctionDef, at: Located, contract: Contract
) -> None:
    """When does the legacy driver reach the runner call after broadcasting?"""
    site = plan.driver_site
    assert site is not None and plan.send is not None
    path = plan.path
    if site.func is not func:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the driver calls the runner in `{site.func.name.value}`, not "
            f"in `{func.name.value}` where it broadcasts",
            site.call,
        )
    s_chain, c_chain = at.chain, site.where.chain
    depth = 0
    while (
        depth < min(len(s_chain), len(c_chain))
        and s_chain[depth][0] is c_chain[depth][0]
        and s_chain[depth][1] == c_chain[depth][1]
    ):
        depth += 1
    if depth >= len(c_chain) or depth >= len(s_chain) or s_chain[depth][0] is not c_chain[depth][0]:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: cannot order the broadcast and the driver's runner call",
            site.call,
        )
    if s_chain[depth][1] >= c_chain[depth][1]:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the driver calls the runner before it broadcasts",
            site.call,
        )
    between: list[cst.BaseStatement] = []
    for level in range(len(s_chain) - 1, depth, -1):
        block, index = s_chain[level]
        between.extend(block[index + 1 :])
    block, _ = s_chain[depth]
    between.extend(block[s_chain[depth][1] + 1 : c_chain[depth][1]])
    enclosing: list[tuple[cst.If, bool]] = []
    for level in range(depth + 1, len(c_chain)):
        block, index = c_chain[level]
        between.extend(block[:index])
        parent_block, parent_index = c_chain[level - 1]
        parent = parent_block[parent_index]
        if isinstance(parent, cst.If) and cu.flag_test(parent.test, contract.driver_flag) is None:
            in_body = any(s is block[0] for s in cu.body_of(parent.body)) if block else True
            enclosing.append((parent, in_body))
        elif not isinstance(parent, (cst.If, cst.With)):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: the driver's runner call sits in a "
                f"`{type(parent).__name__}` statement",
                parent,
            )
    guards: list[cst.BaseExpression] = []
    for statement in between:
        if (
            isinstance(statement, cst.If)
            and cu.flag_test(statement.test, contract.driver_flag) is not None
        ):
            continue
        if (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and cu.ends_with_exit(statement.body)
        ):
            guards.append(cst.UnaryOperation(operator=cst.Not(), expression=statement.test))
            continue
        if cu.contains(statement, lambda n: isinstance(n, (cst.Return, cst.Raise))):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: cannot tell when the driver reaches the runner call "
                f"(`{cu.code(statement).strip().splitlines()[0]}`)",
                statement,
            )
    for parent, in_body in enclosing:
        test = parent.test
        guards.append(test if in_body else cst.UnaryOperation(operator=cst.Not(), expression=test))
    rebound = cu.bound_in(between)
    request = site.call.args[0].value
    for expr in [*guards, request]:
        if not _is_pure(expr) or cu.loaded(expr) & rebound:
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: `{cu.code(expr).strip()}` cannot be evaluated before the broadcast",
                expr,
            )
    plan.request = request
    plan.condition = _conjunction([_simplify_not(g) for g in guards]) if guards else None


_FLIP = {
    cst.Equal: cst.NotEqual,
    cst.NotEqual: cst.Equal,
    cst.Is: cst.IsNot,
    cst.IsNot: cst.Is,
    cst.In: cst.NotIn,
    cst.NotIn: cst.In,
    cst.LessThan: cst.GreaterThanEqual,
    cst.GreaterThanEqual: cst.LessThan,
    cst.GreaterThan: cst.LessThanEqual,
    cst.LessThanEqual: cst.GreaterThan,
}


def _simplify_not(expr: cst.BaseExpression) -> cst.BaseExpression:
    if not (isinstance(expr, cst.UnaryOperation) and isinstance(expr.operator, cst.Not)):
        return expr
    inner = expr.expression
    if isinstance(inner, cst.UnaryOperation) and isinstance(inner.operator, cst.Not):
        return inner.expression
    if isinstance(inner, cst.Comparison) and len(inner.comparisons) == 1:
        target = inner.comparisons[0]
        flipped = _FLIP.get(type(target.operator))
        if flipped is not None:
            return inner.with_changes(
                comparisons=[target.with_changes(operator=flipped())], lpar=[], rpar=[]
            )
    if inner.lpar or isinstance(inner, (cst.Name, cst.Attribute, cst.Call, cst.Subscript)):
        return expr
    return expr.with_changes(
        expression=inner.with_changes(lpar=[cst.LeftParen()], rpar=[cst.RightParen()])
    )


def _conjunction(parts: list[cst.BaseExpression]) -> cst.BaseExpression:
    result = parts[0]
    for part in parts[1:]:
        result = cst.BooleanOperation(left=result, operator=cst.And(), right=part)
    return result


def _plan_receive(plan: WorkerPlan, func: cst.FunctionDef, at: Located, contract: Contract) -> None:
    path = plan.path
    small = cu.single_small(at.statement)
    if not (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
        and cu.is_broadcast(small.value, contract.broadcast_function)
    ):
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the receive is not `<dict> = {contract.broadcast_function}(src=...)`",
            at.statement,
        )
    target = small.targets[0].target
    assert isinstance(target, cst.Name)
    var = target.value
    plan.recv_func = func
    plan.recv_var = var
    block, index = at.chain[-1]
    anchor = block[index]
    if index + 1 < len(block):
        nxt = block[index + 1]
        if (
            isinstance(nxt, cst.If)
            and nxt.orelse is None
            and cu.ends_with_exit(nxt.body)
            and isinstance(nxt.test, cst.UnaryOperation)
            and isinstance(nxt.test.operator, cst.Not)
            and isinstance(nxt.test.expression, cst.Name)
            and nxt.test.expression.value == var
        ):
            anchor = nxt
            plan.recv_guarded = True
    plan.recv_anchor = anchor
    site = plan.nondriver_site
    assert site is not None
    if site.func is not func:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}: the non-driver calls the runner in `{site.func.name.value}`, "
            f"not in `{func.name.value}` where it receives",
            site.call,
        )
    keys = {k.key: k for k in plan.keys}
    defaults: dict[str, str | None] = {}
    accounted: set[int] = set()
    for node in cu.find_all(func, lambda n: isinstance(n, (cst.Call, cst.Subscript))):
        key = None
        default: str | None = None
        if isinstance(node, cst.Call):
            key = cu.dict_method_key(node, var)
            if key is not None:
                f = cst.ensure_type(node.func, cst.Attribute)
                default = (
                    cu.code(node.args[1].value)
                    if len(node.args) > 1
                    else ("None" if f.attr.value == "get" else None)
                )
                accounted.add(id(f.value))
        elif (
            isinstance(node, cst.Subscript)
            and isinstance(node.value, cst.Name)
            and node.value.value == var
            and len(node.slice) == 1
            and isinstance(node.slice[0].slice, cst.Index)
        ):
            key = cu.string_value(node.slice[0].slice.value)
            accounted.add(id(node.value))
        if key is None:
            continue
        if key not in keys:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}: the non-driver reads key {key!r}, which the driver's "
                "dict does not carry",
                node,
            )
        if key in defaults and defaults[key] != default:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}: key {key!r} is read with two different defaults",
                node,
            )
        defaults[key] = default
        plan.key_reads[id(node)] = key
    for node in cu.find_all(func, lambda n: isinstance(n, cst.If)):
        assert isinstance(node, cst.If)
        test = node.test
        if isinstance(test, cst.UnaryOperation) and isinstance(test.operator, cst.Not):
            test = test.expression
        if isinstance(test, cst.Name) and test.value == var:
            accounted.add(id(test))
    where = _locate(func, contract.driver_flag)
    for name in cu.name_uses(func)[0]:
        if name.value != var or id(name) in accounted:
            continue
        if _site(where, name).path == "driver":
            continue  # the driver's own variable of the same name
        raise Refusal(
            "MIG102", path, f"{plan.name}: `{var}` is used in a way the planner cannot trace", name
        )
    for key, default in defaults.items():
        keys[key].default = default


# ------------------------------------------------------------------ rewriting


def worker_input_class(plan: WorkerPlan, contract: Contract) -> list[cst.BaseStatement]:
    fields = []
    for k in plan.keys:
        annotation = k.annotation
        if k.default == "None" and annotation != "Any":
            annotation = f"Optional[{annotation}]"
        fields.append(f"    {k.key}: {annotation}\n")
    entries = "".join(f'            "{k.key}": self.{k.key},\n' for k in plan.keys)
    pops = "".join(
        f'            {k.key}=tensor_dict.pop("{k.key}"'
        + (f", {k.default}" if k.default is not None else "")
        + "),\n"
        for k in plan.keys
    )
    text = (
        f"{cu.typevar_line(plan.typevar, plan.input_name)}"
        "\n\n"
        "@dataclasses.dataclass(frozen=True)\n"
        f"class {plan.input_name}:\n"
        f'    """What ``{plan.name}`` broadcasts for itself each step, next to the model '
        'input."""\n\n'
        f"{''.join(fields)}\n"
        f"    def {contract.as_dict_method}(self) -> Dict[str, Any]:\n"
        "        return {\n"
        f"{entries}"
        "        }\n\n"
        "    @classmethod\n"
        f"    def {contract.from_dict_method}(\n"
        f"        cls: Type[{plan.typevar}], tensor_dict: Dict[str, Any]\n"
        f"    ) -> {plan.typevar}:\n"
        f'        """Pop this input\'s keys; what remains is the model input\'s."""\n'
        "        return cls(\n"
        f"{pops}"
        "        )\n"
    )
    return cu.parse_statements(text)


def needs_optional(plan: WorkerPlan) -> bool:
    return any(k.default == "None" and k.annotation != "Any" for k in plan.keys)


def rewrite_worker(plan: WorkerPlan, contract: Contract) -> cst.ClassDef:
    """The worker class with one broadcast per step."""
    assert plan.send is not None and plan.literal_stmt is not None
    assert plan.driver_site is not None and plan.nondriver_site is not None
    attr = plan.runner_attr
    ri = f"self.{attr}"
    replace: dict[int, cst.CSTNode] = {}
    inserts_before: dict[int, list[cst.BaseStatement]] = {}
    inserts_after: dict[int, list[cst.BaseStatement]] = {}
    # driver: the dict literal becomes the worker input
    literal_small = cu.single_small(plan.literal_stmt)
    make = cst.SimpleStatementLine(
        body=[
            cst.Assign(
                targets=[cst.AssignTarget(target=cst.Name(WORKER_INPUT))],
                value=_literal_as_call(plan),
            )
        ]
    )
    if isinstance(literal_small, cst.AnnAssign):
        as_dict = literal_small.with_changes(
            value=cst.parse_expression(f"{WORKER_INPUT}.{contract.as_dict_method}()")
        )
        as_dict_stmt = cst.SimpleStatementLine(body=[as_dict])
    else:
        as_dict_stmt = cu.parse_statements(
            f"{plan.dict_var} = {WORKER_INPUT}.{contract.as_dict_method}()\n"
        )[0]  # type: ignore[assignment]
    make = make.with_changes(leading_lines=plan.literal_stmt.leading_lines)  # type: ignore[attr-defined]
    replace[id(plan.literal_stmt)] = cst.FlattenSentinel([make, as_dict_stmt])  # type: ignore[assignment]
    request = cu.code(plan.request) if plan.request is not None else ""
    prepare = (
        f"{MODEL_INPUT} = {ri}.{contract.prepare_input_method}({request})\n"
        f"{plan.dict_var}.update({MODEL_INPUT}.{contract.as_dict_method}())\n"
    )
    if plan.condition is not None:
        cond = cu.code(plan.condition)
        prepare = f"if {cond}:\n" + "".join(f"    {line}\n" for line in prepare.splitlines())
    inserts_before[id(plan.send)] = cu.parse_statements(prepare)
    # non-driver: pop the worker's keys, then rebuild the model input
    pop = cu.parse_statements(
        f"{WORKER_INPUT} = {plan.input_name}.{contract.from_dict_method}({plan.recv_var})\n"
    )
    assert plan.recv_anchor is not None
    inserts_after[id(plan.recv_anchor)] = pop
    make_input = f"{MODEL_INPUT} = {ri}.{contract.make_input_method}({plan.recv_var})\n"
    nd = plan.nondriver_site
    if nd.where.path == "both":
        # Past the driver split the received dict is Optional again for a type checker;
        # on the non-driver path the guard after the receive has already left when it
        # was empty, so say so before using it.
        check = f"    assert {plan.recv_var} is not None\n" if plan.recv_guarded else ""
        make_input = f"if not self.{contract.driver_flag}:\n{check}    {make_input}"
    inserts_before[id(nd.where.statement)] = [
        *inserts_before.get(id(nd.where.statement), []),
        *cu.parse_statements(make_input),
    ]
    for site in {id(plan.driver_site.call): plan.driver_site, id(nd.call): nd}.values():
        first = site.call.args[0]
        replace[id(site.call)] = site.call.with_changes(
            args=[first.with_changes(value=cst.Name(MODEL_INPUT)), *site.call.args[1:]]
        )
    for node_id, key in plan.key_reads.items():
        replace[node_id] = cu.attr_of(WORKER_INPUT, key)
    new = plan.cdef.visit(_WorkerEdit(replace, inserts_before, inserts_after))
    assert isinstance(new, cst.ClassDef)
    return new


def _literal_as_call(plan: WorkerPlan) -> cst.Call:
    """``{"k": v, ...}`` -> ``WorkerInput(k=v, ...)`` keeping the literal's layout
    and comments (each entry's comma carries the whitespace that follows it)."""
    small = cu.single_small(plan.literal_stmt) if plan.literal_stmt is not None else None
    literal = small.value if isinstance(small, (cst.Assign, cst.AnnAssign)) else None
    assert isinstance(literal, cst.Dict)
    args = []
    for element in literal.elements:
        assert isinstance(element, cst.DictElement)
        args.append(
            cst.Arg(
                keyword=cst.Name(cu.string_value(element.key) or ""),
                value=element.value,
                equal=cst.AssignEqual(
                    whitespace_before=cst.SimpleWhitespace(""),
                    whitespace_after=cst.SimpleWhitespace(""),
                ),
                comma=element.comma,
            )
        )
    return cst.Call(
        func=cst.Name(plan.input_name),
        args=args,
        whitespace_before_args=literal.lbrace.whitespace_after,
    ).with_changes(
        args=[
            *args[:-1],
            *(
                [args[-1].with_changes(whitespace_after_arg=literal.rbrace.whitespace_before)]
                if args
                else []
            ),
        ]
    )


class _WorkerEdit(cst.CSTTransformer):
    def __init__(
        self,
        replace: dict[int, cst.CSTNode],
        before: dict[int, list[cst.BaseStatement]],
        after: dict[int, list[cst.BaseStatement]],
    ) -> None:
        self.replace = replace
        self.before = before
        self.after = after

    def on_leave(self, original_node, updated_node):  # type: ignore[no-untyped-def]
        new = self.replace.get(id(original_node), updated_node)
        before = self.before.get(id(original_node))
        after = self.after.get(id(original_node))
        if before or after:
            items = list(new.nodes) if isinstance(new, cst.FlattenSentinel) else [new]
            if before and items:
                first = items[0]
                lead = first.leading_lines
                before = [before[0].with_changes(leading_lines=lead), *before[1:]]
                items[0] = first.with_changes(leading_lines=[])
            return cst.FlattenSentinel([*(before or []), *items, *(after or [])])
        return new
