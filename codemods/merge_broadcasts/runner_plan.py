"""Planning a runner's legacy driver/non-driver method: the split, the driver's side."""

from __future__ import annotations

import libcst as cst

from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts.runner_model import ExtraPlan, FieldPlan, RunnerPlan, is_docstring
from codemods.merge_broadcasts.runner_receive import plan_non_driver
from codemods.merge_broadcasts.runner_statements import (
    assigned_value,
    is_mutation,
    subscript_key,
    tainted_names,
)
from codemods.toolkit import cstutil
from codemods.toolkit.positions import Lines
from runnercheck.analysis.shapes import AFTER_SPLIT, EXTRA_BROADCAST, SplitShape, same_type
from runnercheck.contract import Contract


def plan_legacy_method(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    contract: Contract,
    shape: SplitShape | None = None,
    lines: Lines | None = None,
    method_line: int = 0,
) -> None:
    """Fill ``plan`` from the legacy driver/non-driver method, or raise Refusal.

    ``shape`` is what the analysis layer read of the method (the statements after
    the split, the values they read, the extra broadcasts); ``lines`` locates the
    statements it names, counted in a print of the method alone when ``method_line``
    (the line of its ``def``, as ``ast`` gives it) is known."""
    path = plan.path
    fn = contract.broadcast_function
    plan.method = method
    body = list(cstutil.body_of(method.body))
    start = 0
    if body and is_docstring(body[0]):
        plan.docstring = body[0]
        start = 1
    branch_at = None
    for index, statement in enumerate(body[start:], start):
        if (
            isinstance(statement, cst.If)
            and cstutil.flag_test(statement.test, contract.driver_flag) is not None
        ):
            branch_at = index
            break
    if branch_at is None:
        raise Refusal(
            "MIG105",
            path,
            f"{plan.name}.{method.name.value} broadcasts outside an "
            f"`if self.{contract.driver_flag}: ... else: ...` split",
            next(
                iter(cstutil.find_all(method, cst.Call, lambda n: cstutil.is_broadcast(n, fn))),
                method,
            ),
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
    driver_first = cstutil.flag_test(branch.test, contract.driver_flag)
    driver_block = list(cstutil.body_of(branch.body if driver_first else branch.orelse.body))
    other_block = list(cstutil.body_of(branch.orelse.body if driver_first else branch.body))
    for statement in plan.prologue:
        if cstutil.contains(statement, cst.Call, lambda n: cstutil.is_broadcast(n, fn)):
            raise Refusal(
                "MIG101",
                path,
                f"{plan.name}.{method.name.value}: a broadcast before the driver split",
                statement,
            )
    if shape is not None and shape.problem is not None:
        problem = shape.problem
        raise Refusal(
            "MIG101" if problem.shape == EXTRA_BROADCAST else "MIG105",
            path,
            f"{plan.name}.{method.name.value}: {problem.message}",
            line=problem.line,
            shape=problem.shape,
            advice=problem.advice,
        )
    if shape is None:
        for statement in epilogue[:-1]:
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: statements after the driver split "
                "other than the final `return`",
                statement,
                shape=AFTER_SPLIT,
            )
    plan.tail = list(epilogue[:-1])
    plan.tail_bound = list(shape.tail_bound) if shape is not None else []
    # ---- the returned values are the input fields
    returned = cstutil.single_small(epilogue[-1]) if epilogue else None
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
                f"{plan.name}.{method.name.value} returns `{cstutil.code(element.value)}`, "
                "not a plain name",
                element.value,
            )
        names.append(element.value.value)
    if len(set(names)) != len(names):
        raise Refusal(
            "MIG105", path, f"{plan.name}.{method.name.value} returns a name twice", returned
        )
    plan.returned = names
    fields = list(shape.fields) if shape is not None else names
    if shape is not None and shape.extras:
        assert lines is not None
        driver_block, other_block = _split_extras(
            plan, method, shape, driver_block, other_block, lines, method_line
        )
    for statement in [*plan.prologue, *driver_block, *other_block, *plan.tail]:
        early = cstutil.find_all(statement, cst.Return)
        if early:
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: an early `return` in the driver split",
                early[0],
            )
    stated = dict(shape.types) if shape is not None else {}
    # the value's own type (its annotation, the class it is built from, the element of
    # what it is unpacked from) holds where the old ``-> Tuple[...]`` says otherwise
    # (vLLM 0.3's ``Set[int]`` for a set of LoRARequest); the annotation where the
    # value states nothing
    declared = dict(zip(names, _tuple_annotations(method, len(names)), strict=True))
    annotations = {name: annotation for name, annotation in declared.items() if annotation != "Any"}
    annotations = {**annotations, **stated}
    retyped = {name: (old, where) for name, old, where in shape.retyped} if shape else {}
    for name in shape.nullable if shape is not None else ():
        annotation = annotations.get(name)
        if annotation is not None and annotation != "Any" and not _optional(annotation):
            annotations[name] = f"Optional[{annotation}]"
    _plan_driver(plan, method, driver_block, fields, contract)
    plan_non_driver(plan, method, other_block, fields, contract)
    tainted = tainted_names(plan.receive_var, plan.non_driver)
    for extra in plan.extras:
        tainted |= tainted_names(extra.shape.received, plan.non_driver)
    plan.fields = [
        FieldPlan(name, annotations.get(name, "Any"), driver_only=name not in tainted)
        for name in fields
    ]
    _none_defaults(plan)
    _note_retyped(plan, method, declared, stated, retyped, lines, method_line)
    driver_bound = cstutil.bound_in([*plan.prologue, *plan.driver_before, *plan.driver_after])
    non_driver_bound = cstutil.bound_in([*plan.prologue, *plan.non_driver])
    for name in fields:
        if name not in driver_bound or name not in non_driver_bound:
            side = "driver" if name not in driver_bound else "non-driver"
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: `{name}` is "
                f"{'returned' if name in names else 'read after the split'} but never "
                f"bound on the {side} path",
                returned,
            )


