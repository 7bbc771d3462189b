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

Two larger pieces (:mod:`.shared_pieces`) are shared the same way when every input
holding them holds them equal as ``ast`` (temporaries aside):

* the dict literal's entries that read attributes of one field ``F``
  (``"k": self.F.k``) become ``_add_F_broadcastable_dict(tensor_dict, self.F)``
  right after the literal;
* the statements of ``from_broadcasted_tensor_dict`` that pop keys and bind one
  field ``N`` through temporaries only they read become one
  ``N = _init_N_from_tensor_dict(...)`` where the first of them stood. The names
  they read from the runner's module are imported inside the helper, so the base
  module still imports nothing of the engine at run time.

The parameter and result types are the fields' own annotations (the same in every
input, importable from the base module). Like the shared worker input, the helpers
are computed from every runner of the directory, whichever group is rewritten, so
every group generates the same base module.
"""

from __future__ import annotations

import builtins
import json
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import cast

import libcst as cst

from codemods.facts.signatures import Import, annotation_imports
from codemods.merge_broadcasts.planned import Planned
from codemods.merge_broadcasts.runner_model import ATTN_BACKEND, RunnerPlan
from codemods.merge_broadcasts.shared_pieces import (
    Entries,
    Run,
    SelfField,
    bound_runs,
    field_entries,
    run_code,
)
from codemods.merge_broadcasts.templates import quoted
from codemods.toolkit import cstutil, node_index
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract

DICT = "tensor_dict"
_BUILTINS = frozenset(dir(builtins))


@dataclass(frozen=True)
class Helper:
    name: str
    #: what it holds: ``statement:`` and the statement's code (without leading lines),
    #: ``entries:`` or ``run:`` and the piece's signature
    key: str
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
        return self.for_key(f"statement:{_code(statement)}")

    def for_key(self, key: str) -> Helper | None:
        return next((h for h in self.helpers if h.key == key), None)


#: a piece several inputs may hold: dict entries, or a run with its statements
Piece = Entries | tuple[Run, list[cst.BaseStatement]]


#: the text of each statement compared (by identity; the statement is held with it)
_CODES: dict[int, tuple[cst.CSTNode, str]] = node_index.kept()


def _code(statement: cst.CSTNode) -> str:
    """The statement's text without the lines before it (printed once per statement:
    the same statements are compared across inputs and groups)."""
    found = _CODES.get(id(statement))
    if found is not None and found[0] is statement:
        return found[1]
    node = statement
    if isinstance(node, (cst.SimpleStatementLine, cst.BaseCompoundStatement)):
        node = node.with_changes(leading_lines=[])
    text = cstutil.code(node).strip()
    node_index.keep(_CODES, id(statement), (statement, text))
    return text


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
        for n in cstutil.find_all(statement, cst.Attribute, cstutil.is_self_attr)
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
        renamed = cast(cst.BaseStatement, statement.visit(SelfField(name)))
        params = f"{DICT}: Dict[str, Any], {name}: {quoted(typed[0], typed[1])}"
        text = f"def {helper}({params}) -> None:\n" + _indent(_code(renamed))
        call = f"{helper}({DICT}, self.{name})"
        return Helper(helper, f"statement:{body}", call, _laid_out(text)), typed[1], typed[2]
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
    return Helper(helper, f"statement:{body}", call, _laid_out(text)), typed[1], typed[2]


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


def _runner_plans(
    planned: Planned, project: Project, contract: Contract, directory: Path
) -> list[RunnerPlan]:
    """Every runner of the directory that gets an input class, planned as its own
    group plans it (groups that cannot be planned give none); each group is planned
    once per run (``planned``) and the plans are only read."""
    groups = planned.groups(project)
    plans: list[RunnerPlan] = []
    for group in groups:
        if group.refusal is not None or not any(r.path.parent == directory for r in group.runners):
            continue
        try:
            runner_plans, _ = planned.plans(group, project, contract)
        except Exception:  # that group reports its own failure
            # (a refusal, or an internal error refusing only it): here its runners
            # just share nothing
            continue
        plans.extend(p for p in runner_plans if p.method is not None and p.path.parent == directory)
    return sorted(plans, key=lambda p: (str(p.path), p.name))


def shared_helpers(
    planned: Planned, project: Project, contract: Contract, directory: Path
) -> Helpers:
    """The helpers for the input classes of ``directory``; none when no statement is
    repeated. Computed once per run (``planned``); the caller gets its own copy."""
    if directory not in planned.helpers:
        planned.helpers[directory] = _shared_helpers(planned, project, contract, directory)
    made = planned.helpers[directory]
    return Helpers(list(made.helpers), set(made.imports), set(made.typing))


def _shared_helpers(
    planned: Planned, project: Project, contract: Contract, directory: Path
) -> Helpers:
    out = Helpers()
    plans = _runner_plans(planned, project, contract, directory)
    if len(plans) < 2:
        return out
    input_base = contract.input_bases[0]
    holders: dict[tuple[str, str], list[RunnerPlan]] = {}
    statements: dict[tuple[str, str], cst.BaseStatement] = {}
    pieces: dict[str, list[tuple[RunnerPlan, Piece]]] = {}
    for plan in plans:
        cdef = planned.input_class(plan, input_base, contract)[1]
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
        for piece_key, piece in _pieces(cdef, contract).items():
            pieces.setdefault(piece_key, []).append((plan, piece))
    taken = {n for p in plans for n in project.modules[str(p.path)].top_level_names}

    def add(made: tuple[Helper, tuple[Import, ...], frozenset[str]] | None) -> None:
        if made is None:
            return
        helper, imports, typing = made
        if helper.name in taken or any(h.name == helper.name for h in out.helpers):
            return
        out.helpers.append(helper)
        out.imports.update(imports)
        out.typing |= typing

    for key, holding in holders.items():
        if len(holding) >= 2:
            add(_helper(key[0], statements[key], holding, project))
    for piece_key, held in pieces.items():
        if len(held) < 2:
            continue
        holding = [plan for plan, _ in held]
        piece = held[0][1]
        if isinstance(piece, Entries):
            add(_entries_helper(piece_key, piece, holding, project))
        elif not (len(piece[1]) == 1 and out.for_statement(piece[1][0]) is not None):
            add(_run_helper(piece_key, *piece, holding, project))
    return out


def _fields(cdef: cst.ClassDef) -> set[str]:
    return {
        small.target.value
        for item in cstutil.body_of(cdef.body)
        for small in cstutil.small_statements(item)
        if isinstance(small, cst.AnnAssign) and isinstance(small.target, cst.Name)
    }


def _literal(method: cst.FunctionDef) -> cst.Dict | None:
    """The dict literal ``as_broadcastable_tensor_dict`` starts with."""
    first = cstutil.single_small(cstutil.body_of(method.body)[0])
    if isinstance(first, (cst.Assign, cst.AnnAssign)) and isinstance(first.value, cst.Dict):
        return first.value
    return None


def _pieces(cdef: cst.ClassDef, contract: Contract) -> dict[str, Piece]:
    """The pieces of the input class, by key (what :class:`Helper` holds)."""
    out: dict[str, Piece] = {}
    for item in cstutil.body_of(cdef.body):
        if not isinstance(item, cst.FunctionDef):
            continue
        if item.name.value == contract.as_dict_method:
            literal = _literal(item)
            for entries in field_entries(literal) if literal is not None else []:
                out[f"entries:{entries.signature}"] = entries
        elif item.name.value == contract.from_dict_method:
            body = list(cstutil.body_of(item.body))
            for run in bound_runs(body, _fields(cdef)):
                out[f"run:{run.signature}"] = (run, [body[i] for i in run.indices])
    return out


def _entries_helper(
    key: str, entries: Entries, plans: list[RunnerPlan], project: Project
) -> tuple[Helper, tuple[Import, ...], frozenset[str]] | None:
    """``_add_F_broadcastable_dict(tensor_dict, F)``: the entries as assignments."""
    name = entries.field
    typed = _annotation(plans, name, project)
    if typed is None or cstutil.is_optional(typed[0]):  # ``self.F.k`` needs an F
        return None
    if any("\n" in value for _, value in entries.items):
        return None
    helper = f"_add_{name}_broadcastable_dict"
    params = f"{DICT}: Dict[str, Any], {name}: {quoted(typed[0], typed[1])}"
    lines = ""
    for k, value in entries.items:
        line = f"    {DICT}[{json.dumps(k)}] = {value}\n"
        if len(line) > 80:  # 79 columns and the newline
            line = f"    {DICT}[{json.dumps(k)}] = (\n        {value}\n    )\n"
        lines += line
    text = f"def {helper}({params}) -> None:\n{lines}"
    call = f"{helper}({DICT}, self.{name})"
    return Helper(helper, key, call, _laid_out(text)), typed[1], typed[2]


def _run_helper(
    key: str,
    run: Run,
    statements: list[cst.BaseStatement],
    plans: list[RunnerPlan],
    project: Project,
) -> tuple[Helper, tuple[Import, ...], frozenset[str]] | None:
    """``N = _init_N_from_tensor_dict(...)``: the run, returning ``N``; the module
    names it reads imported inside it, as every holder imports them."""
    name = run.name
    typed = _annotation(plans, name, project)
    if typed is None:
        return None
    imports: list[str] = []
    for used in sorted(run.globals):
        sources = {project.modules[str(p.path)].import_sources.get(used) for p in plans}
        source = sources.pop() if len(sources) == 1 else None
        if source is None:
            return None
        imports.append(_import_line(used, source))
    code = run_code(statements)
    last = statements[-1]
    small = cstutil.single_small(last)
    if (
        isinstance(small, cst.Assign)
        and len(small.targets) == 1
        and isinstance(small.targets[0].target, cst.Name)
    ):  # ``N = <value>``: return the value
        above = (
            ""
            if len(statements) == 1
            else "".join(cstutil.code(line) for line in cstutil.comments(cstutil.leading(last)))
        )
        code[-1] = f"{above}return {cstutil.code(small.value)}\n"
    else:
        code.append(f"return {name}\n")
    if imports:
        imports.append("\n")
    helper = f"_init_{name}_from_tensor_dict"
    types = {DICT: "Dict[str, Any]", ATTN_BACKEND: "Any"}
    params = ", ".join(f"{p}: {types[p]}" for p in run.inputs)
    returns = quoted(typed[0], typed[1])
    body = "".join(
        _indent(part.rstrip("\n")) if part != "\n" else "\n" for part in [*imports, *code]
    )
    text = f"def {helper}({params}) -> {returns}:\n{body}"
    call = f"{name} = {helper}({', '.join(run.inputs)})"
    return Helper(helper, key, call, _laid_out(text)), typed[1], typed[2]


def _import_line(local: str, source: tuple[str, str | None, int]) -> str:
    module, name, level = source
    if name is None:
        return f"import {module}\n" if module == local else f"import {module} as {local}\n"
    alias = "" if name == local else f" as {local}"
    return f"from {'.' * level}{module} import {name}{alias}\n"


def use_helpers(
    cdef: cst.BaseStatement, helpers: Helpers, contract: Contract
) -> tuple[cst.BaseStatement, list[str]]:
    """The generated input class calling the helpers for the pieces and statements
    they hold, and the helpers it calls."""
    if not helpers.helpers or not isinstance(cdef, cst.ClassDef):
        return cdef, []
    called: list[str] = []

    def call_of(helper: Helper) -> cst.BaseStatement:
        if helper.name not in called:
            called.append(helper.name)
        return cstutil.parse_statements(f"{helper.call}\n")[0]

    items: list[cst.BaseStatement] = []
    for item in cstutil.body_of(cdef.body):
        if isinstance(item, cst.FunctionDef):
            if item.name.value == contract.as_dict_method:
                item = _use_entries(item, helpers, call_of)
            elif item.name.value == contract.from_dict_method:
                item = _use_runs(item, helpers, call_of, _fields(cdef))
            body: list[cst.BaseStatement] = []
            for statement in cstutil.body_of(item.body):
                helper = helpers.for_statement(statement)
                if helper is None:
                    body.append(statement)
                    continue
                body.append(cstutil.with_leading(call_of(helper), cstutil.leading(statement)))
            item = item.with_changes(body=item.body.with_changes(body=body))
        items.append(item)
    return cdef.with_changes(body=cdef.body.with_changes(body=items)), called


def _use_entries(
    method: cst.FunctionDef, helpers: Helpers, call_of: Callable[[Helper], cst.BaseStatement]
) -> cst.FunctionDef:
    """The literal without the entries a helper adds, the helpers called right after."""
    literal = _literal(method)
    if literal is None:
        return method
    moved: set[int] = set()
    calls: list[cst.BaseStatement] = []
    for entries in field_entries(literal):
        helper = helpers.for_key(f"entries:{entries.signature}")
        if helper is not None:
            moved.update(entries.indices)
            calls.append(call_of(helper))
    if not moved:
        return method
    keep = [i for i in range(len(literal.elements)) if i not in moved]
    smaller = cstutil.keep_elements(literal, keep) if keep else cst.Dict([])
    first, *rest = cstutil.body_of(method.body)
    first = cst.ensure_type(first, cst.SimpleStatementLine)
    small = first.body[0]
    assert isinstance(small, (cst.Assign, cst.AnnAssign))
    first = first.with_changes(body=[small.with_changes(value=smaller)])
    return method.with_changes(body=method.body.with_changes(body=[first, *calls, *rest]))


def _use_runs(
    method: cst.FunctionDef,
    helpers: Helpers,
    call_of: Callable[[Helper], cst.BaseStatement],
    fields: set[str],
) -> cst.FunctionDef:
    """Each run a helper holds as one call where its first statement stood."""
    body = list(cstutil.body_of(method.body))
    replaced: dict[int, cst.BaseStatement | None] = {}
    for run in bound_runs(body, fields):
        helper = helpers.for_key(f"run:{run.signature}")
        if helper is None or any(i in replaced for i in run.indices):
            continue
        first = run.indices[0]
        replaced[first] = cstutil.with_leading(call_of(helper), cstutil.leading(body[first]))
        replaced.update((i, None) for i in run.indices[1:])
    if not replaced:
        return method
    new_body = [replaced.get(i, s) for i, s in enumerate(body)]
    kept = [s for s in new_body if s is not None]
    return method.with_changes(body=method.body.with_changes(body=kept))
