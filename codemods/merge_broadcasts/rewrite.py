"""Rewriting a planned group: new input classes, runner and worker classes, imports, the base module."""

from __future__ import annotations

import ast
import dataclasses
import re
from collections.abc import Sequence
from pathlib import Path

import libcst as cst

from codemods.facts.groups import ClassRef, Group, find_groups
from codemods.facts.signatures import runner_signature
from codemods.framework import verify
from codemods.framework.refusal import Refusal
from codemods.framework.results import GroupResult, RunnerSummary
from codemods.merge_broadcasts import templates, worker_hoist
from codemods.merge_broadcasts.generic_base import (
    annotate_runner_attribute,
    rebase,
    split_generic,
)
from codemods.merge_broadcasts.groups import plan_group
from codemods.merge_broadcasts.planned import ImportSites, Planned
from codemods.merge_broadcasts.runner_model import RunnerPlan
from codemods.merge_broadcasts.runner_rewrite import (
    input_class,
    rewrite_execute,
    runner_methods,
    wrap_self_execute,
)
from codemods.merge_broadcasts.runner_statements import subscript_key
from codemods.merge_broadcasts.shared_helpers import Helpers, shared_helpers, use_helpers
from codemods.merge_broadcasts.shared_inputs import SharedInputs, share_inputs
from codemods.merge_broadcasts.shared_make import shared_make, with_input_class
from codemods.merge_broadcasts.shared_worker_input import SharedInput, shared_inputs
from codemods.merge_broadcasts.worker_hoist import Hoist, Member, plan_hoist, slim_worker
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.merge_broadcasts.worker_notes import loop_exit_notes, sent_unlike_used_notes
from codemods.merge_broadcasts.worker_rewrite import (
    needs_optional,
    rewrite_worker,
    worker_input_class,
)
from codemods.toolkit import cstutil, imports, layout
from codemods.toolkit.positions import Lines
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.syntax import loaded_names
from runnercheck.contract import Contract


def import_path(
    project: Project, origin: Path, target: Path, sites: ImportSites | None = None
) -> str:
    """How ``origin`` should import the module at ``target``: the way ``origin``
    (or another module of its directory) imports its siblings, else relative
    inside a package, else by bare name. ``sites``: what earlier calls of the run
    found (filled here)."""
    sites = sites if sites is not None else ImportSites()
    siblings = sites.modules.get(origin.parent)
    if siblings is None:
        paths = [Path(p) for p in project.modules]
        siblings = sites.modules[origin.parent] = sorted(
            p for p in paths if p.parent == origin.parent
        )
    for source in [origin, *(p for p in siblings if p != origin)]:
        found = _sibling_import(_imports(project, source, sites), source, target.parent)
        if found is None:
            continue
        module, level = found
        if level:
            return "." * level + _relative_tail(origin.parent, level, target)
        head = module.rpartition(".")[0]
        return f"{head}.{target.stem}" if head else target.stem
    if (origin.parent / "__init__.py").exists() and target.parent == origin.parent:
        return f".{target.stem}"
    return target.stem


def _imports(project: Project, source: Path, sites: ImportSites) -> list[tuple[str, int, Path]]:
    """The modules ``source`` imports from, in order, with the file each resolves to
    (each resolved once: several names are often imported from one module)."""
    found = sites.imports.get(source)
    if found is None:
        found = sites.imports[source] = []
        facts = project.modules.get(str(source))
        listed = facts.import_sources.values() if facts is not None else ()
        for module, level in dict.fromkeys((m, lv) for m, _name, lv in listed):
            resolved = project.module_file(str(source), module, level)
            if resolved is not None:
                found.append((module, level, Path(resolved)))
    return found


def _sibling_import(
    imports: list[tuple[str, int, Path]], source: Path, directory: Path
) -> tuple[str, int] | None:
    """The first of ``source``'s imports that names another module of ``directory`` by
    its own name (relative, or absolute ending with the module's name): (module, level)."""
    for module, level, resolved in imports:
        if resolved.parent != directory or resolved == source:
            continue
        if level or resolved.stem == module.rpartition(".")[2]:
            return module, level
    return None


