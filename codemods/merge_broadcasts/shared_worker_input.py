"""One worker input for the workers of a directory, as vLLM 0.5.1 has one ``WorkerInput``.

Workers migrated in one run often carry the same step with other cache operations: a
hardware worker copied from the GPU worker sends the same fields, a CPU worker only
some of them. Their inputs would be near copies of one class, so when two or more
workers of one directory send fields of the same types (a key two workers send has
the same annotation, naming the same imported types) they share one class in a
generated ``worker_input.py`` beside them. The class holds every field any of them
sends:

* a field every one of them sends stays as each planned it (``Optional`` when a
  receiver defaulted it to None, the receive default when all receivers agree; a
  worker whose driver always sends a value that is never None, a tensor it builds,
  asserts it set after the receive even where its receiver read it with
  ``data.get(...)``: its ranks relied on it as one that indexed it did); a
  value whose type one worker's plan could not read (``Any``) takes the type another
  worker states for the same key, unless that worker states two types for it;
* a field some worker does not send is ``Optional[...] = None``: that worker leaves
  it out and its ranks receive None. A worker that sends it and read it as set
  (its own receiver indexed it) asserts it after the receive, where it relied on it.

Workers whose fields disagree on a type keep the old rule: those with exactly the same
fields share a class, the others keep a class of their own.

The workers of one directory may belong to different groups, each rewritten on its
own. Every group therefore decides from the whole project: each worker of the
directory is planned from the sources as read (its group's plan, made once per run, or
the worker alone when that group is refused), so every group computes the same classes
and generates the same module text (the pipeline refuses two versions of one file). A worker whose plan is refused, or whose field types name something its own
module defines, shares with nobody.
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from codemods.facts.groups import ClassRef, Group, find_groups
from codemods.facts.signatures import Import, annotation_imports
from codemods.framework.refusal import Refusal
from codemods.merge_broadcasts import templates
from codemods.merge_broadcasts.groups import methods_calling
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.merge_broadcasts.worker_plan import plan_worker
from codemods.merge_broadcasts.worker_rewrite import field_annotation, worker_input_text
from codemods.toolkit import cstutil, layout
from runnercheck.analysis.model import FieldFacts
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract


@dataclass(frozen=True)
class Field:
    """One field of a worker's input as its own plan has it."""

    key: str
    #: the type as another module of the directory writes it, without ``Optional``
    annotation: str
    #: the receiver defaulted it to None
    optional: bool
    #: the receive default (None: the receiver indexed it)
    default: str | None
    #: ``Any`` because the worker states two types for it (not for want of one)
    contested: bool = False
    #: the worker's driver always sends a value that is never None
    valued: bool = False

    def written(self) -> str:
        return f"Optional[{self.annotation}]" if self.optional else self.annotation


@dataclass(frozen=True)
class InputFields:
    """What a worker's input class holds, and what its annotations need from elsewhere."""

    fields: tuple[Field, ...]
    imports: frozenset[Import]
    typing: frozenset[str]


@dataclass(frozen=True)
class SharedField:
    """A field of the shared class: how it is written and received."""

    key: str
    annotation: str
    #: the receive default (None: popped without one)
    default: str | None
    #: some worker does not send it: ``= None`` on the class
    partial: bool


@dataclass(frozen=True)
class SharedInput:
    """The class a worker uses from the generated module."""

    path: Path
    name: str
    #: the whole generated module (the same for every worker of the directory);
    #: None when the module exists (an earlier run generated it)
    text: str | None
    #: fields this worker read as set that the shared class makes Optional
    asserted: tuple[str, ...] = ()
    #: every worker the class was made for
    users: tuple[ClassRef, ...] = ()


