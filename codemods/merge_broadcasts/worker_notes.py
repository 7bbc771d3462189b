"""Latent bugs of a worker's step that the migration carries over, as notes.

The other ranks run the worker's step in a loop, ``while self.<step>(): pass``, and
the driver ends that loop by broadcasting an empty dict: the step's ``if not
<received>: return False``. Any other ``return False`` of the step ends the loop on a
step the driver goes on from (vLLM 0.5.0 returns False when a step has nothing to
run but swaps): the driver's next broadcast then has no receiver. The migration
keeps the code as it was and says so.
"""

from __future__ import annotations

import libcst as cst
import libcst.matchers as m

from codemods import cstutil
from codemods.merge_broadcasts.runner_model import line_in_method, methods
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.positions import Lines
from runnercheck.analysis.model import ClassFacts


def _found(
    root: cst.CSTNode, kind: type[cst.CSTNode], matcher: m.BaseMatcherNode
) -> list[cst.CSTNode]:
    """``m.findall(root, matcher)`` for a matcher of ``kind`` nodes, on the cheaper
    read-only walk (only the nodes of that kind are matched)."""
    return cstutil.find_all(root, kind, lambda node: m.matches(node, matcher))


def _loop_over(method: cst.FunctionDef, step: str) -> bool:
    loop = m.While(test=m.Call(func=m.Attribute(value=m.Name("self"), attr=m.Name(step))))
    return bool(_found(method, cst.While, loop))


def loop_exit_notes(
    plan: WorkerPlan, lines: Lines, facts: ClassFacts | None = None
) -> list[tuple[int, str]]:
    """``(line, note)`` for each ``return False`` of the non-driver step other than
    the stop signal's, when another method runs the step in a ``while`` loop
    (``facts``: the worker's, to count the line in its method alone)."""
    func = plan.recv_func
    if func is None or not plan.recv_var:
        return []
    step = func.name.value
    loops = [x.name.value for x in methods(plan.cdef) if x is not func and _loop_over(x, step)]
    if not loops:
        return []
    false = m.Return(value=m.Name("False"))
    signal = m.If(test=m.UnaryOperation(operator=m.Not(), expression=m.Name(plan.recv_var)))
    stops = {
        id(r) for guard in _found(func, cst.If, signal) for r in _found(guard, cst.Return, false)
    }
    notes = []
    for ret in _found(func, cst.Return, false):
        if id(ret) in stops:
            continue
        notes.append(
            (
                lines.line(ret) if facts is None else line_in_method(lines, plan.cdef, facts, ret),
                f"{plan.name}.{step} returns False here: the other ranks leave their loop "
                f"in `{loops[0]}` on a step the driver does not end with the empty dict, "
                "so the driver's next broadcast has no receiver (carried over as it was; "
                "return True unless the stop signal came)",
            )
        )
    return notes
