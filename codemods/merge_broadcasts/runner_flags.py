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


def _opposite(literal: str) -> str:
    return "True" if literal == "False" else "False"


def helper_flags(
    driver: Sequence[cst.BaseStatement], non_driver: Sequence[cst.BaseStatement]
) -> dict[str, dict[str, dict[str, str]]]:
    """The driver's helpers that build what the non-driver branch builds with a literal
    flag (``sampling_metadata = self._prepare_sample(...)`` where the non-driver branch
    has ``sampling_metadata = SamplingMetadata(..., perform_sampling=False)``): helper
    name -> class -> keyword -> the non-driver's literal."""
    flags = non_driver_flags(non_driver)
    out: dict[str, dict[str, dict[str, str]]] = {}
    for statement in driver if flags else ():
        small = cstutil.single_small(statement)
        if not (
            isinstance(small, cst.Assign)
            and len(small.targets) == 1
            and isinstance(small.targets[0].target, cst.Name)
            and isinstance(small.value, cst.Call)
        ):
            continue
        callee = cstutil.dotted(small.value.func) or ""
        head, _, helper = callee.partition(".")
        if head != "self" or "." in helper:
            continue
        name = small.targets[0].target.value
        for (built, klass), wanted in flags.items():
            if built == name:
                out.setdefault(helper, {}).setdefault(klass, {}).update(wanted)
    return out


class _KeepInHelper(cst.CSTTransformer):
    """Each construction of a wanted class gives the flag the driver flag's value: a
    literal opposite to the non-driver's is replaced, a keyword left to a default that
    is the driver's side is added."""

    def __init__(
        self,
        wanted: dict[str, dict[str, str]],
        defaults: dict[str, dict[str, str]],
        driver_flag: str,
    ) -> None:
        self.wanted = wanted
        self.defaults = defaults
        self.flag = f"self.{driver_flag}"
        self.kept: list[tuple[str, str, str]] = []

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        klass = cstutil.dotted(updated_node.func)
        wanted = self.wanted.get(klass or "")
        if not wanted or klass is None:
            return updated_node
        defaults = self.defaults.get(klass.rsplit(".", 1)[-1], {})
        args = list(updated_node.args)
        if any(a.star for a in args):
            return updated_node
        given = {a.keyword.value: i for i, a in enumerate(args) if a.keyword is not None}
        for keyword, literal in wanted.items():
            value = cst.parse_expression(self.flag if literal == "False" else f"not {self.flag}")
            if keyword in given:
                arg = args[given[keyword]]
                if isinstance(arg.value, cst.Name) and arg.value.value == _opposite(literal):
                    args[given[keyword]] = arg.with_changes(value=value)
                    self.kept.append((klass, keyword, literal))
            elif defaults.get(keyword) == _opposite(literal) and args:
                last = args[-1]
                comma = (
                    args[-2].comma
                    if len(args) > 1 and isinstance(args[-2].comma, cst.Comma)
                    else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
                )
                new = cst.Arg(keyword=cst.Name(keyword), value=value, comma=last.comma)
                new = new.with_changes(
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""),
                        whitespace_after=cst.SimpleWhitespace(""),
                    )
                )
                args[-1] = last.with_changes(comma=comma)
                args.append(new)
                self.kept.append((klass, keyword, literal))
        return updated_node.with_changes(args=args)


def keep_flags_in_helper(
    method: cst.FunctionDef,
    wanted: dict[str, dict[str, str]],
    defaults: dict[str, dict[str, str]],
    driver_flag: str,
) -> tuple[cst.FunctionDef, list[tuple[str, str, str]]]:
    """The helper, where each construction of a wanted class reads the driver flag for
    the non-driver's flag; and the (class, keyword, literal) kept."""
    keep = _KeepInHelper(wanted, defaults, driver_flag)
    return cast(cst.FunctionDef, method.visit(keep)), keep.kept
