"""The legacy non-driver branch's flags, kept in the rewritten ``prepare_model_input``.

The legacy non-driver branch built objects of its own, e.g.
``SamplingMetadata(..., perform_sampling=False)``. After the rewrite that branch is the
rebuilt input's ``from_broadcasted_tensor_dict``, but ``prepare_model_input`` runs on
every rank wherever a rank prepares its own input (``profile_run``, dummy and warm-up
runs). Where the driver builds the same class into the same name with the opposite
literal, the keyword becomes the driver flag (``perform_sampling=self.is_driver_worker``,
or its negation): the driver keeps its value, every other rank the legacy one.

Where the driver leaves the keyword to the class default, or builds the object through
a helper or factory (vLLM 0.4.0's ``self._prepare_sample(...)``), the value is not kept:
``migrate``'s verification (:mod:`runnercheck.analysis.holds`) then refuses the group
with MIG111.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import libcst as cst

from codemods import cstutil

_BOOLS = ("True", "False")


def _construction(node: cst.CSTNode) -> tuple[str, str, cst.Call] | None:
    """``x = C(...)`` (a class by its capitalised name) -> (``x``, ``C``, the call)."""
    if not (
        isinstance(node, cst.Assign)
        and len(node.targets) == 1
        and isinstance(node.targets[0].target, cst.Name)
        and isinstance(node.value, cst.Call)
    ):
        return None
    callee = cstutil.dotted(node.value.func)
    if callee is None or not callee.rsplit(".", 1)[-1][:1].isupper():
        return None
    return node.targets[0].target.value, callee, node.value


def non_driver_flags(
    statements: Sequence[cst.BaseStatement],
) -> dict[tuple[str, str], dict[str, str]]:
    """``(name, class)`` -> the literal boolean keywords the non-driver branch gives it."""
    out: dict[tuple[str, str], dict[str, str]] = {}
    for statement in statements:
        for node in cstutil.find_all(statement, lambda n: _construction(n) is not None):
            found = _construction(node)
            assert found is not None
            name, callee, call = found
            flags = {
                a.keyword.value: a.value.value
                for a in call.args
                if a.keyword is not None
                and isinstance(a.value, cst.Name)
                and a.value.value in _BOOLS
            }
            if flags:
                out.setdefault((name, callee), {}).update(flags)
    return out


def _flipped(call: cst.Call, wanted: dict[str, str]) -> list[tuple[cst.Arg, str]]:
    """The keyword arguments of the driver's ``call`` whose literal is the opposite of
    the non-driver's, with the non-driver's literal."""
    out = []
    for arg in call.args:
        other = wanted.get(arg.keyword.value) if arg.keyword is not None else None
        value = arg.value
        if (
            other is not None
            and isinstance(value, cst.Name)
            and value.value in _BOOLS
            and value.value != other
        ):
            out.append((arg, other))
    return out


def kept_flags(
    driver: Sequence[cst.BaseStatement], non_driver: Sequence[cst.BaseStatement]
) -> list[tuple[cst.Arg, str, str]]:
    """Each driver keyword :func:`keep_non_driver_flags` rewrites: (the argument, the
    class, the non-driver's literal)."""
    flags = non_driver_flags(non_driver)
    out: list[tuple[cst.Arg, str, str]] = []
    for statement in driver if flags else ():
        for node in cstutil.find_all(statement, lambda n: _construction(n) is not None):
            found = _construction(node)
            assert found is not None
            name, callee, call = found
            wanted = flags.get((name, callee))
            if wanted:
                out.extend((arg, callee, other) for arg, other in _flipped(call, wanted))
    return out


class _KeepFlags(cst.CSTTransformer):
    def __init__(self, flags: dict[tuple[str, str], dict[str, str]], driver_flag: str) -> None:
        self.flags = flags
        self.driver_flag = driver_flag

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        found = _construction(updated_node)
        if found is None:
            return updated_node
        name, callee, call = found
        wanted = self.flags.get((name, callee))
        if not wanted:
            return updated_node
        flag = f"self.{self.driver_flag}"
        new = {
            id(arg): cst.parse_expression(flag if other == "False" else f"not {flag}")
            for arg, other in _flipped(call, wanted)
        }
        args = [a.with_changes(value=new[id(a)]) if id(a) in new else a for a in call.args]
        return updated_node.with_changes(value=call.with_changes(args=args))


def keep_non_driver_flags(
    driver: Sequence[cst.BaseStatement],
    non_driver: Sequence[cst.BaseStatement],
    driver_flag: str,
) -> list[cst.BaseStatement]:
    """The driver's statements, where each literal boolean keyword that the non-driver
    branch gives the same name's object otherwise now reads the driver flag."""
    flags = non_driver_flags(non_driver)
    if not flags:
        return list(driver)
    keep = _KeepFlags(flags, driver_flag)
    return [cast(cst.BaseStatement, s.visit(keep)) for s in driver]