def _relative_tail(start: Path, level: int, target: Path) -> str:
    base = start
    for _ in range(level - 1):
        base = base.parent
    rel = target.with_suffix("").relative_to(base)
    return ".".join(rel.parts)


def _find_bases(project: Project, contract: Contract) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for cls in project.all_classes():
        if cls.name in (contract.input_bases[0], contract.runner_bases[0]):
            found.setdefault(cls.name, Path(cls.path))
    return found


def _runners_beside(project: Project, base_file: Path, planned: Planned | None) -> list[ClassFacts]:
    """Every runner of every group in the base module's directory: the groups that
    share the new base module all generate the same text."""
    groups = planned.groups(project) if planned is not None else find_groups(project)[0]
    refs = {r for g in groups for r in g.runners if r.path.parent == base_file.parent}
    return [
        project.modules[str(r.path)].classes[r.name]
        for r in sorted(refs, key=lambda r: (str(r.path), r.name))
    ]


def _rewrite_runner_class(
    plan: RunnerPlan, contract: Contract, runner_base: str, shares_make: bool = False
) -> cst.ClassDef:
    """The runner rewritten; ``shares_make``: its rebuilding method is its generic
    base's (:mod:`.shared_make`), it names its input class instead."""
    replace: dict[int, cst.CSTNode] = {}
    for call in plan.self_execute_calls:
        replace[id(call)] = wrap_self_execute(call, contract)
    items: list[cst.BaseStatement] = []
    for item in cstutil.body_of(plan.cdef.body):
        if item is plan.method:
            new_methods = runner_methods(plan, contract)
            if shares_make:
                new_methods = new_methods[:1]
            if plan.narrows:
                new_methods = [cstutil.ignore_on_def_line(m, "override") for m in new_methods]
            items.extend(new_methods)
            continue
        if item is plan.execute:
            item = rewrite_execute(plan)
            if plan.narrows:
                item = cstutil.ignore_on_def_line(item, "override")
        elif isinstance(item, cst.FunctionDef) and item.name.value in plan.self_execute_in:
            item = cstutil.replace_nodes(item, replace)
        elif isinstance(item, cst.FunctionDef) and item.name.value in plan.flag_helpers:
            item = plan.flag_helpers[item.name.value]
        items.append(item)
    cdef = plan.cdef.with_changes(body=plan.cdef.body.with_changes(body=items))
    if shares_make:
        cdef = with_input_class(cdef, plan)
    if plan.add_base:
        arg = cst.Arg(value=cst.parse_expression(f"{runner_base}[{plan.input_plan.input_name}]"))
        bases = [b for b in cdef.bases if cstutil.dotted(b.value) != "object"]
        if bases:
            last = bases[-1]
            bases[-1] = last.with_changes(
                comma=cst.Comma(whitespace_after=cst.SimpleWhitespace(" "))
            )
            bases.append(arg)
        else:
            bases = [arg]
        cdef = cdef.with_changes(
            bases=bases,
            lpar=cst.LeftParen() if isinstance(cdef.lpar, cst.MaybeSentinel) else cdef.lpar,
            rpar=cst.RightParen() if isinstance(cdef.rpar, cst.MaybeSentinel) else cdef.rpar,
        )
    return cdef


def rewrite_group(
    group: Group,
    modules: dict[Path, cst.Module],
    project: Project,
    contract: Contract,
    runner_plans: list[RunnerPlan],
    worker_plans: list[WorkerPlan],
    planned: Planned | None = None,
    unshared: frozenset[ClassRef] = frozenset(),
) -> GroupResult:
    """The group rewritten. ``planned`` (every file of the run as read, parsed and
    planned once) lets the groups of a directory share one worker input, but for the
    ``unshared`` workers (their groups were refused), and the helpers of their base
    module.

    The stages: the pieces the group's files share (:func:`_shared_pieces`), each file
    with its classes rewritten, its imports and its layout (:func:`_rewrite_file`),
    the base module of each shared worker step, then the runners' summaries."""
    result = GroupResult(group.label)
    rewrite = _shared_pieces(
        group, modules, project, contract, runner_plans, worker_plans, planned, unshared, result
    )
    for path in group.files:
        _rewrite_file(rewrite, path)
    for hoist in rewrite.hoists:
        _write_base(hoist, result, modules, planned, project, rewrite.limit)
    result.runners += [s for s in map(_runner_summary, runner_plans) if s is not None]
    for plan_w in worker_plans:
        result.worker_keys[plan_w.name] = [k.key for k in plan_w.keys]
    return result


