"""Planning a whole worker/runner group: every runner, then every worker, or a refusal."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable
from pathlib import Path

import libcst as cst

from codemods.facts.groups import ClassRef, Group, ref_of
from codemods.facts.signatures import inherited_local_types
from codemods.facts.sources import constructor_defaults
from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts.helper_records import helper_records, kept_note, plan_record_reads
from codemods.merge_broadcasts.narrowing import value_parameters
from codemods.merge_broadcasts.runner_execute import plan_execute, self_calls
from codemods.merge_broadcasts.runner_flags import (
    helper_flags,
    keep_flags_in_helper,
    kept_flags,
    non_driver_flags,
)
from codemods.merge_broadcasts.runner_model import (
    RunnerPlan,
    broadcast_methods,
    line_in_method,
    methods,
)
from codemods.merge_broadcasts.runner_plan import plan_legacy_method
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.merge_broadcasts.worker_plan import plan_worker
from codemods.toolkit import cstutil
from codemods.toolkit.positions import Lines
from runnercheck.analysis.model import CallSite, ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.requests import request_uses
from runnercheck.contract import Contract


def _class_def(module: cst.Module, name: str) -> cst.ClassDef | None:
    for statement in module.body:
        if isinstance(statement, cst.ClassDef) and statement.name.value == name:
            return statement
    return None


def _facts(project: Project, ref: ClassRef) -> ClassFacts:
    return project.modules[str(ref.path)].classes[ref.name]


def _top_level_class(
    modules: dict[Path, cst.Module], project: Project, ref: ClassRef
) -> cst.ClassDef:
    """The group member's class statement, or a refusal when it is not a top-level class."""
    cdef = _class_def(modules[ref.path], ref.name)
    if cdef is None:
        raise Refusal(
            "MIG103",
            ref.path,
            f"{ref.name} is not a top-level class",
            line=_facts(project, ref).line,
        )
    return cdef


