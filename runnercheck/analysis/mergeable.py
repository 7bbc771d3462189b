"""Whether ``runnercheck migrate``'s merge-broadcasts takes a worker/runner pair with a
paired broadcast as it is found, or refuses it before any planning: the decisions its
group finder (:mod:`codemods.facts.groups`) makes from the step model alone, asked by
RC106 (:mod:`runnercheck.rules.paired_broadcast`) too, so that a broadcast the
merge refuses as found is no error of ``check``'s (a note naming the refusal).

A pair is refused as found when a runner of its group (the runner, its bases below the
contract's, and the runners that derive from it) broadcasts in more than one method
(MIG101: the merge moves one broadcast per runner into the worker), or inside
``prepare_model_input`` (MIG105: the merged API already; RC105 reports it). A worker
that holds no runner class found in the given paths has nothing to merge with (MIG103,
or a worker left alone), nor has a runner no worker drives (MIG104). Planning may
still refuse a pair taken as found (a key it cannot trace, a shape it does not
recognise): only the rewrite can tell those.
"""

from __future__ import annotations

from dataclasses import dataclass

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.recognise import is_step_broadcast


@dataclass(frozen=True)
class MergeRefusal:
    """Why merge-broadcasts leaves a group as found."""

    code: str
    path: str
    line: int
    message: str


def broadcasting_methods(project: Project, cls: ClassFacts) -> list[str]:
    """Methods of ``cls`` (in class order) that call the step broadcast anywhere."""
    function = project.contract.broadcast_function
    return [
        name
        for name, func in cls.methods.items()
        if any(is_step_broadcast(call.callee, function) for call in func.calls)
    ]


def group_runners(project: Project, runner: ClassFacts) -> list[ClassFacts]:
    """The runner classes migrated with ``runner``: its bases (less the contract's own)
    and the classes that derive from it (a hardware runner in another file), less
    workers."""
    bases = set(project.contract.runner_bases)
    found = [k for k in project.mro(runner) if k.name not in bases]
    for cls in project.all_classes():
        if cls in found or project.is_worker(cls) or runner not in project.mro(cls)[1:]:
            continue
        found += [k for k in project.mro(cls) if k.name not in bases and k not in found]
    return found


def runner_broadcast_refusal(project: Project, runners: list[ClassFacts]) -> MergeRefusal | None:
    """A runner whose broadcasts the merge cannot place: in several methods (MIG101), or
    inside ``prepare_model_input`` (MIG105, the merged API already)."""
    prepare = project.contract.prepare_input_method
    function = project.contract.broadcast_function

    def broadcast_line(cls: ClassFacts, method: str) -> int:
        """The line of the method's first broadcast (the cause), else of its ``def``."""
        func = cls.methods[method]
        for call in func.calls:
            if is_step_broadcast(call.callee, function):
                return call.line
        return func.line

    for cls in runners:
        names = broadcasting_methods(project, cls)
        if len(names) > 1:
            return MergeRefusal(
                "MIG101",
                cls.path,
                broadcast_line(cls, names[1]),
                f"{cls.name} broadcasts in {len(names)} methods ({', '.join(names)})",
            )
        if names and names[0] == prepare:
            return MergeRefusal(
                "MIG105",
                cls.path,
                broadcast_line(cls, names[0]),
                f"{cls.name} broadcasts inside `{prepare}` (the merged API): only the driver "
                "prepares inputs, so no other rank matches it (RC105); this needs a fix by hand",
            )
    return None


def pair_refusal(
    project: Project, worker: ClassFacts | None, runner: ClassFacts | None
) -> MergeRefusal | None:
    """Why merge-broadcasts leaves the pair as found (None: it takes it). ``worker``
    None: a runner no worker drives; ``runner`` None: a worker driving no runner (the
    code is "" where ``migrate`` leaves it alone with a note rather than a refusal)."""
    if runner is None:
        assert worker is not None
        attrs = [
            attr
            for klass in project.mro(worker)
            for attr in klass.self_attrs
            if "runner" in attr.lower()
        ]
        if attrs:
            return MergeRefusal(
                "MIG103",
                worker.path,
                worker.line,
                f"{worker.name} drives `self.{attrs[0]}`, which is not a runner class found "
                "in the given paths",
            )
        return MergeRefusal(
            "", worker.path, worker.line, f"{worker.name} drives no model runner to merge with"
        )
    found = runner_broadcast_refusal(project, group_runners(project, runner))
    if found is not None or worker is not None:
        return found
    return MergeRefusal(
        "MIG104",
        runner.path,
        runner.line,
        f"{runner.name} broadcasts but no worker in the given paths drives it",
    )