@dataclasses.dataclass
class _GroupRewrite:
    """What the rewrite of each file of a group reads: the group's plans, the pieces
    its files share (the runner base module, the shared worker inputs and steps, the
    input classes) and the result being filled."""

    group: Group
    modules: dict[Path, cst.Module]
    project: Project
    contract: Contract
    runner_plans: list[RunnerPlan]
    planned: Planned | None
    result: GroupResult
    sites: ImportSites | None
    limit: int
    #: the module defining the runner and input bases (None: no runner needs them)
    base_file: Path | None
    shared: dict[ClassRef, SharedInput]
    hoists: list[Hoist]
    by_class: dict[tuple[Path, str], RunnerPlan | WorkerPlan]
    inputs: _Inputs
    #: per runner plan, the runner that holds the rebuilding method it shares
    make_hosts: dict[int, RunnerPlan]

    def imported(self, origin: Path, target: Path) -> str:
        return import_path(self.project, origin, target, self.sites)

    @property
    def input_base(self) -> str:
        return self.contract.input_bases[0]

    @property
    def runner_base(self) -> str:
        return self.contract.runner_bases[0]


@dataclasses.dataclass
class _FileRewrite:
    """One file of the group as its statements are rewritten: the new body and what
    it must import."""

    body: list[cst.BaseStatement] = dataclasses.field(default_factory=list)
    needs_dataclass: bool = False
    typing_names: set[str] = dataclasses.field(default_factory=set)
    from_imports: list[tuple[str, list[str]]] = dataclasses.field(default_factory=list)


def _shared_pieces(
    group: Group,
    modules: dict[Path, cst.Module],
    project: Project,
    contract: Contract,
    runner_plans: list[RunnerPlan],
    worker_plans: list[WorkerPlan],
    planned: Planned | None,
    unshared: frozenset[ClassRef],
    result: GroupResult,
) -> _GroupRewrite:
    """What the group's files share: the base module (new ones into ``result``), the
    shared worker inputs and steps, the input classes and the rebuilding methods."""
    sites = planned.import_sites(project) if planned is not None else None
    limit = layout.DEFAULT_LIMIT
    if group.files:
        where = group.files[0]
        limit = planned.line_limit(where) if planned is not None else layout.line_limit(where)
    base_file, helpers = _base_module(project, contract, runner_plans, planned, result)
    shared = _shared_worker_inputs(project, contract, worker_plans, planned, unshared)
    result.shared_with = sorted({(str(r.path), r.name) for s in shared.values() for r in s.users})
    for found in shared.values():
        if found.text is not None and found.path not in result.sources:
            result.sources[found.path] = found.text
            result.created.append(found.path)
    hoists = _hoists(project, contract, worker_plans, planned, unshared, shared)
    by_class: dict[tuple[Path, str], RunnerPlan | WorkerPlan] = {}
    for plan in runner_plans:
        by_class[(plan.path, plan.name)] = plan
    for plan_w in worker_plans:
        by_class[(plan_w.path, plan_w.name)] = plan_w
    input_base = contract.input_bases[0]
    inputs = _input_classes(
        project, contract, runner_plans, planned, helpers, input_base, group, limit
    )
    texts = [cstutil.module_code(modules[p]) for p in group.files if p in modules]
    make_hosts = shared_make(runner_plans, texts)
    result.worker_notes += _unshared_make_notes(project, contract, runner_plans, make_hosts)
    return _GroupRewrite(
        group,
        modules,
        project,
        contract,
        runner_plans,
        planned,
        result,
        sites,
        limit,
        base_file,
        shared,
        hoists,
        by_class,
        inputs,
        make_hosts,
    )