def _fields_of(
    project: Project,
    contract: Contract,
    group: Group,
    ref: ClassRef,
    sources: Mapping[Path, bytes],
    parse: Callable[[Path], cst.Module] | None = None,
    plans: Callable[[Group], Sequence[WorkerPlan]] | None = None,
) -> InputFields | None:
    """The worker's input fields as its own group would plan them; None when it
    cannot be planned or a type is its module's own. ``parse``: the run's module of
    a file, ``plans``: the run's worker plans of a group, when the caller keeps them."""
    data = sources.get(ref.path)
    if data is None or ref not in group.runner_attr:
        return None
    plan = _group_plan(group, ref, plans)
    if plan is None:
        try:
            module = parse(ref.path) if parse is not None else cst.parse_module(data)
        except cst.ParserSyntaxError:
            return None
        cdef = next(
            (s for s in module.body if isinstance(s, cst.ClassDef) and s.name.value == ref.name),
            None,
        )
        if cdef is None:
            return None
        plan = WorkerPlan(ref.path, ref.name, cdef, group.runner_attr[ref])
        only = methods_calling(project, ref, {contract.broadcast_function, contract.execute_method})
        try:
            plan_worker(plan, contract, [], only)
        except Refusal:
            return None
    facts = project.modules[str(ref.path)]
    fields: list[Field] = []
    imports: set[Import] = set()
    typing: set[str] = set()
    for key in plan.keys:
        resolved = annotation_imports(key.annotation, facts)
        if resolved is None:
            return None
        text, needs, names = resolved
        optional = field_annotation(key) != key.annotation
        fields.append(Field(key.key, text, optional, key.default, key.contested, key.valued))
        imports.update(needs)
        typing |= names | ({"Optional"} if optional else set())
    return InputFields(tuple(fields), frozenset(imports), frozenset(typing))


def _group_plan(
    group: Group, ref: ClassRef, plans: Callable[[Group], Sequence[WorkerPlan]] | None
) -> WorkerPlan | None:
    """The worker's plan from its group's, when the group planned: planning the worker
    alone gives the same keys (the group's runner keys only add a check that refuses,
    and a refused group gives no plan here)."""
    if plans is None:
        return None
    try:
        found = plans(group)
    except Exception:  # the group is refused: the worker is planned alone
        return None
    return next((p for p in found if p.path == ref.path and p.name == ref.name), None)


def _key_sets(project: Project, ref: ClassRef) -> set[frozenset[str]]:
    """The literal key sets of the dicts the worker's methods build (``ast`` facts):
    a cheap test of whether two workers send a field in common at all."""
    cls = project.modules[str(ref.path)].classes[ref.name]
    return {
        frozenset(d.keys)
        for method in cls.methods.values()
        for d in method.dicts.values()
        if d.keys
    }


def shared_inputs(
    project: Project,
    contract: Contract,
    directory: Path,
    sources: Mapping[Path, bytes],
    limit: int,
    unshared: frozenset[ClassRef] = frozenset(),
    groups: list[Group] | None = None,
    parse: Callable[[Path], cst.Module] | None = None,
    plans: Callable[[Group], Sequence[WorkerPlan]] | None = None,
) -> dict[ClassRef, SharedInput]:
    """The workers of ``directory`` (in any group of the run, but for ``unshared``)
    that share an input class, with the class and the generated module; empty when
    none do. ``groups``: the project's groups, when the caller has found them;
    ``parse``: the run's module of a file, ``plans``: the run's worker plans of a
    group, when the caller keeps them."""
    if groups is None:
        groups, _ = find_groups(project)
    workers = sorted(
        (
            (ref, group)
            for group in groups
            if group.refusal is None
            for ref in group.workers
            if ref.path.parent == directory and ref not in unshared
        ),
        key=lambda rg: (str(rg[0].path), rg[0].name),
    )
    target = directory / f"{templates.WORKER_INPUT_MODULE_NAME}.py"
    if str(target) in project.modules:
        return _existing(project, contract, target, workers, sources, parse, plans)
    if len(workers) < 2 or target.exists():
        return {}
    key_sets = {ref: _key_sets(project, ref) for ref, _ in workers}
    candidates = [
        (ref, group)
        for ref, group in workers
        if any(
            a & b
            for other, _ in workers
            if other != ref
            for a in key_sets[ref]
            for b in key_sets[other]
        )
    ]
    planned: dict[ClassRef, InputFields] = {}
    for ref, group in candidates:
        found = _fields_of(project, contract, group, ref, sources, parse, plans)
        if found is not None:
            planned[ref] = found
    classes = _one_class(planned) or _same_fields(planned)
    classes = [
        c
        for c in classes
        if not any(c.name in project.modules[str(r.path)].top_level_names for r in c.users)
    ]
    if not classes:
        return {}
    text = _module_text(contract, classes, limit)
    return {
        ref: SharedInput(target, c.name, text, c.asserted.get(ref, ()), tuple(c.users))
        for c in classes
        for ref in c.users
    }


