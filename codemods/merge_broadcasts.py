"""``merge-broadcasts``: one broadcast per step instead of the worker's plus the runner's.

Cross-file: a worker and the runners it drives are planned together (see
:mod:`codemods.merge_runner` and :mod:`codemods.merge_worker`), and the whole
group is rewritten or, on any shape the planner does not recognise, refused
with a reason and left byte-identical.

It is also an ordinary LibCST codemod (``MergeBroadcastsCommand``) for a
single file that holds both the worker and its runners.
"""

from __future__ import annotations

import ast
import dataclasses
import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

import libcst as cst
from libcst.codemod import CodemodContext, SkipFile, VisitorBasedCodemodCommand

from codemods import cstutil as cu
from codemods import imports, merge_runner, merge_worker, registry, templates
from codemods.merge_runner import RunnerPlan
from codemods.merge_worker import WorkerPlan
from codemods.refusal import Refusal
from codemods.results import GroupResult, RunnerSummary
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.groups import ClassRef, Group, find_groups, ref_of
from runnercheck.analysis.model import CallSite, ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.syntax import loaded_names
from runnercheck.contract import VLLM, Contract

NAME = registry.MERGE_BROADCASTS.name


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


def import_path(project: Project, origin: Path, target: Path) -> str:
    """How ``origin`` should import the module at ``target``: the way ``origin``
    (or another module of its directory) imports its siblings, else relative
    inside a package, else by bare name."""
    paths = [Path(p) for p in project.modules]
    neighbours = [origin, *sorted(p for p in paths if p.parent == origin.parent and p != origin)]
    for source in neighbours:
        facts = project.modules.get(str(source))
        if facts is None:
            continue
        for module, _name, level in facts.import_sources.values():
            found = project.module_file(str(source), module, level)
            resolved = Path(found) if found is not None else None
            if resolved is None or resolved.parent != target.parent or resolved == source:
                continue
            if level:
                return "." * level + _relative_tail(origin.parent, level, target)
            head = module.rpartition(".")[0]
            if resolved.stem == module.rpartition(".")[2]:
                return f"{head}.{target.stem}" if head else target.stem
    if (origin.parent / "__init__.py").exists() and target.parent == origin.parent:
        return f".{target.stem}"
    return target.stem


def _relative_tail(start: Path, level: int, target: Path) -> str:
    base = start
    for _ in range(level - 1):
        base = base.parent
    rel = target.with_suffix("").relative_to(base)
    return ".".join(rel.parts)


@dataclass
class _Bases:
    input_base: str
    runner_base: str
    #: where they live (None: to be generated next to the first runner)
    path: Path | None


def _find_bases(project: Project, contract: Contract) -> dict[str, Path]:
    found: dict[str, Path] = {}
    for cls in project.all_classes():
        if cls.name in (contract.input_bases[0], contract.runner_bases[0]):
            found.setdefault(cls.name, Path(cls.path))
    return found