def _base_module(
    project: Project,
    contract: Contract,
    runner_plans: list[RunnerPlan],
    planned: Planned | None,
    result: GroupResult,
) -> tuple[Path | None, Helpers]:
    """The module defining the input and runner bases, when a runner needs them (a
    new one goes into ``result``), and the helpers it holds."""
    bases = _find_bases(project, contract)
    input_base, runner_base = contract.input_bases[0], contract.runner_bases[0]
    needs_bases = [p for p in runner_plans if p.method is not None or p.add_base]
    helpers = Helpers()
    if not needs_bases:
        return None, helpers
    if input_base in bases and runner_base in bases:
        base_file = bases[input_base]
        existing = project.modules.get(str(base_file))
        if planned is not None and existing is not None:
            # helpers an earlier run generated into the base are used as well
            made = shared_helpers(planned, project, contract, base_file.parent)
            made.helpers = [h for h in made.helpers if h.name in existing.top_level_names]
            helpers = made
        return base_file, helpers
    base_file = needs_bases[0].path.parent / f"{templates.BASE_MODULE_NAME}.py"
    if str(base_file) in project.modules or base_file.exists():
        raise Refusal(
            "MIG108",
            base_file,
            f"{base_file.name} exists but does not define {input_base} and {runner_base}",
            line=1,
        )
    signature = runner_signature(project, _runners_beside(project, base_file, planned))
    if planned is not None:
        helpers = shared_helpers(planned, project, contract, base_file.parent)
    result.sources[base_file] = templates.base_module(
        contract, signature, helpers.helpers, helpers.imports, helpers.typing
    )
    result.created.append(base_file)
    return base_file, helpers


def _rewrite_file(rewrite: _GroupRewrite, path: Path) -> None:
    """One file of the group: its runner and worker classes rewritten, then the
    imports its new code uses and its long lines wrapped."""
    module = rewrite.modules[path]
    edit = _FileRewrite()
    for statement in module.body:
        plan = (
            rewrite.by_class.get((path, statement.name.value))
            if isinstance(statement, cst.ClassDef)
            else None
        )
        if isinstance(plan, RunnerPlan):
            assert isinstance(statement, cst.ClassDef)
            _rewrite_runner(rewrite, edit, path, statement, plan)
        elif isinstance(plan, WorkerPlan):
            assert isinstance(statement, cst.ClassDef)
            _rewrite_worker(rewrite, edit, path, statement, plan)
        else:
            edit.body.append(statement)
    new_module = module.with_changes(body=edit.body)
    wanted: list[tuple[str, list[str]]] = []
    if edit.typing_names:
        wanted.append(("typing", sorted(edit.typing_names)))
    wanted.extend(edit.from_imports)
    new_module = imports.add_imports(
        new_module, ["dataclasses"] if edit.needs_dataclass else [], wanted
    )
    planned = rewrite.planned
    kept = planned.kept_text(path) if planned is not None else None
    new_module = layout.wrap_long_statements(
        new_module, cstutil.module_code(module), rewrite.limit, kept
    )
    result = rewrite.result
    result.modules[path] = new_module
    loaded = rewrite.project.modules[str(path)].loaded_names
    assert loaded is not None, "group files are read with names=True"
    result.used_before[path] = set(loaded) & imports.imported_names(module)


#: the ``typing`` names a generated input class may use
_TYPING = ("Any", "Dict", "Type", "TypeVar", "Optional", "Union", "List", "Tuple", "Set")