def _note_retyped(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    declared: dict[str, str],
    stated: dict[str, str],
    retyped: dict[str, tuple[str, str]],
    lines: Lines | None,
    method_line: int,
) -> None:
    """A note for each field typed from the value the driver assigns where an old
    annotation (the method's ``-> Tuple[...]``, or the NamedTuple a prepare method
    returns) says another type, at the line of the legacy method's ``return``."""
    at = plan.return_stmt
    line = 0
    if lines is not None and at is not None:
        line = lines.line_in(method, method_line, at) if method_line else lines.line(at)
    for f in plan.fields:
        value = stated.get(f.name)
        if value is None:
            continue
        olds: list[str] = []
        if f.name in retyped:
            annotation, where = retyped[f.name]
            olds.append(f"`{where}` annotates it `{annotation}`")
        old = declared.get(f.name, "Any")
        if old != "Any" and not same_type(old, value) and not same_type(old, f.annotation):
            olds.append(f"`{method.name.value}` declared `{old}`")
        if olds:
            why = f"is `{f.annotation}`, the value the driver assigns; " + " and ".join(olds)
            plan.retyped.append((line, f.name, why))


def _split_extras(
    plan: RunnerPlan,
    method: cst.FunctionDef,
    shape: SplitShape,
    driver_block: list[cst.BaseStatement],
    other_block: list[cst.BaseStatement],
    lines: Lines,
    method_line: int = 0,
) -> tuple[list[cst.BaseStatement], list[cst.BaseStatement]]:
    """Take the extra broadcasts out of both branches: the driver's ``if`` moves into
    the input's dict (see :func:`~.runner_rewrite.input_class`); the non-driver's
    receive goes, and the values it received are read from the merged dict."""

    def starting_on(statements: list[cst.BaseStatement], line: int) -> cst.BaseStatement | None:
        """The statement of the method that starts on ``line``."""
        if not method_line:
            return lines.at(statements, line)
        return next((s for s in statements if lines.line_in(method, method_line, s) == line), None)

    driver_out = list(driver_block)
    other_out = list(other_block)
    for extra in shape.extras:
        send_if = starting_on(driver_out, extra.send_line)
        recv_if = starting_on(other_out, extra.receive_line)
        if not isinstance(send_if, cst.If) or not isinstance(recv_if, cst.If):
            raise Refusal(
                "MIG101",
                plan.path,
                f"{plan.name}.{method.name.value}: the extra broadcast is not where "
                "the analysis found it",
                line=extra.send_line,
                shape=EXTRA_BROADCAST,
            )
        plan.extras.append(ExtraPlan(extra, send_if))
        driver_out.remove(send_if)
        inner = list(cstutil.body_of(recv_if.body))
        receive = next(
            s
            for s in inner
            if isinstance(small := cstutil.single_small(s), cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and small.targets[0].target.value == extra.receive_var
            and isinstance(small.value, cst.Call)
        )
        at = inner.index(receive)
        rest = inner[at + 1 :]
        if extra.reuses_dict_name:
            rest = [cstutil.rename(s, extra.receive_var, extra.received) for s in rest]
        elif extra.received != extra.receive_var:
            # the name may hold another value outside the ``if``: bind it here
            bind = cstutil.parse_statements(f"{extra.receive_var} = {extra.received}\n")[0]
            rest = [cstutil.with_leading(bind, cstutil.leading(receive)), *rest]
            receive = bind
        if rest and rest[0] is not receive:
            lead = cstutil.comments(cstutil.leading(receive))
            rest[0] = cstutil.with_leading(rest[0], [*lead, *cstutil.leading(rest[0])])
        else:
            rest = [cst.SimpleStatementLine(body=[cst.Pass()])]
        new_if = recv_if.with_changes(body=recv_if.body.with_changes(body=[*inner[:at], *rest]))
        other_out[other_out.index(recv_if)] = new_if
    return driver_out, other_out


def _none_defaults(plan: RunnerPlan) -> None:
    """A driver-only field the other ranks bind to ``None`` (and nothing else) gets
    ``None`` as its default: the statement goes, the field moves after the others."""
    for f in plan.fields:
        if not f.driver_only or f.from_request:
            continue
        binds = [s for s in [*plan.prologue, *plan.non_driver] if f.name in cstutil.bound_in([s])]
        if len(binds) != 1:
            continue
        small = cstutil.single_small(binds[0])
        if not (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.Name)
            and small.value.value == "None"
        ):
            continue
        plan.from_dict_skip.append(binds[0])
        f.none_default = True
        if not _optional(f.annotation) and f.annotation != "Any":
            f.annotation = f"Optional[{f.annotation}]"
    plan.fields.sort(key=lambda f: f.none_default or bool(f.from_request))