def plan_group(
    group: Group,
    modules: dict[Path, cst.Module],
    project: Project,
    contract: Contract,
) -> tuple[list[RunnerPlan], list[WorkerPlan]]:
    """Plan every class of the group, or raise Refusal (nothing is rewritten)."""
    if group.refusal is not None:
        code, path, line, message = group.refusal
        raise Refusal(code, path, message, line=line)
    runner_plans: dict[ClassRef, RunnerPlan] = {}
    for ref in group.runners:
        cdef = _top_level_class(modules, project, ref)
        plan = RunnerPlan(ref.path, ref.name, cdef)
        legacy = merge_runner.broadcast_methods(
            cdef, contract, _methods_calling(project, ref, {contract.broadcast_function})
        )
        if len(legacy) > 1:
            raise Refusal(
                "MIG101",
                ref.path,
                f"{ref.name} broadcasts in {len(legacy)} methods "
                f"({', '.join(m.name.value for m in legacy)})",
                legacy[1],
            )
        if legacy and legacy[0].name.value == contract.prepare_input_method:
            raise Refusal(
                "MIG105",
                ref.path,
                f"{ref.name} broadcasts inside `{contract.prepare_input_method}` (the merged "
                "API): only the driver prepares inputs, so no other rank matches it (RC105); "
                "this needs a fix by hand",
                legacy[0],
            )
        if legacy:
            merge_runner.plan_legacy_method(plan, legacy[0], contract)
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
        existing = {m.name.value for m in merge_runner.methods(plan.cdef)}
        for name in (contract.prepare_input_method, contract.make_input_method):
            if name in existing:
                raise Refusal("MIG108", ref.path, f"{ref.name} already defines `{name}`", plan.cdef)
    for ref, plan in runner_plans.items():
        source = plan.input_plan
        if source.method is None:
            continue
        merge_runner.plan_execute(plan, source.method.name.value, contract)
        stray = merge_runner.self_calls(
            plan.cdef,
            source.method.name.value,
            plan.execute,
            _methods_calling(project, ref, {source.method.name.value}, on_self=True),
        )
        if stray:
            raise Refusal(
                "MIG109",
                ref.path,
                f"{ref.name} calls `self.{source.method.name.value}` outside "
                f"`{contract.execute_method}`",
                stray[0],
            )
        plan.self_execute_in = _methods_calling(
            project, ref, {contract.execute_method}, on_self=True
        ) - {contract.execute_method}
        plan.self_execute_calls = merge_runner.self_calls(
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
    _check_dropped(runner_plans.values(), project)
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
        merge_worker.plan_worker(
            plan_w,
            contract,
            runner_keys,
            _methods_calling(project, ref, {contract.broadcast_function, contract.execute_method}),
        )
        worker_plans.append(plan_w)
    return list(runner_plans.values()), worker_plans


def _methods_calling(
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


# ---------------------------------------------------------------- rewriting


def _rewrite_runner_class(plan: RunnerPlan, contract: Contract, runner_base: str) -> cst.ClassDef:
    replace: dict[int, cst.CSTNode] = {}
    for call in plan.self_execute_calls:
        replace[id(call)] = merge_runner.wrap_self_execute(call, contract)
    items: list[cst.BaseStatement] = []
    for item in cu.body_of(plan.cdef.body):
        if item is plan.method:
            new_methods = merge_runner.runner_methods(plan, contract)
            if plan.narrows:
                new_methods = [cu.ignore_on_def_line(m, "override") for m in new_methods]
            items.extend(new_methods)
            continue
        if item is plan.execute:
            item = merge_runner.rewrite_execute(plan)
            if plan.narrows:
                item = cu.ignore_on_def_line(item, "override")
        elif isinstance(item, cst.FunctionDef) and item.name.value in plan.self_execute_in:
            item = cu.replace_nodes(item, replace)
        items.append(item)
    cdef = plan.cdef.with_changes(body=plan.cdef.body.with_changes(body=items))
    if plan.add_base:
        arg = cst.Arg(value=cst.parse_expression(f"{runner_base}[{plan.input_plan.input_name}]"))
        bases = [b for b in cdef.bases if cu.dotted(b.value) != "object"]
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
) -> GroupResult:
    result = GroupResult(group.label)
    bases = _find_bases(project, contract)
    input_base, runner_base = contract.input_bases[0], contract.runner_bases[0]
    needs_bases = [p for p in runner_plans if p.method is not None or p.add_base]
    base_file: Path | None = None
    if needs_bases:
        if input_base in bases and runner_base in bases:
            base_file = bases[input_base]
        else:
            base_file = needs_bases[0].path.parent / f"{templates.BASE_MODULE_NAME}.py"
            if str(base_file) in project.modules or base_file.exists():
                raise Refusal(
                    "MIG108",
                    base_file,
                    f"{base_file.name} exists but does not define {input_base} and {runner_base}",
                    line=1,
                )
            result.sources[base_file] = templates.base_module(contract)
            result.created.append(base_file)
    by_class: dict[tuple[Path, str], RunnerPlan | WorkerPlan] = {}
    for plan in runner_plans:
        by_class[(plan.path, plan.name)] = plan
    for plan_w in worker_plans:
        by_class[(plan_w.path, plan_w.name)] = plan_w
    for path in group.files:
        module = modules[path]
        body: list[cst.BaseStatement] = []
        needs_dataclass = False
        typing_names: set[str] = set()
        from_imports: list[tuple[str, list[str]]] = []
        for statement in module.body:
            plan_any = (
                by_class.get((path, statement.name.value))
                if isinstance(statement, cst.ClassDef)
                else None
            )
            if isinstance(plan_any, RunnerPlan):
                assert isinstance(statement, cst.ClassDef)
                new_cls = _rewrite_runner_class(plan_any, contract, runner_base)
                if plan_any.method is not None:
                    generated = merge_runner.input_class(plan_any, input_base, contract)
                    generated[0] = cu.with_leading(generated[0], statement.leading_lines)
                    new_cls = new_cls.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()])
                    body.extend(generated)
                    needs_dataclass = True
                    typing_names |= {"Any", "Dict", "Type", "TypeVar"}
                    owner_names = [input_base]
                    if plan_any.add_base:
                        owner_names.append(runner_base)
                    assert base_file is not None
                    if base_file != path:
                        from_imports.append((import_path(project, path, base_file), owner_names))
                elif plan_any.owner is not None and plan_any.execute is not None:
                    owner = plan_any.owner
                    if owner.path != path:
                        from_imports.append(
                            (import_path(project, path, owner.path), [owner.input_name])
                        )
                if plan_any.add_base and plan_any.method is None:
                    assert base_file is not None
                    if base_file != path:
                        from_imports.append((import_path(project, path, base_file), [runner_base]))
                body.append(new_cls)
                continue
            if isinstance(plan_any, WorkerPlan):
                assert isinstance(statement, cst.ClassDef)
                generated = merge_worker.worker_input_class(plan_any, contract)
                generated[0] = cu.with_leading(generated[0], statement.leading_lines)
                new_w = merge_worker.rewrite_worker(plan_any, contract)
                body.extend(generated)
                body.append(new_w.with_changes(leading_lines=[cst.EmptyLine(), cst.EmptyLine()]))
                needs_dataclass = True
                typing_names |= {"Any", "Dict", "Type", "TypeVar"}
                if merge_worker.needs_optional(plan_any):
                    typing_names.add("Optional")
                continue
            body.append(statement)
        new_module = module.with_changes(body=body)
        wanted: list[tuple[str, list[str]]] = []
        if typing_names:
            wanted.append(("typing", sorted(typing_names)))
        wanted.extend(from_imports)
        new_module = imports.add_imports(
            new_module, ["dataclasses"] if needs_dataclass else [], wanted
        )
        result.modules[path] = new_module
        loaded = project.modules[str(path)].loaded_names
        assert loaded is not None, "group files are read with names=True"
        result.used_before[path] = set(loaded) & imports.imported_names(module)
    for plan in runner_plans:
        if plan.method is None:
            continue
        dynamic = [
            cu.code(s).strip()
            for s in plan.mutations
            if merge_runner._subscript_key(s, plan.dict_var) is None
        ]
        result.runners.append(
            RunnerSummary(
                runner=plan.name,
                input_class=plan.input_name,
                fields=[f.name for f in plan.fields],
                driver_only=[f.name for f in plan.fields if f.driver_only],
                keys=list(plan.keys),
                dynamic=dynamic,
                dropped=[dataclasses.replace(d, node=None) for d in plan.dropped],
                narrows=plan.narrows_from,
            )
        )
    for plan_w in worker_plans:
        result.worker_keys[plan_w.name] = [k.key for k in plan_w.keys]
    return result


