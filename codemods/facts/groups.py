"""Migration groups: the worker/runner classes with a paired broadcast that
``runnercheck migrate`` rewrites together.

A *group* is the worker class that defines the step plus every runner class (and
runner base class) it pairs with; groups sharing a runner or a file merge. The pairs
come from the same step walk that reports RC106, so ``migrate`` rewrites exactly
what ``check`` flags.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path

from codemods.framework import registry
from runnercheck.analysis.mergeable import runner_broadcast_refusal
from runnercheck.analysis.model import CallStep, ClassFacts, flatten_calls
from runnercheck.analysis.project import Project
from runnercheck.records import Note, Refused

MERGE = registry.MERGE_BROADCASTS.name


@dataclass(frozen=True)
class ClassRef:
    """A class by file and name (picklable, hashable)."""

    path: Path
    name: str

    def __str__(self) -> str:
        return f"{self.path.name}:{self.name}"


def ref_of(cls: ClassFacts) -> ClassRef:
    return ClassRef(Path(cls.path), cls.name)


@dataclass
class Group:
    """One worker/runner group (paired broadcast), or a group refused as found."""

    workers: list[ClassRef] = field(default_factory=list)
    runners: list[ClassRef] = field(default_factory=list)
    #: runner attribute on the worker (``self.model_runner``)
    runner_attr: dict[ClassRef, str] = field(default_factory=dict)
    #: why the group is refused as found (None: it is planned)
    refusal: Refused | None = None

    @property
    def files(self) -> list[Path]:
        seen: dict[Path, None] = {}
        for ref in [*self.workers, *self.runners]:
            seen.setdefault(ref.path, None)
        return list(seen)

    @property
    def label(self) -> str:
        names = [r.name for r in self.workers] + [r.name for r in self.runners]
        return "/".join(names) if names else "?"


@dataclass(frozen=True)
class SentBroadcast:
    """A broadcast that sends step metadata, in one method of a class."""

    method: str
    line: int


def sent_broadcasts(cls: ClassFacts) -> list[SentBroadcast]:
    """The sending broadcasts in the methods of ``cls`` (not the empty stop signal)."""
    found: list[SentBroadcast] = []
    for name, func in cls.methods.items():
        for step in flatten_calls(func.steps):
            if _sends(step):
                found.append(SentBroadcast(name, step.line))
    return found


def _sends(step: CallStep) -> bool:
    return step.step_broadcast and step.sends and not step.sends_empty


def _label(worker: str, runners: Iterable[str]) -> str:
    return "/".join([worker, *runners])


def find_groups(project: Project) -> tuple[list[Group], list[Note]]:
    """Worker/runner groups with a paired broadcast, plus notes on pairs left alone."""
    contract = project.contract
    groups: dict[ClassRef, Group] = {}
    notes: list[Note] = []
    noted: set[tuple[str, str]] = set()
    paired_runners: set[ClassRef] = set()
    for worker in sorted(project.workers(), key=lambda c: (c.path, c.line)):
        if project.is_abstract(worker):
            continue
        method = project.resolve_method(worker, contract.execute_method)
        if method is None:
            continue
        owner = ref_of(method.owner)
        candidates = project.runner_candidates(worker)
        runner_attrs = {
            attr: names
            for klass in project.mro(worker)
            for attr, names in klass.self_attrs.items()
            if "runner" in attr.lower()
        }
        own = project.broadcasts_per_step(worker, None)
        if not candidates:
            if not runner_attrs and max(c.count for c in own.values()) >= 1:
                key = (worker.name, "")
                if key not in noted:
                    noted.add(key)
                    notes.append(
                        Note(
                            "pair",
                            Path(worker.path),
                            worker.line,
                            "broadcasts but drives no model runner: left alone",
                            label=worker.name,
                        )
                    )
            if runner_attrs and max(c.count for c in own.values()) >= 1:
                attr, names = next(iter(runner_attrs.items()))
                group = groups.setdefault(owner, Group(workers=[owner]))
                group.refusal = Refused(
                    MERGE,
                    "MIG103",
                    owner.path,
                    method.owner.line,
                    f"{worker.name} drives `self.{attr}` ({', '.join(names) or '?'}), "
                    "which is not a runner class found in the given paths",
                )
            continue
        for attr, runners in candidates.items():
            for runner in runners:
                counts = project.broadcasts_per_step(worker, runner)
                most = max(c.count for c in counts.values())
                if most > 1:
                    group = groups.setdefault(owner, Group(workers=[owner]))
                    group.runner_attr[owner] = attr
                    for member in project.mro(runner):
                        ref = ref_of(member)
                        if member.name not in contract.runner_bases:
                            if ref not in group.runners:
                                group.runners.append(ref)
                            paired_runners.add(ref)
                    continue
                key = (worker.name, runner.name)
                if key in noted:
                    continue
                noted.add(key)
                why = (
                    "no broadcast in the worker or its runner"
                    if most == 0
                    else "one broadcast per step already"
                )
                notes.append(
                    Note(
                        "pair",
                        Path(worker.path),
                        worker.line,
                        f"{why}: left alone",
                        label=_label(worker.name, [runner.name]),
                    )
                )
    merged = _merge(_with_subclasses(project, list(groups.values())))
    for ref in {r for g in merged for r in g.runners}:
        paired_runners.add(ref)
    for group in merged:
        if group.refusal is None:
            group.refusal = _runner_broadcast_refusal(project, group)
    held = {
        ref_of(r)
        for w in project.workers()
        for rs in project.runner_candidates(w).values()
        for r in rs
    }
    for cls in sorted(project.all_classes(), key=lambda c: (c.path, c.name)):
        ref = ref_of(cls)
        if ref in paired_runners or any(ref in g.runners for g in merged):
            continue
        casts = sent_broadcasts(cls)
        if not casts or project.is_worker(cls):
            continue
        first = casts[0]
        if not project.is_runner(cls) and "Runner" not in cls.name:
            notes.append(
                Note(
                    "pair",
                    ref.path,
                    first.line,
                    f"broadcasts in `{first.method}` but drives no model runner: left alone",
                    label=cls.name,
                )
            )
            continue
        if first.method == contract.prepare_input_method:
            notes.append(
                Note(
                    "pair",
                    ref.path,
                    first.line,
                    f"broadcasts inside `{first.method}` (merged API already; see "
                    "`runnercheck check`, RC105): left alone",
                    label=cls.name,
                )
            )
            continue
        if ref in held:
            continue
        group = Group(runners=[ref])
        group.refusal = Refused(
            MERGE,
            "MIG104",
            ref.path,
            first.line,
            f"{cls.name} broadcasts in `{first.method}` but no worker in the given paths drives it",
        )
        merged.append(group)
    return merged, notes


def _runner_broadcast_refusal(project: Project, group: Group) -> Refused | None:
    """A runner of the group whose broadcasts the merge cannot place: in several
    methods, or inside ``prepare_model_input`` (the merged API already); the question
    RC106 asks too (:func:`runnercheck.analysis.mergeable.runner_broadcast_refusal`)."""
    runners = [
        cls
        for ref in group.runners
        if (cls := project.modules[str(ref.path)].classes.get(ref.name)) is not None
    ]
    found = runner_broadcast_refusal(project, runners)
    if found is None:
        return None
    return Refused(MERGE, found.code, Path(found.path), found.line, found.message)


def _with_subclasses(project: Project, groups: list[Group]) -> list[Group]:
    """Every runner class below a group's runner (a hardware or embedding runner in
    another file, driven by no worker in the paths) joins that group: it inherits the
    legacy methods whose signatures change, so it is migrated with them or not at all."""
    if not groups:
        return groups
    workers = {ref_of(w) for w in project.workers()}
    bases = set(project.contract.runner_bases)
    for cls in sorted(project.all_classes(), key=lambda c: (c.path, c.line)):
        ref = ref_of(cls)
        if ref in workers:
            continue
        chain = project.mro(cls)
        for group in groups:
            if ref in group.runners:
                continue
            if any(ref_of(parent) in group.runners for parent in chain[1:]):
                for member in chain:
                    member_ref = ref_of(member)
                    if member.name not in bases and member_ref not in group.runners:
                        group.runners.append(member_ref)
    return groups


def _merge(groups: Iterable[Group]) -> list[Group]:
    """Groups that share a runner or a file become one (a file is rewritten once)."""
    merged: list[Group] = []
    for group in groups:
        for other in merged:
            if set(other.runners) & set(group.runners) or set(other.files) & set(group.files):
                other.workers.extend(w for w in group.workers if w not in other.workers)
                other.runners.extend(r for r in group.runners if r not in other.runners)
                other.runner_attr.update(group.runner_attr)
                other.refusal = other.refusal or group.refusal
                break
        else:
            merged.append(group)
    return merged
