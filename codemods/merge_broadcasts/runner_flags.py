"""The legacy non-driver branch's flags, kept in the rewritten ``prepare_model_input``.

The legacy non-driver branch built objects of its own, e.g.
``SamplingMetadata(..., perform_sampling=False)``. After the rewrite that branch is the
rebuilt input's ``from_broadcasted_tensor_dict``, but ``prepare_model_input`` runs on
every rank wherever a rank prepares its own input (``profile_run``, dummy and warm-up
runs). Where the driver builds the same class into the same name with the opposite
literal, the keyword becomes the driver flag (``perform_sampling=self.is_driver_worker``,
or its negation): the driver keeps its value, every other rank the legacy one.

Where the driver leaves the keyword to a class default that is the opposite literal
(read from the class's ``__init__`` or dataclass fields), the keyword is added; where the
driver builds the object in one of the runner's own helpers (vLLM 0.4's
``self._prepare_sample(...)``), the helper's construction is rewritten the same way.
Otherwise (a default not known, a factory, a helper of another class) the value is not
kept: ``migrate``'s verification (:mod:`runnercheck.analysis.holds`,
:mod:`codemods.facts.sources`) then refuses the group with MIG111.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import cast

import libcst as cst

from codemods.toolkit import cstutil

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
        for node in cstutil.find_all(statement, cst.Assign, lambda n: _construction(n) is not None):
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


def _keep(
    call: cst.Call, wanted: dict[str, str], defaults: dict[str, str], driver_flag: str
) -> tuple[cst.Call, list[tuple[cst.CSTNode, str, str]]]:
    """The driver's construction ``call`` where each keyword the non-driver gives the
    literal ``wanted[keyword]`` reads the driver flag: a literal opposite to it is
    replaced, a keyword left to a default (``defaults``) that is the opposite is added.
    Also each change: (the argument replaced, or the call for one added; the keyword;
    the non-driver's literal)."""
    flag = f"self.{driver_flag}"
    args = list(call.args)
    if any(a.star for a in args):
        return call, []
    kept: list[tuple[cst.CSTNode, str, str]] = []
    given = {a.keyword.value: i for i, a in enumerate(args) if a.keyword is not None}
    for keyword, literal in wanted.items():
        value = cst.parse_expression(flag if literal == "False" else f"not {flag}")
        if keyword in given:
            arg = args[given[keyword]]
            if isinstance(arg.value, cst.Name) and arg.value.value == _opposite(literal):
                args[given[keyword]] = arg.with_changes(value=value)
                kept.append((arg, keyword, literal))
        elif defaults.get(keyword) == _opposite(literal) and args:
            last = args[-1]
            before = args[-2].comma if len(args) > 1 else None
            comma = (
                before
                if isinstance(before, cst.Comma)
                else cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            args[-1] = last.with_changes(comma=comma)
            args.append(
                cst.Arg(
                    keyword=cst.Name(keyword),
                    value=value,
                    equal=cst.AssignEqual(
                        whitespace_before=cst.SimpleWhitespace(""),
                        whitespace_after=cst.SimpleWhitespace(""),
                    ),
                    comma=last.comma,
                )
            )
            kept.append((call, keyword, literal))
    return call.with_changes(args=args), kept


def kept_flags(
    driver: Sequence[cst.BaseStatement],
    non_driver: Sequence[cst.BaseStatement],
    defaults: dict[str, dict[str, str]] | None = None,
) -> list[tuple[cst.CSTNode, str, str, str]]:
    """Each driver keyword :func:`keep_non_driver_flags` rewrites or adds: (the
    argument, or the call it is added to; the class; the keyword; the non-driver's
    literal)."""
    flags = non_driver_flags(non_driver)
    out: list[tuple[cst.CSTNode, str, str, str]] = []
    for statement in driver if flags else ():
        for node in cstutil.find_all(statement, cst.Assign, lambda n: _construction(n) is not None):
            found = _construction(node)
            assert found is not None
            name, callee, call = found
            wanted = flags.get((name, callee))
            if wanted:
                known = (defaults or {}).get(callee.rsplit(".", 1)[-1], {})
                _new, kept = _keep(call, wanted, known, "flag")  # only what changes is read
                out.extend((n, callee, keyword, other) for n, keyword, other in kept)
    return out


class _KeepFlags(cst.CSTTransformer):
    def __init__(
        self,
        flags: dict[tuple[str, str], dict[str, str]],
        defaults: dict[str, dict[str, str]],
        driver_flag: str,
    ) -> None:
        self.flags = flags
        self.defaults = defaults
        self.driver_flag = driver_flag

    def leave_Assign(self, original_node: cst.Assign, updated_node: cst.Assign) -> cst.Assign:
        found = _construction(updated_node)
        if found is None:
            return updated_node
        name, callee, call = found
        wanted = self.flags.get((name, callee))
        if not wanted:
            return updated_node
        known = self.defaults.get(callee.rsplit(".", 1)[-1], {})
        new, _kept = _keep(call, wanted, known, self.driver_flag)
        return updated_node.with_changes(value=new)


def keep_non_driver_flags(
    driver: Sequence[cst.BaseStatement],
    non_driver: Sequence[cst.BaseStatement],
    driver_flag: str,
    defaults: dict[str, dict[str, str]] | None = None,
) -> list[cst.BaseStatement]:
    """The driver's statements, where each literal boolean keyword that the non-driver
    branch gives the same name's object otherwise now reads the driver flag (also where
    the driver leaves it to a default, class -> keyword -> ``defaults``, that is the
    opposite)."""
    flags = non_driver_flags(non_driver)
    if not flags:
        return list(driver)
    keep = _KeepFlags(flags, defaults or {}, driver_flag)
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
    """Each construction of a wanted class in a helper goes through :func:`_keep`."""

    def __init__(
        self,
        wanted: dict[str, dict[str, str]],
        defaults: dict[str, dict[str, str]],
        driver_flag: str,
    ) -> None:
        self.wanted = wanted
        self.defaults = defaults
        self.driver_flag = driver_flag
        self.kept: list[tuple[str, str, str]] = []

    def leave_Call(self, original_node: cst.Call, updated_node: cst.Call) -> cst.Call:
        klass = cstutil.dotted(updated_node.func) or ""
        wanted = self.wanted.get(klass)
        if not wanted:
            return updated_node
        known = self.defaults.get(klass.rsplit(".", 1)[-1], {})
        new, kept = _keep(updated_node, wanted, known, self.driver_flag)
        self.kept += [(klass, keyword, literal) for _node, keyword, literal in kept]
        return new


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
