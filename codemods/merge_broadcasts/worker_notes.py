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

from codemods.merge_broadcasts.runner_model import line_in_method, methods
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.toolkit import cstutil
from codemods.toolkit.positions import Lines
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


def _bound_names(func: cst.FunctionDef, node_ids: set[int]) -> dict[int, str]:
    """The local each received value in ``node_ids`` is bound to (``n = data["n"]``)."""
    out: dict[int, str] = {}
    for node in cstutil.find_all(func, cst.Assign):
        assert isinstance(node, cst.Assign)
        if len(node.targets) == 1 and isinstance(node.targets[0].target, cst.Name):
            if id(node.value) in node_ids:
                out[id(node.value)] = node.targets[0].target.value
    return out


def sent_unlike_used_notes(
    plan: WorkerPlan, lines: Lines, facts: ClassFacts | None = None
) -> list[tuple[int, str]]:
    """``(line, note)`` for each key whose value the driver sends is not the value it
    goes on with: the other ranks bind the received key to a local (``blocks_to_copy =
    data["blocks_to_copy"]``) that the driver rebinds to something else before it
    sends (vLLM 0.5.0's CPU worker builds a tensor of the blocks to copy and uses it,
    but sends the request's list): the ranks run the same code on different values."""
    send, recv = plan.send_func, plan.recv_func
    if send is None or recv is None:
        return []
    received = _bound_names(recv, set(plan.key_reads))
    local_of = {plan.key_reads[i]: name for i, name in received.items()}
    notes = []
    for key in plan.keys:
        name = local_of.get(key.key)
        if name is None or (isinstance(key.value, cst.Name) and key.value.value == name):
            continue
        bound = [
            node
            for node in cstutil.find_all(send, cst.Assign)
            if isinstance(node, cst.Assign)
            and len(node.targets) == 1
            and isinstance(node.targets[0].target, cst.Name)
            and node.targets[0].target.value == name
            and id(node.value) not in plan.key_reads  # (the other ranks' own binding)
        ]
        if not bound or bound[-1].value.deep_equals(key.value):
            continue
        own = cstutil.code(bound[-1].value).strip()
        if "\n" in own:
            own = own.split("(", 1)[0] + "(...)"
        at = (
            lines.line(bound[-1])
            if facts is None
            else line_in_method(lines, plan.cdef, facts, bound[-1])
        )
        notes.append(
            (
                at,
                f"{plan.name}'s driver goes on with its own `{name} = {own}` here but "
                f"sends `{cstutil.code(key.value).strip()}` as `{key.key}`: the other "
                f"ranks' `{name}` is the value sent, not this one (carried over as it "
                f"was; send `{name}`)",
            )
        )
    return notes