def _rewrite_runner(
    rewrite: _GroupRewrite,
    edit: _FileRewrite,
    path: Path,
    statement: cst.ClassDef,
    plan: RunnerPlan,
) -> None:
    """A runner class of the file: its input class before it (shared or its own),
    the class itself rebased or split around a generic parent, and their imports."""
    contract, runner_base = rewrite.contract, rewrite.runner_base
    new_cls = _rewrite_runner_class(plan, contract, runner_base, id(plan) in rewrite.make_hosts)
    if plan.method is not None:
        generated = rewrite.inputs.statements(plan, path)
        emitted = "\n".join(cstutil.code(g) for g in generated)
        called = [h for h in rewrite.inputs.called() if _names(emitted, h)]
        common_input = rewrite.inputs.common
        if (
            common_input is not None
            and id(plan) in common_input.classes
            and common_input.host.path != path
        ):
            host_path = common_input.host.path
            names = [common_input.name]
            if _names(emitted, common_input.typevar):
                names.append(common_input.typevar)
            edit.from_imports.append((rewrite.imported(path, host_path), names))
        generated[0] = cstutil.with_leading(generated[0], statement.leading_lines)
        new_cls = new_cls.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
        edit.body.extend(generated)
        edit.needs_dataclass = True
        edit.typing_names |= {name for name in _TYPING if _names(emitted, name)}
        input_base = rewrite.input_base
        owner_names = [*([input_base] if _names(emitted, input_base) else []), *called]
        if plan.add_base:
            owner_names.append(runner_base)
        assert rewrite.base_file is not None
        if rewrite.base_file != path and owner_names:
            edit.from_imports.append((rewrite.imported(path, rewrite.base_file), owner_names))
    elif plan.owner is not None and plan.execute is not None:
        owner = plan.owner
        if owner.path != path:
            edit.from_imports.append((rewrite.imported(path, owner.path), [owner.input_name]))
    if plan.add_base and plan.method is None:
        assert rewrite.base_file is not None
        if rewrite.base_file != path:
            edit.from_imports.append((rewrite.imported(path, rewrite.base_file), [runner_base]))
    parent = plan.rebase
    if parent is not None:
        new_cls = rebase(plan, new_cls)
        if parent.path != path:
            edit.from_imports.append((rewrite.imported(path, parent.path), [parent.generic]))
    if plan.generic:
        shares = rewrite.make_hosts.get(id(plan)) is plan
        edit.body.extend(split_generic(plan, new_cls, contract, shares))
    else:
        edit.body.append(new_cls)