@dataclass
class _Class:
    name: str
    users: list[ClassRef]
    fields: list[SharedField]
    imports: frozenset[Import]
    typing: frozenset[str]
    asserted: dict[ClassRef, tuple[str, ...]]


def _one_class(planned: Mapping[ClassRef, InputFields]) -> list[_Class]:
    """One class for every planned worker, holding every field any of them sends;
    empty when fewer than two were planned or two of them type one key differently."""
    if len(planned) < 2:
        return []
    # the worker sending the most fields sets the order; the others' extra keys follow
    order = sorted(planned, key=lambda r: (-len(planned[r].fields), str(r.path), r.name))
    by_key: dict[str, list[tuple[ClassRef, Field]]] = {}
    for ref in order:
        for f in planned[ref].fields:
            by_key.setdefault(f.key, []).append((ref, f))
    fields: list[SharedField] = []
    asserted: dict[ClassRef, list[str]] = {}
    for key, senders in by_key.items():
        # a value whose type the planner could not read takes the one another states;
        # one the worker itself states two types for takes none
        stated = {f.annotation for _, f in senders} - {"Any"}
        if len(stated) > 1 or (stated and any(f.contested for _, f in senders)):
            return []
        partial = len(senders) < len(planned)
        optional = partial or any(f.optional for _, f in senders)
        defaults = {f.default for _, f in senders}
        annotation = stated.pop() if stated else "Any"
        if optional and annotation != "Any":
            annotation = f"Optional[{annotation}]"
            # a sender whose ranks relied on it being set asserts it: its receiver
            # indexed it, or read it with a None default its driver never lets happen
            for ref, f in senders:
                if not f.optional or f.valued:
                    asserted.setdefault(ref, []).append(key)
        default = defaults.pop() if len(defaults) == 1 else None
        fields.append(SharedField(key, annotation, default, partial))
    # a dataclass field with a default cannot precede one without
    fields.sort(key=lambda f: f.partial)
    typing = frozenset().union(*(p.typing for p in planned.values()))
    if any(f.partial for f in fields):
        typing |= {"Optional"}
    return [
        _Class(
            "WorkerInput",
            sorted(planned, key=lambda r: (str(r.path), r.name)),
            fields,
            frozenset().union(*(p.imports for p in planned.values())),
            typing,
            {ref: tuple(keys) for ref, keys in asserted.items()},
        )
    ]


def _same_fields(planned: Mapping[ClassRef, InputFields]) -> list[_Class]:
    """A class per set of workers with exactly the same fields (two or more)."""
    clusters: dict[InputFields, list[ClassRef]] = {}
    for ref, found in planned.items():
        clusters.setdefault(found, []).append(ref)
    shared = [(fields, refs) for fields, refs in clusters.items() if len(refs) > 1]
    classes: list[_Class] = []
    for fields, refs in shared:
        name = "WorkerInput" if len(shared) == 1 else f"{refs[0].name}Input"
        if any(c.name == name for c in classes):
            continue
        rows = [SharedField(f.key, f.written(), f.default, False) for f in fields.fields]
        classes.append(_Class(name, refs, rows, fields.imports, fields.typing, {}))
    return classes


