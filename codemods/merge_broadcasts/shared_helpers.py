"""Statements that several runner inputs of one directory repeat, as helpers of the
generated base module.

The input classes are written from each runner's legacy code, so runners copied from
one another give inputs whose (de)serialisation repeats the same statements: adding
the attention metadata to the dict, rebuilding it from what remains. When two or more
input classes of the directory hold the same statement, the generated base module
defines it once as a helper and each input calls it:

* in ``as_broadcastable_tensor_dict``, a statement that reads only ``tensor_dict``
  and one field ``F`` of the input and binds nothing becomes
  ``_add_F_broadcastable_dict(tensor_dict, F)``;
* in ``from_broadcasted_tensor_dict``, a statement that reads only ``tensor_dict``
  and the runner's attention backend and binds one name ``N`` becomes
  ``N = _init_N_from_tensor_dict(...)``, which returns ``N``.

The parameter and result types are the fields' own annotations (the same in every
input, importable from the base module). Like the shared worker input, the helpers
are computed from every runner of the directory, whichever group is rewritten, so
every group generates the same base module.
"""

from __future__ import annotations

import builtins
import weakref
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import libcst as cst

from codemods import cstutil
from codemods.facts.groups import find_groups
from codemods.facts.signatures import Import, annotation_imports
from codemods.merge_broadcasts.groups import plan_group
from codemods.merge_broadcasts.runner_model import ATTN_BACKEND, RunnerPlan
from codemods.merge_broadcasts.runner_rewrite import input_class
from codemods.templates import quoted
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract

DICT = "tensor_dict"
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Helper:
    name: str
    #: the statement as the input classes hold it (its code, without leading lines)
    statement: str
    #: the call that replaces it
    call: str
    #: the function in the base module
    text: str


@dataclass
class Helpers:
    """The helpers of one directory, and what their annotations need."""

    helpers: list[Helper] = field(default_factory=list)
    imports: set[Import] = field(default_factory=set)
    typing: set[str] = field(default_factory=set)

    def for_statement(self, statement: cst.BaseStatement) -> Helper | None:
        text = _code(statement)
        return next((h for h in self.helpers if h.statement == text), None)