def _rewrite_worker(
    rewrite: _GroupRewrite,
    edit: _FileRewrite,
    path: Path,
    statement: cst.ClassDef,
    plan: WorkerPlan,
) -> None:
    """A worker class of the file: its input class before it (unless it uses a
    shared one), the class slimmed where its directory shares a step, and its notes."""
    contract, planned, result = rewrite.contract, rewrite.planned, rewrite.result
    common = rewrite.shared.get(ClassRef(plan.path, plan.name))
    generated = [] if common is not None else worker_input_class(plan, contract)
    if common is not None:
        edit.from_imports.append((rewrite.imported(path, common.path), [common.name]))
    asserted = common.asserted if common is not None else ()
    runner_plans = rewrite.runner_plans
    new_w, generic, typed = (
        planned.worker(plan, runner_plans, contract, asserted, final_worker)
        if planned is not None
        else final_worker(plan, runner_plans, contract, asserted)
    )
    if typed:
        edit.typing_names.add("Type")
    lines = planned.lines(path) if planned is not None else Lines(rewrite.modules[path])
    facts = rewrite.project.modules[str(path)].classes.get(plan.name)
    exits = [(str(path), n, text) for n, text in loop_exit_notes(plan, lines, facts)]
    for parent_path, name in generic:
        if parent_path != path:
            edit.from_imports.append((rewrite.imported(path, parent_path), [name]))
    ref = ClassRef(plan.path, plan.name)
    for hoist in rewrite.hoists:
        split = hoist.members.get(ref)
        if split is not None and hoist.path is not None:
            new_w = slim_worker(new_w, split, hoist.parent, hoist.attributes)
            if path.parent not in result.hoisted:
                result.hoisted.append(path.parent)
            edit.from_imports.append((rewrite.imported(path, hoist.path), [worker_hoist.BASE_NAME]))
            exits = _hoisted_exits(exits, hoist, ref, plan.name)
        result.worker_notes += [(str(path), line, text) for line, text in hoist.notes.get(ref, [])]
    result.worker_notes += exits
    result.worker_notes += [
        (str(path), n, text) for n, text in sent_unlike_used_notes(plan, lines, facts)
    ]
    if common is not None:
        edit.body.append(new_w)
        return
    generated[0] = cstutil.with_leading(generated[0], statement.leading_lines)
    edit.body.extend(generated)
    edit.body.append(new_w.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
    edit.needs_dataclass = True
    edit.typing_names |= {"Any", "Dict", "Type", "TypeVar"}
    if needs_optional(plan):
        edit.typing_names.add("Optional")


def _hoisted_exits(
    exits: list[tuple[str, int, str]], hoist: Hoist, ref: ClassRef, name: str
) -> list[tuple[str, int, str]]:
    """A worker's loop-exit notes once its step is the shared base's: said once, by
    the first worker of the directory, of the base."""
    first = ref == next(iter(hoist.members))
    own, base = f"{name}.", f"{worker_hoist.BASE_NAME}."
    return [
        (
            str(hoist.path),
            0,
            text.replace(own, base, 1).replace(" here:", " where the stop signal did not come:", 1),
        )
        for _, _, text in exits
        if first
    ]


def _runner_summary(plan: RunnerPlan) -> RunnerSummary | None:
    """What the report says of a runner: its input class, fields and notes (for a
    runner with no method removed, only its notes; None when it has none)."""
    notes = [(str(plan.path), line, text) for line, text in plan.notes] + [
        (str(plan.path), line, f"{plan.input_name}.{name} {why}")
        for line, name, why in plan.retyped
    ]
    if plan.method is None:
        if not plan.notes:
            return None
        return RunnerSummary(
            runner=plan.name,
            input_class=plan.input_plan.input_name,
            fields=[],
            driver_only=[],
            keys=[],
            dynamic=[],
            dropped=[],
            notes=notes,
        )
    dynamic = [
        cstutil.code(s).strip() for s in plan.mutations if subscript_key(s, plan.dict_var) is None
    ]
    return RunnerSummary(
        runner=plan.name,
        input_class=plan.input_name,
        fields=[f.name for f in plan.fields],
        driver_only=[f.name for f in plan.fields if f.driver_only],
        keys=list(plan.keys),
        dynamic=dynamic,
        dropped=[dataclasses.replace(d, node=None) for d in plan.dropped],
        narrows=plan.narrows_from,
        notes=notes,
        removed_method=plan.method.name.value,
        returned_fields=_returned_fields(plan),
        optional_fields=[f.name for f in plan.fields if cstutil.is_optional(f.annotation)],
    )


def _unshared_make_notes(
    project: Project,
    contract: Contract,
    runner_plans: list[RunnerPlan],
    make_hosts: dict[int, RunnerPlan],
) -> list[tuple[str, int, str]]:
    """A note where two or more runners of the group each get the rebuilding method
    (alike but for the input class) and no runner base they share can hold it."""
    apart = [p for p in runner_plans if p.method is not None and id(p) not in make_hosts]
    if len(apart) < 2:
        return []
    first = apart[0]
    facts = project.modules[str(first.path)].classes.get(first.name)
    names = ", ".join(p.name for p in apart)
    return [
        (
            str(first.path),
            facts.line if facts is not None else 1,
            f"{names} each keep their own `{contract.make_input_method}` (the same but for "
            "the input class it rebuilds): they share no runner base to hold it once",
        )
    ]


def _names(text: str, name: str) -> bool:
    """``name`` appears in ``text`` as a word."""
    return re.search(rf"(?<![\w.]){re.escape(name)}\b", text) is not None


@dataclasses.dataclass
class _Inputs:
    """The group's generated input classes, sharing a base where they are near-identical
    (:mod:`.shared_inputs`), by runner plan, and the base once, in its host file."""

    generated: dict[int, tuple[list[cst.BaseStatement], list[str]]]
    common: SharedInputs | None
    placed: bool = False

    def called(self) -> list[str]:
        """The helpers any input class calls (each file imports those its classes call)."""
        return [*dict.fromkeys(h for _, called in self.generated.values() for h in called)]

    def statements(self, plan: RunnerPlan, path: Path) -> list[cst.BaseStatement]:
        common = self.common
        if common is None or id(plan) not in common.classes:
            return list(self.generated[id(plan)][0])
        out = list(common.classes[id(plan)])
        if path == common.host.path and not self.placed:
            self.placed = True
            blank = [cst.EmptyLine(), cst.EmptyLine()]
            out = [*common.base, cstutil.with_leading(out[0], blank), *out[1:]]
        return out


def _input_classes(
    project: Project,
    contract: Contract,
    runner_plans: list[RunnerPlan],
    planned: Planned | None,
    helpers: Helpers,
    input_base: str,
    group: Group,
    limit: int,
) -> _Inputs:
    generated: dict[int, tuple[list[cst.BaseStatement], list[str]]] = {}
    for plan in runner_plans:
        if plan.method is None:
            continue
        made = (
            planned.input_class(plan, input_base, contract)
            if planned is not None
            else input_class(plan, input_base, contract)
        )
        made[1], called = use_helpers(made[1], helpers, contract)
        generated[id(plan)] = (made, called)
    taken: set[str] = set()
    for path in group.files:
        facts = project.modules.get(str(path))
        if facts is not None:
            taken |= set(facts.top_level_names)
    for plan in runner_plans:
        taken |= {plan.input_name, plan.typevar, plan.generic, plan.generic_typevar}
    common = share_inputs(
        [(p, generated[id(p)][0]) for p in runner_plans if id(p) in generated],
        input_base,
        contract,
        taken,
        limit,
    )
    return _Inputs(generated, common)


def _returned_fields(plan: RunnerPlan) -> list[str]:
    """Per position of the legacy method's result, the input field holding it."""
    fields = {f.name for f in plan.fields}
    tail = set(plan.input_plan.tail_bound)
    return [r if r in fields and r not in tail else "" for r in plan.input_plan.returned]


def _shared_worker_inputs(
    project: Project,
    contract: Contract,
    worker_plans: list[WorkerPlan],
    planned: Planned | None,
    unshared: frozenset[ClassRef],
) -> dict[ClassRef, SharedInput]:
    """The workers of this group that use a shared worker input (their plans now
    name it), computed per directory from the whole project."""
    if not worker_plans or planned is None:
        return {}
    found: dict[ClassRef, SharedInput] = {}
    groups = planned.groups(project)
    for directory in sorted({p.path.parent for p in worker_plans}):
        limit = planned.line_limit(directory / f"{templates.WORKER_INPUT_MODULE_NAME}.py")
        key = (directory, limit, unshared)
        if key not in planned.worker_inputs:  # the same for every group of the directory
            planned.worker_inputs[key] = shared_inputs(
                project,
                contract,
                directory,
                planned.sources,
                limit,
                unshared,
                groups,
                planned.module,
                lambda group: planned.plans(group, project, contract)[1],
            )
        found.update(planned.worker_inputs[key])
    for plan in worker_plans:
        common = found.get(ClassRef(plan.path, plan.name))
        if common is not None:
            plan.input_name = common.name
    return found


def final_worker(
    plan: WorkerPlan, runner_plans: list[RunnerPlan], contract: Contract, asserted: Sequence[str]
) -> tuple[cst.ClassDef, list[tuple[Path, str]], bool]:
    """The worker class as the merge writes it, the (module, class) of each generic
    runner parent its runner attribute is now annotated with, and whether it now uses
    ``Type`` (the local holding a runner class it picks)."""
    new_w = rewrite_worker(plan, contract, asserted)
    generic: list[tuple[Path, str]] = []
    typed = False
    runners = {p.name for p in runner_plans}
    for parent in [p for p in runner_plans if p.generic]:
        new_w, annotated, types = annotate_runner_attribute(
            new_w, plan.runner_attr, parent.generic, runners
        )
        typed = typed or types
        if annotated:
            generic.append((parent.path, parent.generic))
    return new_w, generic, typed


def _hoists(
    project: Project,
    contract: Contract,
    worker_plans: list[WorkerPlan],
    planned: Planned | None,
    unshared: frozenset[ClassRef],
    shared: dict[ClassRef, SharedInput],
) -> list[Hoist]:
    """The shared step of each directory of this group's workers (made once per run)."""
    if planned is None or not shared:
        return []
    out: list[Hoist] = []
    for directory in sorted({p.path.parent for p in worker_plans}):
        key = (directory, unshared)
        if directory in planned.no_hoist:
            continue
        if key not in planned.hoists:
            planned.hoists[key] = _plan_directory(project, contract, planned, directory, shared)
        out.append(planned.hoists[key])
    return out


def _plan_directory(
    project: Project,
    contract: Contract,
    planned: Planned,
    directory: Path,
    shared: dict[ClassRef, SharedInput],
) -> Hoist:
    common = {r: s for r, s in shared.items() if r.path.parent == directory}
    if len(common) < 2 or len({(s.path, s.name) for s in common.values()}) > 1:
        return Hoist()
    members: list[Member] = []
    for group in planned.groups(project):
        refs = [w for w in group.workers if w in common]
        if not refs:
            continue
        try:
            runner_plans, worker_plans = planned.plans(group, project, contract)
        except Exception:  # the group is refused: its worker keeps its step
            continue
        for plan in worker_plans:
            ref = ClassRef(plan.path, plan.name)
            if ref not in common or any(m.ref == ref for m in members):
                continue
            plan.input_name = common[ref].name  # as the rewrite of its own group names it
            asserted = common[ref].asserted
            cdef, generic, _ = planned.worker(plan, runner_plans, contract, asserted, final_worker)
            module, lines = planned.module(plan.path), planned.lines(plan.path)
            facts = project.modules[str(plan.path)].classes.get(plan.name)
            members.append(Member(ref, plan, cdef, module, lines, generic, facts=facts))
    members.sort(key=lambda m: (str(m.ref.path), m.ref.name))
    found = next(iter(common.values()))
    runner_base = contract.runner_bases[0]
    where = _find_bases(project, contract).get(runner_base)
    generated = directory / f"{templates.BASE_MODULE_NAME}.py"
    return plan_hoist(
        members,
        project,
        contract,
        planned.sources,
        lambda origin, target: import_path(project, origin, target, planned.import_sites(project)),
        found.path,
        (runner_base, where if where is not None else generated),
    )


def _write_base(
    hoist: Hoist,
    result: GroupResult,
    modules: dict[Path, cst.Module],
    planned: Planned | None,
    project: Project,
    limit: int,
) -> None:
    """The base module with the shared step, into the group's result."""
    if hoist.base is None or hoist.path is None or planned is None:
        return
    path = hoist.path
    if hoist.exists:
        module = planned.module(path)
        new = worker_hoist.with_base(module, hoist)
    else:
        doc = '"""The step the workers of this package share."""\n'
        module = cst.parse_module(doc)
        new = worker_hoist.with_base(module, hoist)
    new = imports.add_imports(new, hoist.plain_imports, hoist.from_imports)
    if hoist.exists:
        kept = planned.kept_text(path)
        new = layout.wrap_long_statements(new, cstutil.module_code(module), limit, kept)
        modules[path] = module
        result.modules[path] = new
        result.used_before[path] = set()
    else:
        result.sources[path] = cstutil.module_code(new)
        result.created.append(path)


def finish(
    path: Path, module: cst.Module, used_before: set[str]
) -> tuple[cst.Module, str, ast.Module]:
    """The final module, its text and its ``ast``: imports that the rewrite made
    unused (read before, not any more: the broadcast function in a runner,
    ``Tuple``) are dropped. Whether a name is still read is decided on the
    ``ast`` of the generated text (cheap); the text is generated again only
    when an import goes."""
    code = cstutil.module_code(module)
    tree = verify.parse(path, code)
    unused = used_before - loaded_names(tree)
    if not unused:
        return module, code, tree
    module, new = imports.remove_names(module, code, unused)
    return module, new, verify.reparse(path, tree, code, new)


def merge(
    group: Group,
    modules: dict[Path, cst.Module],
    project: Project,
    contract: Contract,
    planned: Planned | None = None,
    unshared: frozenset[ClassRef] = frozenset(),
) -> GroupResult:
    """Plan then rewrite one group (raises Refusal; nothing is written here).

    With ``planned`` (the run's), ``modules`` are its modules of the group's files."""
    if planned is not None:
        runner_plans, worker_plans = planned.plans(group, project, contract)
    else:
        runner_plans, worker_plans = plan_group(group, modules, project, contract)
    return rewrite_group(
        group, modules, project, contract, runner_plans, worker_plans, planned, unshared
    )
