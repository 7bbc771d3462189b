"""RC107 missing-contract-method: a concrete worker or runner with an abstract method left."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.findings import Finding


def _required(project: Project, cls: ClassFacts) -> dict[str, str]:
    """Abstract method name -> the class (or contract base) that declares it."""
    required: dict[str, str] = {}
    for klass in reversed(project.mro(cls)):
        for name in klass.abstract_methods:
            required.setdefault(name, klass.name)
    unresolved = project.unresolved_bases(cls)
    contract = project.contract
    for base in contract.worker_bases:
        if base in unresolved:
            for name in contract.worker_methods:
                required.setdefault(name, base)
    for base in contract.runner_bases:
        if base in unresolved:
            for name in contract.runner_methods:
                required.setdefault(name, base)
    return required


def missing_contract_methods(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    if project.is_abstract(cls):
        return
    if not (project.is_worker(cls) or project.is_runner(cls)):
        return
    for name, declared_in in sorted(_required(project, cls).items()):
        owner = project.defines(cls, name)
        if owner is not None:
            func = owner.methods.get(name)
            if func is None or not func.is_abstract:
                continue
        yield Finding(
            cls.path,
            cls.line,
            cls.col,
            "RC107",
            f"{cls.name} does not implement abstract method {name!r} of {declared_in}",
        )
