"""Classes that derive from a package nobody gave the analysis: what cannot be known.

A vendor plugin checked without its engine (neither under the given paths, nor in a
context directory, nor installed) derives its worker from the engine's
``LocalOrDistributedWorkerBase``: the step that sends and rebuilds the merged dict is
that class's code, which was never read. A finding whose conclusion rests on such a
class is a note, not an error. The contract's own interfaces (the first runner and
worker base, the input bases) declare methods and hold no step: deriving from them
hides nothing.

``Unread(hierarchy, roles, wrappers, uses, packages)``: ``packages`` are the top-level
packages the checked code imports a base class from and that could not be found.
"""

from __future__ import annotations

from dataclasses import dataclass

from runnercheck.analysis.hierarchy import NEUTRAL_BASES, Hierarchy
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.roles import Roles
from runnercheck.analysis.syntax import last_name
from runnercheck.analysis.uses import Uses
from runnercheck.analysis.wrappers import Wrappers


@dataclass(frozen=True)
class UnreadBase:
    """``cls`` derives from ``base``, imported from ``package``, which was not read."""

    cls: ClassFacts
    base: str
    package: str

    def why(self) -> str:
        """Why a finding that rests on it is a note."""
        return (
            f"{self.cls.name} derives from {self.base} of {self.package}, which was not read: "
            "what it does cannot be known"
        )


class Unread:
    """Which classes rest on a base of an unread package, alone or with the workers,
    runners and inputs they go with."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        roles: Roles,
        wrappers: Wrappers,
        uses: Uses,
        packages: frozenset[str] = frozenset(),
    ) -> None:
        self.hierarchy = hierarchy
        self.roles = roles
        self.wrappers = wrappers
        self.uses = uses
        self.packages = packages
        contract = hierarchy.contract
        #: Bases that declare the contract and run nothing of it.
        self.interfaces = frozenset(
            {
                *NEUTRAL_BASES,
                *contract.input_bases,
                *contract.runner_bases[:1],
                *contract.worker_bases[:1],
            }
        )
        self._own: dict[int, UnreadBase | None] = {}
        self._workers_of: dict[int, list[ClassFacts]] | None = None

    def own(self, cls: ClassFacts) -> UnreadBase | None:
        """The first base along the MRO of ``cls`` that comes from an unread package."""
        if not self.packages:
            return None
        key = id(cls)
        if key not in self._own:
            self._own[key] = None
            for klass in self.hierarchy.mro(cls):
                found = self._declared(klass)
                if found is not None:
                    self._own[key] = found
                    break
        return self._own[key]

    def _declared(self, klass: ClassFacts) -> UnreadBase | None:
        module = self.hierarchy.modules.get(klass.path)
        if module is None:
            return None
        for base in klass.bases:
            name = last_name(base)
            if name in self.interfaces or self.hierarchy.resolve_class(base, klass.path):
                continue
            origin = module.imports.get(base.split(".", 1)[0], "")
            package = origin.split(".", 1)[0]
            if package in self.packages:
                return UnreadBase(klass, name, package)
        return None

    def behind(self, cls: ClassFacts, partners: bool = True) -> UnreadBase | None:
        """An unread base that a finding about ``cls`` rests on: one of its own, or,
        with ``partners``, one of the classes it takes part in a step with (the
        workers holding a runner, the runners building an input and their workers,
        a worker's runners and inner workers)."""
        found = self.own(cls)
        if found is not None or not partners or not self.packages:
            return found
        for other in self._partners(cls):
            found = self.own(other)
            if found is not None:
                return found
        return None

    def _partners(self, cls: ClassFacts) -> list[ClassFacts]:
        out: list[ClassFacts] = []
        if self.roles.is_worker(cls):
            for runners in self.roles.runner_candidates(cls).values():
                out += runners
            for held in self.wrappers.inner_workers(cls).values():
                out += held
        runners = [cls] if self.roles.is_runner(cls) else self.uses.runners_of(cls)
        out += runners
        for runner in runners:
            out += self._holding(runner)
        return out

    def _holding(self, runner: ClassFacts) -> list[ClassFacts]:
        if self._workers_of is None:
            self._workers_of = {}
            for worker, held in self.roles.worker_runner_pairs():
                self._workers_of.setdefault(id(held), []).append(worker)
        return self._workers_of.get(id(runner), [])
