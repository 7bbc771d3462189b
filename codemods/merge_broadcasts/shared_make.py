"""``make_model_input_from_broadcasted_tensor_dict`` once, in the runner base the
runners already share.

Every migrated runner gets the same method but for the input class it rebuilds. Where
a runner was split into a generic base (:mod:`.generic_base`) and its subclasses with
inputs of their own derive from that base, the method is written once there, reading
the class from ``_model_input_cls`` (declared ``Type[TInput]`` in the base, set by
each runner), as vLLM's ``GPUModelRunnerBase`` came to do. Runners that share no such
base keep a method each: no base is made for the sake of one method.
"""

from __future__ import annotations

import libcst as cst

from codemods.merge_broadcasts.runner_model import ATTN_BACKEND, RunnerPlan
from codemods.toolkit import cstutil
from runnercheck.contract import Contract

#: the class attribute naming the input class a runner rebuilds
INPUT_CLASS = "_model_input_cls"


def shared_make(runner_plans: list[RunnerPlan], texts: list[str]) -> dict[int, RunnerPlan]:
    """``id(runner plan)`` -> the plan whose generic base holds its method: for every
    split runner with at least one subclass that derives from its generic base, each
    writing the method alike (the attention backend passed by all or none). ``texts``:
    the group's sources (a name already in use there is not taken)."""
    if any(INPUT_CLASS in text for text in texts):
        return {}
    out: dict[int, RunnerPlan] = {}
    for host in runner_plans:
        if not host.generic or host.method is None or host.narrows:
            continue
        members = [host] + [
            p for p in runner_plans if p.rebase is host and p.method is not None and not p.narrows
        ]
        if len(members) < 2 or len({p.uses_attn_backend for p in members}) != 1:
            continue
        for plan in members:
            out[id(plan)] = host
    return out


def input_class_attribute(plan: RunnerPlan) -> cst.BaseStatement:
    """``_model_input_cls = <its input>``, first in the runner's body."""
    return cstutil.parse_statements(f"{INPUT_CLASS} = {plan.input_name}\n")[0]


def with_input_class(cdef: cst.ClassDef, plan: RunnerPlan) -> cst.ClassDef:
    """The runner with its input class attribute after its docstring (a blank line
    between it and what follows)."""
    items = list(cstutil.body_of(cdef.body))
    at = 1 if items and _is_docstring(items[0]) else 0
    attribute = input_class_attribute(plan)
    if at:
        attribute = cstutil.with_leading(attribute, [cst.EmptyLine(indent=False)])
    rest = items[at:]
    if rest:
        lead = cstutil.leading(rest[0])
        if not lead or lead[0].comment is not None:
            rest[0] = cstutil.with_leading(rest[0], [cst.EmptyLine(indent=False), *lead])
    return cdef.with_changes(body=cdef.body.with_changes(body=[*items[:at], attribute, *rest]))


def _is_docstring(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return isinstance(small, cst.Expr) and isinstance(small.value, cst.SimpleString)


def is_input_class_attribute(statement: cst.BaseStatement) -> bool:
    small = cstutil.single_small(statement)
    return (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and cstutil.code(small.targets[0].target) == INPUT_CLASS
    )


def generic_members(host: RunnerPlan, contract: Contract) -> list[cst.BaseStatement]:
    """The declaration of the input class and the shared method, for the generic base
    of ``host``: ``[declaration, method]``."""
    args = ["tensor_dict"]
    if host.uses_attn_backend:
        args.append(f"{ATTN_BACKEND}=self.{ATTN_BACKEND}")
    call = cstutil.call_text(f"self.{INPUT_CLASS}.{contract.from_dict_method}", args, 15).replace(
        "\n", "\n        "
    )
    text = (
        "class _:\n"
        "    #: the input class this runner rebuilds from the broadcast dict\n"
        f"    {INPUT_CLASS}: Type[{host.generic_typevar}]\n"
        "\n"
        f"    def {contract.make_input_method}(\n"
        "        self, tensor_dict: Dict[str, Any]\n"
        f"    ) -> {host.generic_typevar}:\n"
        f"        return {call}\n"
    )
    holder = cstutil.parse_statements(text)[0]
    assert isinstance(holder, cst.ClassDef)
    declaration, method = cstutil.body_of(holder.body)
    return [declaration, method.with_changes(leading_lines=[cst.EmptyLine(indent=False)])]
