"""One worker input for the workers of a directory that broadcast the same fields.

Workers migrated in one run often carry the same step: a hardware worker copied from
the GPU worker sends the same cache operations. Their inputs would be copies of one
class, so when two or more workers of one directory would get inputs with the same
fields (the same keys in the same order, the same annotations naming the same imported
types, the same defaults on the receiving side) they share one class in a generated
``worker_input.py`` beside them. Workers whose fields differ keep a class of their own.

The workers of one directory may belong to different groups, each rewritten on its
own. Every group therefore decides from the whole project: each worker of the
directory is planned alone, from the sources as read, so every group computes the
same classes and generates the same module text (the pipeline refuses two versions of
one file). A worker whose plan is refused, or whose field types name something its own
module defines, shares with nobody.
"""

from __future__ import annotations

import textwrap
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path

import libcst as cst

from codemods import layout, templates
from codemods.facts.groups import ClassRef, Group, find_groups
from codemods.facts.signatures import Import, annotation_imports
from codemods.merge_broadcasts.groups import methods_calling
from codemods.merge_broadcasts.worker_model import WorkerPlan
from codemods.merge_broadcasts.worker_plan import plan_worker
from codemods.merge_broadcasts.worker_rewrite import field_annotation, worker_input_text
from codemods.refusal import Refusal
from runnercheck.analysis.project import Project
from runnercheck.contract import Contract


@dataclass(frozen=True)
class InputFields:
    """What a worker's input class holds: (key, annotation, receive default) per field,
    and what its annotations need from elsewhere."""

    fields: tuple[tuple[str, str, str | None], ...]
    imports: frozenset[Import]
    typing: frozenset[str]


@dataclass(frozen=True)
class SharedInput:
    """The class a worker uses from the generated module."""

    path: Path
    name: str
    #: the whole generated module (the same for every worker of the directory)
    text: str


def _fields_of(
    project: Project,
    contract: Contract,
    group: Group,
    ref: ClassRef,
    sources: Mapping[Path, bytes],
) -> InputFields | None:
    """The worker's input fields as its own group would plan them; None when it
    cannot be planned or a type is its module's own."""
    data = sources.get(ref.path)
    if data is None or ref not in group.runner_attr:
        return None
    try:
        module = cst.parse_module(data)
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
    fields: list[tuple[str, str, str | None]] = []
    imports: set[Import] = set()
    typing: set[str] = set()
    for key in plan.keys:
        resolved = annotation_imports(field_annotation(key), facts)
        if resolved is None:
            return None
        text, needs, names = resolved
        fields.append((key.key, text, key.default))
        imports.update(needs)
        typing |= names
    return InputFields(tuple(fields), frozenset(imports), frozenset(typing))


def _key_sets(project: Project, ref: ClassRef) -> set[frozenset[str]]:
    """The literal key sets of the dicts the worker's methods build (``ast`` facts):
    a cheap test of whether two workers can send the same fields at all."""
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
) -> dict[ClassRef, SharedInput]:
    """The workers of ``directory`` (in any group of the run) that share an input
    class, with the class and the generated module; empty when none do."""
    groups, _ = find_groups(project)
    workers = sorted(
        (
            (ref, group)
            for group in groups
            if group.refusal is None
            for ref in group.workers
            if ref.path.parent == directory
        ),
        key=lambda rg: (str(rg[0].path), rg[0].name),
    )
    if len(workers) < 2:
        return {}
    target = directory / f"{templates.WORKER_INPUT_MODULE_NAME}.py"
    if str(target) in project.modules or target.exists():
        return {}
    key_sets = {ref: _key_sets(project, ref) for ref, _ in workers}
    candidates = [
        (ref, group)
        for ref, group in workers
        if any(key_sets[ref] & key_sets[other] for other, _ in workers if other != ref)
    ]
    clusters: dict[InputFields, list[ClassRef]] = {}
    for ref, group in candidates:
        found = _fields_of(project, contract, group, ref, sources)
        if found is not None:
            clusters.setdefault(found, []).append(ref)
    shared = [(fields, refs) for fields, refs in clusters.items() if len(refs) > 1]
    if not shared:
        return {}
    classes: list[tuple[str, list[ClassRef], InputFields]] = []
    users: dict[ClassRef, str] = {}
    for fields, refs in shared:
        name = "WorkerInput" if len(shared) == 1 else f"{refs[0].name}Input"
        taken = {n for r in refs for n in project.modules[str(r.path)].top_level_names}
        if name in taken or any(c[0] == name for c in classes):
            continue
        classes.append((name, refs, fields))
        users.update((r, name) for r in refs)
    if not classes:
        return {}
    text = _module_text(contract, classes, limit)
    return {ref: SharedInput(target, name, text) for ref, name in users.items()}


def _names(refs: list[ClassRef]) -> str:
    quoted = [f"``{r.name}``" for r in refs]
    return quoted[0] if len(quoted) == 1 else f"{', '.join(quoted[:-1])} and {quoted[-1]}"


def _module_text(
    contract: Contract, classes: list[tuple[str, list[ClassRef], InputFields]], limit: int
) -> str:
    """``worker_input.py``: the shared classes; like the base module it imports only
    the standard library at run time (the field types under ``TYPE_CHECKING``)."""
    imports = sorted({i for _, _, f in classes for i in f.imports}, key=Import.statement)
    typing = {"Any", "Dict", "Type", "TypeVar"}.union(*(f.typing for _, _, f in classes))
    workers = [r for _, refs, _ in classes for r in refs]
    width = min(limit, 79)
    doc = textwrap.fill(
        f"{_names(workers)} send the same fields next to the model input each step, "
        "so they share one input class.",
        width,
    )
    parts = [
        f'"""The inputs the workers of this package broadcast for themselves.\n\n{doc}\n"""\n\n',
        templates.import_block(["import dataclasses"], typing, imports),
        "\n\n\n",
    ]
    texts = []
    for name, refs, fields in classes:
        doc_line = (
            f"What {_names(refs)} broadcast for themselves each step.",
            "What the workers broadcast for themselves each step.",
        )
        rows = [(k, templates.quoted(a, imports), d) for k, a, d in fields.fields]
        texts.append(worker_input_text(name, f"T{name}", doc_line, rows, contract, width))
    parts.append("\n\n".join(texts))
    text = "".join(parts)
    module = layout.wrap_long_statements(cst.parse_module(text), "", limit)
    return module.code
