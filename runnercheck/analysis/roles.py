"""Roles of classes in the contract: workers, model runners, which runners a worker
drives (``self.model_runner = ...``), and which classes are abstract."""

from __future__ import annotations

from runnercheck.analysis.hierarchy import Hierarchy
from runnercheck.analysis.model import (
    ClassFacts,
)
from runnercheck.analysis.syntax import last_name


class Roles:
    """Workers, runners and the runners each worker drives (a part of a project)."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self.contract = hierarchy.contract
        self._paired: list[ClassFacts] | None = None
        self._candidates: dict[int, tuple[ClassFacts, dict[str, list[ClassFacts]]]] = {}

    # -------------------------------------------------------------- roles
    def _contract_base_names(self) -> set[str]:
        c = self.contract
        return {*c.runner_bases, *c.worker_bases, *c.input_bases}

    def is_abstract(self, cls: ClassFacts) -> bool:
        """Declared abstract, a contract base, or named like a base/mixin."""
        name = cls.name
        if name in self._contract_base_names():
            return True
        if cls.abstract_methods:
            return True
        if any(last_name(b) in ("ABC", "Protocol") for b in cls.bases):
            return True
        typevars = (
            self.hierarchy.modules[cls.path].typevars
            if cls.path in self.hierarchy.modules
            else frozenset()
        )
        if any(name in typevars for args in cls.base_args for name in args):
            return True  # still generic over a type variable: a base of other classes
        return name.endswith(("Base", "Mixin", "Interface")) or name.startswith(
            ("Abstract", "Base")
        )

    def is_worker(self, cls: ClassFacts) -> bool:
        if self.hierarchy.inherits(cls, self.contract.worker_bases):
            return True
        return cls.name.endswith("Worker") and (
            self.hierarchy.resolve_method(cls, self.contract.execute_method) is not None
        )

    def is_runner(self, cls: ClassFacts) -> bool:
        if self.hierarchy.inherits(cls, self.contract.runner_bases):
            return True
        if cls.name in self.contract.runner_bases:
            return True
        return "Runner" in cls.name and (
            self.hierarchy.resolve_method(cls, self.contract.execute_method) is not None
        )

    def workers(self) -> list[ClassFacts]:
        return [c for c in self.hierarchy.all_classes() if self.is_worker(c)]

    def runners(self) -> list[ClassFacts]:
        return [c for c in self.hierarchy.all_classes() if self.is_runner(c)]

    def runner_candidates(self, worker: ClassFacts) -> dict[str, list[ClassFacts]]:
        """Runner classes each ``self.<attr>`` of a worker may hold: what it is assigned,
        else what the class annotates it with (a factory method builds it). Found once
        per worker: the answer is shared, not to be changed."""
        found = self._candidates.get(id(worker))
        if found is None or found[0] is not worker:  # (the class is held: the id stays its own)
            found = self._candidates[id(worker)] = (worker, self._runner_candidates(worker))
        return found[1]

    def _runner_candidates(self, worker: ClassFacts) -> dict[str, list[ClassFacts]]:
        out: dict[str, list[ClassFacts]] = {}
        for klass in reversed(self.hierarchy.mro(worker)):
            for attr, names in klass.self_attrs.items():
                found: list[ClassFacts] = []
                for name in names:
                    target = self.hierarchy.resolve_class(name, klass.path)
                    if target is not None and self.is_runner(target) and target not in found:
                        found.append(target)
                if found:
                    out[attr] = found
        # ``model_runner: NeuronModelRunner`` where a factory method builds it
        for klass in self.hierarchy.mro(worker):
            for attr, names in klass.annotations.items():
                if attr in out:
                    continue
                found = []
                for name in names:
                    target = self.hierarchy.resolve_class(name, klass.path)
                    if (
                        target is not None
                        and self.is_runner(target)
                        and not self.is_abstract(target)
                        and target not in found
                    ):
                        found.append(target)
                if found:
                    out[attr] = found
        return out

    def paired_runners(self) -> list[ClassFacts]:
        """Runners that some worker holds."""
        if self._paired is None:
            self._paired = []
            for _, runner in self.worker_runner_pairs():
                if runner not in self._paired:
                    self._paired.append(runner)
        return self._paired

    def worker_runner_pairs(self) -> list[tuple[ClassFacts, ClassFacts]]:
        pairs: list[tuple[ClassFacts, ClassFacts]] = []
        for worker in self.workers():
            for runners in self.runner_candidates(worker).values():
                for runner in runners:
                    if (worker, runner) not in pairs:
                        pairs.append((worker, runner))
        return pairs