def plan_group(
    group: Group,
    modules: dict[Path, cst.Module],
    project: Project,
    contract: Contract,
    line_index: Callable[[Path], Lines] | None = None,
) -> tuple[list[RunnerPlan], list[WorkerPlan]]:
    """Plan every class of the group, or raise Refusal (nothing is rewritten).

    ``line_index``: the line index of a file's module, when the caller keeps them."""
    if group.refusal is not None:
        found = group.refusal
        raise Refusal(found.code, found.path, found.message, line=found.line)
    runner_plans: dict[ClassRef, RunnerPlan] = {}
    lines: dict[Path, Lines] = {}

    def where(path: Path) -> Lines:
        if line_index is not None:
            return line_index(path)
        if path not in lines:
            lines[path] = Lines(modules[path])
        return lines[path]

    for ref in group.runners:
        cdef = _top_level_class(modules, project, ref)
        plan = RunnerPlan(ref.path, ref.name, cdef)
        legacy = broadcast_methods(
            cdef, contract, methods_calling(project, ref, {contract.broadcast_function})
        )
        if len(legacy) > 1:
            raise Refusal(
                "MIG101",
                ref.path,
                f"{ref.name} broadcasts in {len(legacy)} methods "
                f"({', '.join(m.name.value for m in legacy)})",
                _first_broadcast(legacy[1], contract),
            )
        if legacy and legacy[0].name.value == contract.prepare_input_method:
            raise Refusal(
                "MIG105",
                ref.path,
                f"{ref.name} broadcasts inside `{contract.prepare_input_method}` (the merged "
                "API): only the driver prepares inputs, so no other rank matches it (RC105); "
                "this needs a fix by hand",
                _first_broadcast(legacy[0], contract),
            )
        plan.value_params = value_parameters(
            c
            for ancestor in project.mro(_facts(project, ref))
            if Path(ancestor.path) in modules
            and (c := _class_def(modules[Path(ancestor.path)], ancestor.name)) is not None
        )
        if legacy:
            method = _facts(project, ref).methods.get(legacy[0].name.value)
            shape = method.split if method is not None else None
            if shape is not None and shape.unpacked:
                # a local bound again (``x = torch.tensor(x)``) is not what it was
                # unpacked as; a value read from the received dict states nothing
                stated = _stating_bindings(legacy[0])
                once = [u for u in shape.unpacked if stated.get(u[0], 0) == 1]
                from_bases = inherited_local_types(project, _facts(project, ref), once)
                known = {**from_bases, **dict(shape.types)}
                shape = dataclasses.replace(shape, types=tuple(sorted(known.items())))
            if shape is not None and shape.unpacked:
                plan.records = helper_records(project, _facts(project, ref), shape.unpacked)
            named = [m.name.value for m in methods(cdef)].count(legacy[0].name.value)
            line = method.line if method is not None and named == 1 else 0
            plan_legacy_method(plan, legacy[0], contract, shape, where(ref.path), line)
            plan.record_reads = plan_record_reads(plan)
            plan.flag_defaults = flag_defaults(plan, project, ref)
            _note_kept_flags(plan, contract, where(ref.path))
            _keep_flags_in_helpers(plan, contract, where(ref.path))
        runner_plans[ref] = plan
    # inherited inputs
    for ref, plan in runner_plans.items():
        if plan.method is not None:
            continue
        for ancestor in project.mro(_facts(project, ref))[1:]:
            other = runner_plans.get(ref_of(ancestor))
            if other is not None and other.method is not None:
                plan.owner = other
                break
    taken: dict[Path, set[str]] = {
        p: set(project.modules[str(p)].top_level_names) for p in group.files
    }
    for ref, plan in runner_plans.items():
        if plan.method is None:
            continue
        plan.input_name = f"{ref.name}Input"
        plan.typevar = f"T{plan.input_name}"
        for name in (plan.input_name, plan.typevar):
            if name in taken[ref.path]:
                raise Refusal(
                    "MIG108",
                    ref.path,
                    f"the name `{name}` for {ref.name}'s input is already used",
                    plan.cdef,
                )
            taken[ref.path].add(name)
        existing = {m.name.value for m in methods(plan.cdef)}
        for name in (contract.prepare_input_method, contract.make_input_method):
            if name in existing:
                raise Refusal("MIG108", ref.path, f"{ref.name} already defines `{name}`", plan.cdef)
    narrowing: list[tuple[RunnerPlan, RunnerPlan]] = []
    for ref, plan in runner_plans.items():
        source = plan.input_plan
        if source.method is None:
            continue
        execute = _facts(project, ref).methods.get(contract.execute_method)
        reads = execute.request_reads if execute is not None else None
        uses = request_uses(reads, source.method.name.value) if reads is not None else None
        plan_execute(plan, source.method.name.value, contract, uses, where(ref.path))
        if execute is not None and plan.execute is not None:
            _note_driver_only_reads(plan, execute.non_driver_names, contract)
        stray = self_calls(
            plan.cdef,
            source.method.name.value,
            plan.execute,
            methods_calling(project, ref, {source.method.name.value}, on_self=True),
        )
        if stray:
            raise Refusal(
                "MIG109",
                ref.path,
                f"{ref.name} calls `self.{source.method.name.value}` outside "
                f"`{contract.execute_method}`",
                stray[0],
            )
        plan.self_execute_in = methods_calling(
            project, ref, {contract.execute_method}, on_self=True
        ) - {contract.execute_method}
        plan.self_execute_calls = self_calls(
            plan.cdef, contract.execute_method, plan.execute, plan.self_execute_in
        )
        for call in plan.self_execute_calls:
            if not call.args or call.args[0].keyword is not None:
                raise Refusal(
                    "MIG105",
                    ref.path,
                    f"{ref.name}: `self.{contract.execute_method}` is called without "
                    "a positional request",
                    call,
                )
            plan.notes.append(
                (
                    line_in_method(where(ref.path), plan.cdef, _facts(project, ref), call),
                    f"{ref.name} calls `self.{contract.execute_method}` outside the worker's "
                    f"step: the legacy `{source.method.name.value}` broadcast there on the "
                    f"driver; it now prepares the input with "
                    f"`{contract.prepare_input_method}` and does not broadcast",
                )
            )
        bases_in_group = [
            ref_of(b)
            for b in project.direct_bases(_facts(project, ref))
            if isinstance(b, ClassFacts) and ref_of(b) in runner_plans
        ]
        inherited = [
            runner_plans[b].input_plan
            for b in bases_in_group
            if runner_plans[b].input_plan.method is not None
        ]
        plan.add_base = not inherited
        # a subclass runner with its own, unrelated input narrows its parent's contract
        plan.narrows = plan.method is not None and bool(inherited)
        plan.narrows_from = inherited[0].name if plan.narrows else ""
        if plan.narrows and len(bases_in_group) == 1:
            narrowing.append((plan, runner_plans[bases_in_group[0]]))
    for plan, parent in narrowing:
        _plan_generic_base(plan, parent, project, contract, taken)
    _check_dropped(runner_plans.values(), project)
    _note_kept_records(list(runner_plans.values()), contract)
    worker_plans: list[WorkerPlan] = []
    for ref in group.workers:
        cdef = _top_level_class(modules, project, ref)
        driven = [r for r in group.runners if runner_plans[r].input_plan.method is not None]
        if not driven:
            raise Refusal(
                "MIG103", ref.path, f"no runner of {ref.name} has a legacy input method", cdef
            )
        plan_w = WorkerPlan(ref.path, ref.name, cdef, group.runner_attr[ref])
        plan_w.input_name = f"{ref.name}Input"
        plan_w.typevar = f"T{plan_w.input_name}"
        for name in (plan_w.input_name, plan_w.typevar):
            if name in taken[ref.path]:
                raise Refusal(
                    "MIG108",
                    ref.path,
                    f"the name `{name}` for {ref.name}'s input is already used",
                    cdef,
                )
            taken[ref.path].add(name)
        runner_keys = sorted({k for r in group.runners for k in runner_plans[r].input_plan.keys})
        plan_worker(
            plan_w,
            contract,
            runner_keys,
            methods_calling(project, ref, {contract.broadcast_function, contract.execute_method}),
        )
        worker_plans.append(plan_w)
    return list(runner_plans.values()), worker_plans