def finish(module: cst.Module, used_before: set[str]) -> tuple[cst.Module, str, ast.Module]:
    """The final module, its text and its ``ast``: imports that the rewrite made
    unused (read before, not any more: the broadcast function in a runner,
    ``Tuple``) are dropped. Whether a name is still read is decided on the
    ``ast`` of the generated text (cheap); the text is generated again only
    when an import goes."""
    code = module.code
    tree = ast.parse(code)
    unused = used_before - loaded_names(tree)
    if not unused:
        return module, code, tree
    module, code = imports.remove_names(module, code, unused)
    return module, code, ast.parse(code)


def merge(
    group: Group, modules: dict[Path, cst.Module], project: Project, contract: Contract
) -> GroupResult:
    """Plan then rewrite one group (raises Refusal; nothing is written here)."""
    runner_plans, worker_plans = plan_group(group, modules, project, contract)
    return rewrite_group(group, modules, project, contract, runner_plans, worker_plans)


class MergeBroadcastsCommand(VisitorBasedCodemodCommand):
    """Merge a worker's and its runners' broadcasts into one, in a single file.

    Groups whose runners live in other files are skipped here; ``runnercheck
    migrate`` plans those across files."""

    DESCRIPTION = registry.MERGE_BROADCASTS.summary

    def __init__(self, context: CodemodContext, contract: Contract = VLLM) -> None:
        super().__init__(context)
        self.contract = contract

    def transform_module(self, tree: cst.Module) -> cst.Module:
        path = Path(os.path.abspath(self.context.filename or "module.py"))
        project = self._project(path, tree.code)
        groups, _notes = find_groups(project)
        if not groups:
            raise SkipFile("no paired broadcast")
        modules = {path: tree}
        for group in groups:
            if any(f != path for f in group.files):
                self.warn(f"{group.label}: spans several files; use `runnercheck migrate`")
                continue
            try:
                result = merge(group, modules, project, self.contract)
            except Refusal as refusal:
                self.warn(f"{refusal.code} {refusal.message}")
                continue
            if result.created:
                self.warn(
                    f"{group.label}: needs a new {templates.BASE_MODULE_NAME}.py; "
                    "use `runnercheck migrate`"
                )
                continue
            tree, _, _ = finish(result.modules[path], result.used_before[path])
            modules = {path: tree}
            project = self._project(path, tree.code)
        return tree

    def _project(self, path: Path, code: str) -> Project:
        return Project([extract_source(code, str(path), self.contract, names=True)], self.contract)