def _existing(
    project: Project,
    contract: Contract,
    target: Path,
    workers: list[tuple[ClassRef, Group]],
    sources: Mapping[Path, bytes],
    parse: Callable[[Path], cst.Module] | None = None,
    plans: Callable[[Group], Sequence[WorkerPlan]] | None = None,
) -> dict[ClassRef, SharedInput]:
    """The workers that fit a class of the existing ``worker_input.py`` (one an earlier
    run generated for other groups of the directory, or the project's own): a frozen
    dataclass with the contract's two methods holding each key the worker sends, of
    the worker's type (or its Optional), whose other fields default. A group migrated
    after another one (file by file) thus ends as a whole-directory run."""
    facts = project.modules[str(target)]
    classes = [
        c
        for c in facts.classes.values()
        if c.is_dataclass and {contract.as_dict_method, contract.from_dict_method} <= set(c.methods)
    ]
    found: dict[ClassRef, SharedInput] = {}
    for ref, group in workers:
        planned = _fields_of(project, contract, group, ref, sources, parse, plans)
        if planned is None:
            continue
        for cls in classes:
            asserted = _fits(planned, {f.name: f for f in cls.fields})
            if asserted is not None:
                found[ref] = SharedInput(target, cls.name, None, asserted)
                break
    return found


def _fits(planned: InputFields, fields: Mapping[str, FieldFacts]) -> tuple[str, ...] | None:
    """The keys the worker must assert when it uses a class with ``fields``; None
    when it does not fit."""
    sent = {f.key: f for f in planned.fields}
    if any(name not in sent and not f.has_default for name, f in fields.items()):
        return None
    asserted: list[str] = []
    for key, own in sent.items():
        field = fields.get(key)
        if field is None:
            return None
        annotation = field.annotation.strip("\"'")
        if annotation == own.written():
            continue
        if not own.optional and annotation == f"Optional[{own.annotation}]":
            asserted.append(key)
            continue
        return None
    return tuple(asserted)


def _names(refs: list[ClassRef]) -> str:
    quoted = [f"``{r.name}``" for r in refs]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _module_text(contract: Contract, classes: list[_Class], limit: int) -> str:
    """``worker_input.py``: the shared classes; like the base module it imports only
    the standard library at run time (the field types under ``TYPE_CHECKING``)."""
    imports = sorted({i for c in classes for i in c.imports}, key=Import.statement)
    typing = {"Any", "Dict", "Type", "TypeVar"}.union(*(c.typing for c in classes))
    workers = [r for c in classes for r in c.users]
    width = min(limit, 79)
    partial = any(f.partial for c in classes for f in c.fields)
    said = (
        f"{_names(workers)} broadcast their own fields next to the model input each "
        "step, so they share one input class; a field a worker does not send stays "
        "None on its ranks."
        if partial
        else f"{_names(workers)} send the same fields next to the model input each step, "
        "so they share one input class."
    )
    doc = textwrap.fill(said, width)
    parts = [
        f'"""The inputs the workers of this package broadcast for themselves.\n\n{doc}\n"""\n\n',
        templates.import_block(["import dataclasses"], typing, imports),
        "\n\n\n",
    ]
    texts = []
    for c in classes:
        doc_line = (
            f"What {_names(c.users)} broadcast for themselves each step.",
            "What the workers broadcast for themselves each step.",
        )
        rows = [(f.key, templates.quoted(f.annotation, imports), f.default) for f in c.fields]
        unset = frozenset(f.key for f in c.fields if f.partial)
        texts.append(
            worker_input_text(c.name, f"T{c.name}", doc_line, rows, contract, width, unset)
        )
    parts.append("\n\n".join(texts))
    text = "".join(parts)
    if all(len(line) <= limit for line in text.splitlines()):
        return text  # what LibCST would print back: nothing to lay out
    module = layout.wrap_long_statements(cst.parse_module(text), "", limit)
    return cstutil.module_code(module)