def _stating_bindings(method: cst.FunctionDef) -> dict[str, int]:
    """How many assignments of ``method`` bind each name to something other than a
    value read from a dict by a literal key (``d.pop("k")``, ``d["k"]``, ``d.get("k")``)."""
    counts: dict[str, int] = {}
    for node in cstutil.find_all(method, (cst.Assign, cst.AnnAssign)):
        assert isinstance(node, (cst.Assign, cst.AnnAssign))
        if node.value is None or _reads_a_key(node.value):
            continue
        targets = node.targets if isinstance(node, cst.Assign) else [node]
        for target in targets:
            for name in _names(target.target):
                counts[name] = counts.get(name, 0) + 1
    return counts


def _names(target: cst.BaseExpression) -> list[str]:
    """The plain names an assignment target binds (``a``, ``(a, (b, c))``, ``[a, *b]``)."""
    if isinstance(target, cst.Name):
        return [target.value]
    if isinstance(target, (cst.Tuple, cst.List)):
        return [n for e in target.elements for n in _names(e.value)]
    if isinstance(target, cst.StarredElement):
        return _names(target.value)
    return []


def _reads_a_key(value: cst.BaseExpression) -> bool:
    if isinstance(value, cst.Subscript) and len(value.slice) == 1:
        index = value.slice[0].slice
        return isinstance(index, cst.Index) and cstutil.string_value(index.value) is not None
    return (
        isinstance(value, cst.Call)
        and isinstance(value.func, cst.Attribute)
        and value.func.attr.value in ("pop", "get")
        and bool(value.args)
        and cstutil.string_value(value.args[0].value) is not None
    )