def _optional(annotation: str) -> bool:
    return annotation.startswith(("Optional[", "typing.Optional[")) or annotation == "None"


def _tuple_annotations(method: cst.FunctionDef, count: int) -> list[str]:
    ann = method.returns.annotation if method.returns is not None else None
    if (
        isinstance(ann, cst.Subscript)
        and cstutil.dotted(ann.value) in {"Tuple", "tuple", "typing.Tuple"}
        and len(ann.slice) == count
    ):
        out = []
        for element in ann.slice:
            if isinstance(element.slice, cst.Index):
                out.append(cstutil.code(element.slice.value))
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
        if cstutil.contains(statement, cst.Call, lambda n: cstutil.is_broadcast(n, fn))
    ]
    if (
        len(sends) != 1
        or len(cstutil.find_all(block[sends[0]], cst.Call, lambda n: cstutil.is_broadcast(n, fn)))
        != 1
    ):
        raise Refusal(
            "MIG101",
            path,
            f"{plan.name}.{method.name.value}: the driver branch must broadcast exactly once",
            block[sends[1]] if len(sends) > 1 else method,
        )
    send_at = sends[0]
    plan.send_stmt = block[send_at]
    small = cstutil.single_small(block[send_at])
    call = small.value if isinstance(small, cst.Expr) else None
    payload = cstutil.broadcast_payload(call) if isinstance(call, cst.Call) else None
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
        value = assigned_value(block[index], var)
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
        if not is_mutation(statement, var):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: `{cstutil.code(statement).strip()}` "
                f"between the dict and the broadcast",
                statement,
            )
    for statement in plan.driver_after:
        if var in cstutil.loaded(statement):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}.{method.name.value}: `{var}` is used after the broadcast",
                statement,
            )
    plan.keys = []
    for element in plan.literal.elements:
        if not isinstance(element, cst.DictElement) or cstutil.string_value(element.key) is None:
            raise Refusal(
                "MIG102",
                path,
                f"{plan.name}.{method.name.value}: a dict entry without a literal string key",
                element,
            )
        plan.keys.append(cstutil.string_value(element.key) or "")
    for statement in plan.mutations:
        key = subscript_key(statement, var)
        if key is not None:
            plan.keys.append(key)
