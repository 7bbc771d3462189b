"""Planning the condition under which a worker's step stops or skips the model."""

from __future__ import annotations

import libcst as cst

from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts.driver_paths import Located
from codemods.merge_broadcasts.worker_model import WorkerPlan, is_pure
from codemods.toolkit import cstutil
from runnercheck.contract import Contract


def plan_condition(
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
        if (
            isinstance(parent, cst.If)
            and cstutil.flag_test(parent.test, contract.driver_flag) is None
        ):
            in_body = any(s is block[0] for s in cstutil.body_of(parent.body)) if block else True
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
            and cstutil.flag_test(statement.test, contract.driver_flag) is not None
        ):
            continue
        if (
            isinstance(statement, cst.If)
            and statement.orelse is None
            and cstutil.ends_with_exit(statement.body)
        ):
            guards.append(cst.UnaryOperation(operator=cst.Not(), expression=statement.test))
            continue
        if cstutil.contains(statement, (cst.Return, cst.Raise)):
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: cannot tell when the driver reaches the runner call "
                f"(`{cstutil.code(statement).strip().splitlines()[0]}`)",
                statement,
            )
    for parent, in_body in enclosing:
        test = parent.test
        guards.append(test if in_body else cst.UnaryOperation(operator=cst.Not(), expression=test))
    rebound = cstutil.bound_in(between)
    request = site.call.args[0].value
    for expr in [*guards, request]:
        if not is_pure(expr) or cstutil.loaded(expr) & rebound:
            raise Refusal(
                "MIG105",
                path,
                f"{plan.name}: `{cstutil.code(expr).strip()}` cannot be evaluated before the broadcast",
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