def _note_kept_records(plans: list[RunnerPlan], contract: Contract) -> None:
    """One note per NamedTuple that ``prepare_model_input`` now reads as fields."""
    records = {(r.path, r.name): r for plan in plans for _, r in plan.record_reads}
    for record in records.values():
        note = kept_note(plans, record, contract.prepare_input_method)
        if note is not None:
            carrier, line, text = note
            carrier.notes.append((line, text))


def _plan_generic_base(
    plan: RunnerPlan,
    parent: RunnerPlan,
    project: Project,
    contract: Contract,
    taken: dict[Path, set[str]],
) -> None:
    """A subclass runner with its own input derives from a generic base of its parent
    instead (no ``# type: ignore[override]``), when nothing ties it to the parent's own
    contract methods: it overrides each of them and calls none through ``super()`` or
    the parent's name."""
    if parent.method is None or parent.input_plan is not parent or plan.execute is None:
        return
    if parent.rebase is not None or not parent.add_base:
        return
    contract_methods = {
        contract.execute_method,
        contract.prepare_input_method,
        contract.make_input_method,
        parent.method.name.value,
    }
    for method in _facts(project, ref_of_plan(plan)).methods.values():
        for call in method.calls:
            owner, _, name = call.callee.rpartition(".")
            if name in contract_methods and owner in ("super()", parent.name):
                return
    if not parent.generic:
        names = taken[parent.path]
        generic = next(
            (
                n
                for n in (f"{parent.name}Base", f"Generic{parent.name}")
                if n not in names and n not in contract.runner_bases
            ),
            None,
        )
        typevar = next((n for n in ("TInput", f"T{generic}Input") if n not in names), None)
        if generic is None or typevar is None:
            return
        names.update((generic, typevar))
        parent.generic, parent.generic_typevar = generic, typevar
    plan.rebase = parent
    plan.narrows, plan.narrows_from = False, ""
    plan.notes.append(
        (
            _facts(project, ref_of_plan(plan)).line,
            f"{plan.name} now derives from {parent.generic}[{plan.input_name}], the part of "
            f"{parent.name} its input does not change: `isinstance(x, {parent.name})` no "
            f"longer holds for {plan.name} instances",
        )
    )


def ref_of_plan(plan: RunnerPlan) -> ClassRef:
    return ClassRef(plan.path, plan.name)


def _note_driver_only_reads(plan: RunnerPlan, reads: dict[str, int], contract: Contract) -> None:
    """A latent bug the migration carries over, as a note: ``execute_model`` reads a
    value the legacy code never broadcast on a path the other ranks take too
    (``reads``: the names it reads there, with their first line)."""
    source = plan.input_plan
    driver_only = {f.name for f in source.fields if f.driver_only and not f.from_request}
    for target, returned in zip(plan.unpack_targets, source.returned, strict=True):
        if returned in driver_only and target in reads:
            plan.notes.append(
                (
                    reads[target],
                    f"{plan.name}.{contract.execute_method} reads `{target}` on a path the "
                    "other ranks take, but the legacy code never broadcast it: they see "
                    f"{source.input_name}'s value for them there (carried over as it was; "
                    "broadcast it, or read it on the driver only)",
                )
            )


def _first_broadcast(method: cst.FunctionDef, contract: Contract) -> cst.CSTNode:
    found = cstutil.find_all(
        method, cst.Call, lambda n: cstutil.is_broadcast(n, contract.broadcast_function)
    )
    return found[0] if found else method


def methods_calling(
    project: Project, ref: ClassRef, names: set[str], on_self: bool = False
) -> set[str]:
    """Names of ``ref``'s methods that call any of ``names`` (``self.<name>`` only when
    ``on_self``), from the analysis facts, so LibCST walks only those methods."""
    wanted = {f"self.{n}" for n in names}
    return {
        name
        for name, func in _facts(project, ref).methods.items()
        if any(
            (c.callee in wanted) if on_self else (c.callee.rpartition(".")[2] in names)
            for c in func.calls
        )
    }