def _code(statement: cst.CSTNode) -> str:
    if isinstance(statement, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        statement = statement.with_changes(leading_lines=[])
    return cstutil.code(statement).strip()


def _methods(cdef: cst.ClassDef, contract: Contract) -> dict[str, list[cst.BaseStatement]]:
    """The statements of the input's two methods that a helper may hold: all but the
    dict literal and the return of the first, all but the return of the second."""
    out: dict[str, list[cst.BaseStatement]] = {}
    for item in cstutil.body_of(cdef.body):
        if not isinstance(item, cst.FunctionDef):
            continue
        body = list(cstutil.body_of(item.body))
        if item.name.value == contract.as_dict_method:
            out["as_dict"] = body[1:-1]
        elif item.name.value == contract.from_dict_method:
            out["from_dict"] = body[:-1]
    return out


def _self_fields(statement: cst.CSTNode) -> set[str] | None:
    """The input fields the statement reads as ``self.F``; None when it uses ``self``
    in any other way."""
    fields: set[str] = set()
    attrs = {
        id(n.value): n.attr.value
        for n in cstutil.find_all(statement, lambda n: cstutil.is_self_attr(n))
        if isinstance(n, cst.Attribute)
    }
    for name in cstutil.name_uses(statement)[0]:
        if name.value != "self":
            continue
        if id(name) not in attrs:
            return None
        fields.add(attrs[id(name)])
    return fields


def _annotation(
    plans: list[RunnerPlan], name: str, project: Project
) -> tuple[str, tuple[Import, ...], frozenset[str]] | None:
    """The field's annotation, the same in every input that states one (``Any``
    states none) and importable elsewhere."""
    found = set()
    for plan in plans:
        stated = next((f.annotation for f in plan.fields if f.name == name), None)
        if stated is None:
            return None
        resolved = annotation_imports(stated, project.modules[str(plan.path)])
        if resolved is None:
            return None
        found.add(resolved)
    typed = {f for f in found if f[0] != "Any"} or found
    return typed.pop() if len(typed) == 1 else None


def _helper(
    kind: str, statement: cst.BaseStatement, plans: list[RunnerPlan], project: Project
) -> tuple[Helper, tuple[Import, ...], frozenset[str]] | None:
    loaded = cstutil.loaded(statement) - _BUILTINS
    bound = cstutil.bound(statement)
    if (
        _moves_one_key(statement)
        or DICT not in loaded
        or any(
            isinstance(n, (cst.Return, cst.Raise, cst.Yield, cst.Await))
            for n in cstutil.find_all(statement, lambda n: True)
        )
    ):
        return None
    body = _code(statement)
    if kind == "as_dict":
        fields = _self_fields(statement)
        if bound or fields is None or len(fields) != 1 or loaded - {DICT, "self"}:
            return None
        (name,) = fields
        typed = _annotation(plans, name, project)
        if typed is None:
            return None
        helper = f"_add_{name}_broadcastable_dict"
        renamed = cast(cst.BaseStatement, statement.visit(_SelfField(name)))
        params = f"{DICT}: Dict[str, Any], {name}: {quoted(typed[0], typed[1])}"
        text = f"def {helper}({params}) -> None:\n" + _indent(_code(renamed))
        call = f"{helper}({DICT}, self.{name})"
        return Helper(helper, body, call, _laid_out(text)), typed[1], typed[2]
    if len(bound) != 1 or "self" in loaded:
        return None
    (name,) = bound
    inputs = sorted(loaded - {name})
    if not set(inputs) <= {DICT, ATTN_BACKEND}:
        return None
    typed = _annotation(plans, name, project)
    if typed is None:
        return None
    helper = f"_init_{name}_from_tensor_dict"
    types = {DICT: "Dict[str, Any]", ATTN_BACKEND: "Any"}
    params = ", ".join(f"{p}: {types[p]}" for p in inputs)
    small = cstutil.single_small(statement)
    if isinstance(small, cst.Assign):  # ``N = <value>``: return the value
        returned = f"    return {cstutil.code(small.value)}\n"
    else:
        returned = _indent(body) + f"    return {name}\n"
    text = f"def {helper}({params}) -> {quoted(typed[0], typed[1])}:\n" + returned
    call = f"{name} = {helper}({', '.join(inputs)})"
    return Helper(helper, body, call, _laid_out(text)), typed[1], typed[2]


def _moves_one_key(statement: cst.BaseStatement) -> bool:
    """``x = tensor_dict.pop("k")`` or ``tensor_dict["k"] = x``: one key moved, which
    each input states in its own line rather than through a helper."""
    small = cstutil.single_small(statement)
    if isinstance(small, cst.Assign) and len(small.targets) == 1:
        value, target = small.value, small.targets[0].target
        if isinstance(value, cst.Call) and cstutil.dict_method_key(value, DICT) is not None:
            return True
        return (
            isinstance(target, cst.Subscript)
            and isinstance(target.value, cst.Name)
            and target.value.value == DICT
        )
    return False


def _laid_out(text: str, width: int = 79) -> str:
    """The helper with one parameter a line when its ``def`` line is too long."""
    func = cst.parse_statement(text)
    assert isinstance(func, cst.FunctionDef)
    if cstutil.def_line_length(func, 0) <= width:
        return text
    return cstutil.code(cstutil.one_param_per_line(func))


def _indent(code: str) -> str:
    return "".join(f"    {line}\n" if line else "\n" for line in code.splitlines())


class _SelfField(cst.CSTTransformer):
    def __init__(self, name: str) -> None:
        self.name = name

    def leave_Attribute(
        self, original_node: cst.Attribute, updated_node: cst.Attribute
    ) -> cst.BaseExpression:
        if cstutil.is_self_attr(original_node, self.name):
            return cst.Name(self.name)
        return updated_node


#: per project, the runner plans of each directory: every group of a directory asks
#: for them, and they are planned once per run
_PLANNED: weakref.WeakKeyDictionary[Project, dict[Path, list[RunnerPlan]]] = (
    weakref.WeakKeyDictionary()
)


def _runner_plans(
    project: Project, contract: Contract, directory: Path, sources: Mapping[Path, bytes]
) -> list[RunnerPlan]:
    """Every runner of the directory that gets an input class, planned as its own
    group plans it (groups that cannot be planned give none); planned once per
    project and directory (the plans are only read)."""
    planned = _PLANNED.setdefault(project, {})
    if directory not in planned:
        planned[directory] = _plan_runners(project, contract, directory, sources)
    return planned[directory]


def _plan_runners(
    project: Project, contract: Contract, directory: Path, sources: Mapping[Path, bytes]
) -> list[RunnerPlan]:
    groups, _ = find_groups(project)
    plans: list[RunnerPlan] = []
    for group in groups:
        if group.refusal is not None or not any(r.path.parent == directory for r in group.runners):
            continue
        try:
            modules = {p: cst.parse_module(sources[p]) for p in group.files}
            runner_plans, _ = plan_group(group, modules, project, contract)
        except Exception:  # that group reports its own failure
            # (a refusal, or an internal error refusing only it): here its runners
            # just share nothing
            continue
        plans.extend(p for p in runner_plans if p.method is not None and p.path.parent == directory)
    return sorted(plans, key=lambda p: (str(p.path), p.name))


def shared_helpers(
    project: Project,
    contract: Contract,
    directory: Path,
    sources: Mapping[Path, bytes],
) -> Helpers:
    """The helpers for the input classes of ``directory``; none when no statement is
    repeated."""
    out = Helpers()
    plans = _runner_plans(project, contract, directory, sources)
    if len(plans) < 2:
        return out
    input_base = contract.input_bases[0]
    holders: dict[tuple[str, str], list[RunnerPlan]] = {}
    statements: dict[tuple[str, str], cst.BaseStatement] = {}
    for plan in plans:
        cdef = input_class(plan, input_base, contract)[1]
        assert isinstance(cdef, cst.ClassDef)
        seen: set[tuple[str, str]] = set()
        for kind, body in _methods(cdef, contract).items():
            for statement in body:
                key = (kind, _code(statement))
                if key in seen:
                    continue
                seen.add(key)
                holders.setdefault(key, []).append(plan)
                statements.setdefault(key, statement)
    taken = {n for p in plans for n in project.modules[str(p.path)].top_level_names}
    for key, holding in holders.items():
        if len(holding) < 2:
            continue
        made = _helper(key[0], statements[key], holding, project)
        if made is None:
            continue
        helper, imports, typing = made
        if helper.name in taken or any(h.name == helper.name for h in out.helpers):
            continue
        out.helpers.append(helper)
        out.imports.update(imports)
        out.typing |= typing
    return out


def use_helpers(cdef: cst.BaseStatement, helpers: Helpers) -> tuple[cst.BaseStatement, list[str]]:
    """The generated input class calling the helpers for the statements they hold,
    and the helpers it calls."""
    if not helpers.helpers or not isinstance(cdef, cst.ClassDef):
        return cdef, []
    called: list[str] = []
    items: list[cst.BaseStatement] = []
    for item in cstutil.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef):
            body: list[cst.BaseStatement] = []
            for statement in cstutil.body_of(item.body):
                helper = helpers.for_statement(statement)
                if helper is None:
                    body.append(statement)
                    continue
                if helper.name not in called:
                    called.append(helper.name)
                call = cstutil.parse_statements(f"{helper.call}\n")[0]
                body.append(cstutil.with_leading(call, cstutil.leading(statement)))
            item = item.with_changes(body=item.body.with_changes(body=body))
        items.append(item)
    return cdef.with_changes(body=cdef.body.with_changes(body=items)), called
