"""RC107 missing-contract-method: A concrete worker or runner leaves an abstract contract method unimplemented."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.analysis.syntax import last_name
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from abc import ABC, abstractmethod


class LocalOrDistributedWorkerBase(ABC):
    @abstractmethod
    def prepare_worker_input(self, execute_model_req): ...

    @abstractmethod
    def execute_worker(self, worker_input): ...


class NeuronWorker(LocalOrDistributedWorkerBase):
    def prepare_worker_input(self, execute_model_req):
        return {"num_seq_groups": len(execute_model_req.seq_group_metadata_list)}
"""
_GOOD = _variant(
    _BAD,
    (
        '        return {"num_seq_groups": len(execute_model_req.seq_group_metadata_list)}\n',
        (
            '        return {"num_seq_groups": len(execute_model_req.seq_group_metadata_list)}\n'
            "\n"
            "    def execute_worker(self, worker_input):\n"
            "        pass\n"
        ),
    ),
)

RULE = Rule(
    code="RC107",
    name="missing-contract-method",
    tool="check",
    summary="A concrete worker or runner leaves an abstract contract method unimplemented.",
    why="The class fails at instantiation (or at the first step) instead of at review; vLLM's "
    "NeuronWorker shipped without `execute_worker`. A note for a class that is only a base: "
    "every subclass implements the methods and no call in the analysed files builds it.",
    bad=_BAD,
    good=_GOOD,
)


def _required(project: Project, cls: ClassFacts) -> dict[str, str]:
    """Abstract method name -> the class (or contract base) that declares it."""
    required: dict[str, str] = {}
    for klass in reversed(project.mro(cls)):
        for name in klass.abstract_methods:
            required.setdefault(name, klass.name)
    unresolved = project.unresolved_bases(cls)
    contract = project.contract
    # outside the analysed files, a base is known by its name alone: the worker methods
    # belong to the most derived configured worker base (vLLM's
    # LocalOrDistributedWorkerBase), not to every class named like a worker base
    step_base = contract.worker_bases[-1] if contract.worker_bases else None
    if step_base is not None and step_base in unresolved:
        for name in contract.worker_methods:
            required.setdefault(name, step_base)
    for base in contract.runner_bases:
        if base in unresolved:
            for name in contract.runner_methods:
                required.setdefault(name, base)
    return required


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    if project.is_abstract(cls):
        return
    if not (project.is_worker(cls) or project.is_runner(cls)):
        return
    contract = project.contract
    if project.unknown_bases(cls) - {*contract.worker_bases, *contract.runner_bases}:
        # a base outside the analysed files that is not the contract's own (a class
        # picked per platform, ``class MultiStepWorker(WorkerCls, ...)``) may implement
        # any of them: nothing can be told
        return
    missing: dict[str, list[str]] = {}
    for name, declared_in in sorted(_required(project, cls).items()):
        owner = project.defines(cls, name)
        if owner is not None:
            func = owner.methods.get(name)
            if func is None or not func.is_abstract:
                continue
        missing.setdefault(declared_in, []).append(repr(name))
    if missing:
        # one finding per class: the class is the cause, its missing methods the sites
        parts = [
            f"method{'s' if len(names) > 1 else ''} {', '.join(names)} of {declared_in}"
            for declared_in, names in missing.items()
        ]
        finding = Finding(
            cls.path,
            cls.line,
            cls.col,
            RULE.code,
            f"{cls.name} does not implement abstract {'; '.join(parts)}",
        )
        names = [name.strip("'") for listed in missing.values() for name in listed]
        completed = _completed_by(project, cls, names)
        if completed:
            finding = finding.as_note(
                f"a base of {', '.join(completed)}, which implement "
                f"{'it' if len(names) == 1 else 'them'}, and built by "
                "no call in the analysed files"
            )
        yield finding


def _completed_by(project: Project, cls: ClassFacts, names: list[str]) -> list[str]:
    """The subclasses of ``cls`` that complete it, when ``cls`` is only their base: it
    has subclasses, every one that is not abstract itself implements ``names``, and no
    call in the analysed files builds ``cls``; else empty."""
    subclasses = [c for c in project.all_classes() if c is not cls and cls in project.mro(c)]
    concrete = [c for c in subclasses if not project.is_abstract(c)]
    if not concrete:
        return []
    for sub in concrete:
        for name in names:
            owner = project.defines(sub, name)
            func = owner.methods.get(name) if owner is not None else None
            if func is None or func.is_abstract:
                return []
    for module in project.modules.values():
        functions = [
            *module.functions.values(),
            *(f for klass in module.classes.values() for f in klass.methods.values()),
        ]
        for func in functions:
            for call in func.calls:
                if last_name(call.callee) != cls.name:
                    continue
                built = project.resolve_class(call.callee, func.path)
                if built is None or built is cls:
                    return []
    return sorted({c.name for c in concrete})


CHECK = CheckRule(RULE, check_class=check_class)