def _check_dropped(plans: Iterable[RunnerPlan], project: Project) -> None:
    """Part (3) of the duplicate-key proof: every call of the constructor in the
    runner's classes (its bases and every subclass in the run, which may override
    the methods that build the value) passes the key explicitly."""
    for plan in plans:
        if not plan.dropped:
            continue
        cls = _facts(project, ClassRef(plan.path, plan.name))
        below = [c for c in project.all_classes() if cls in project.mro(c)]
        family = {id(c): c for c in [*project.mro(cls), *below]}
        wanted = {d.constructor for d in plan.dropped}
        calls: dict[str, list[tuple[ClassFacts, CallSite]]] = {name: [] for name in wanted}
        for member in sorted(family.values(), key=lambda c: (c.path, c.name)):
            for func in member.methods.values():
                for call in func.calls:
                    name = call.callee.rpartition(".")[2]
                    if name in wanted and not call.star_kwargs:
                        calls[name].append((member, call))
        for dropped in plan.dropped:
            found = calls[dropped.constructor]
            for member, call in sorted(found, key=lambda mc: (mc[0].path, mc[1].line)):
                if dropped.key not in call.keywords:
                    raise Refusal(
                        "MIG102",
                        plan.path,
                        f"{plan.name}: key {dropped.key!r} is not one of the returned "
                        "values and is not provably a duplicate: "
                        f"`{dropped.constructor}(...)` at {Path(member.path).name}:{call.line} "
                        f"does not pass `{dropped.key}=`",
                        dropped.node,
                    )
            if not found:
                raise Refusal(
                    "MIG102",
                    plan.path,
                    f"{plan.name}: key {dropped.key!r} is not one of the returned values and no "
                    f"`{dropped.constructor}(...)` call in {plan.name} or its bases shows that "
                    "another value carries it",
                    dropped.node,
                )


def _note_kept_flags(plan: RunnerPlan, contract: Contract, lines: Lines) -> None:
    """A note at each driver keyword that now reads the driver flag."""
    driver = [*plan.driver_before, *plan.driver_after]
    for node, klass, keyword, value in kept_flags(driver, plan.non_driver, plan.flag_defaults):
        plan.notes.append(
            (
                lines.line(node),
                f"{plan.name}.{contract.prepare_input_method} builds {klass}("
                f"{keyword}=self.{contract.driver_flag}): the other ranks, which "
                f"now prepare their own input in a profile or dummy run, keep {value} as "
                "the legacy non-driver branch gave it",
            )
        )


def _keep_flags_in_helpers(plan: RunnerPlan, contract: Contract, lines: Lines) -> None:
    """The runner's own helpers that build, for the driver, what the legacy non-driver
    branch builds with a literal flag (vLLM 0.4's ``self._prepare_sample(...)``): each
    construction there reads the driver flag, where the driver gave the opposite literal
    or left the keyword to a default (read from the class's ``__init__``) that is the
    opposite. The driver keeps its value, every other rank the legacy one."""
    wanted = helper_flags([*plan.driver_before, *plan.driver_after], plan.non_driver)
    if not wanted:
        return
    for item in cstutil.body_of(plan.cdef.body):
        if not isinstance(item, cst.FunctionDef) or item.name.value not in wanted:
            continue
        rewritten, kept = keep_flags_in_helper(
            item, wanted[item.name.value], plan.flag_defaults, contract.driver_flag
        )
        if not kept:
            continue
        plan.flag_helpers[item.name.value] = rewritten
        for klass, keyword, value in kept:
            plan.notes.append(
                (
                    lines.line(item),
                    f"{plan.name}.{item.name.value} builds {klass}({keyword}="
                    f"self.{contract.driver_flag}): the other ranks, which now prepare their "
                    f"own input in a profile or dummy run, keep {value} as the legacy "
                    "non-driver branch gave it",
                )
            )


def flag_defaults(plan: RunnerPlan, project: Project, ref: ClassRef) -> dict[str, dict[str, str]]:
    """Class -> keyword -> the literal default, for each class the legacy non-driver
    branch builds with a literal flag."""
    return {
        klass.rsplit(".", 1)[-1]: constructor_defaults(project, klass, str(ref.path))
        for _name, klass in non_driver_flags(plan.non_driver)
    }
