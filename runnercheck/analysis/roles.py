"""Roles of classes in the contract: workers, model runners, which runners a worker
drives (``self.model_runner = ...``), which classes are abstract, and which are on the
V0 broadcast contract at all.

A class is a worker or a runner by its shape (a contract base, or a name and an
``execute_model``); whether it is *on the contract* is read from what its code does,
never from a file's name. A V1 worker and runner (``execute_model(scheduler_output)``,
the runner building its own input on every rank) share the names ``execute_model`` and
often ``prepare_model_input``, but broadcast no step metadata and rebuild nothing from a
broadcast dict: they are off it, and no contract rule applies to them.
"""

from __future__ import annotations

from runnercheck.analysis.hierarchy import Hierarchy
from runnercheck.analysis.model import (
    ClassFacts,
)
from runnercheck.analysis.syntax import last_name, receiver


class Roles:
    """Workers, runners and the runners each worker drives (a part of a project)."""

    def __init__(self, hierarchy: Hierarchy) -> None:
        self.hierarchy = hierarchy
        self.contract = hierarchy.contract
        self._paired: list[ClassFacts] | None = None
        self._uses: dict[int, tuple[ClassFacts, bool]] = {}
        self._own: dict[int, tuple[ClassFacts, bool]] = {}
        self._names: tuple[frozenset[str], frozenset[str]] | None = None
        self._on_contract: set[int] | None = None
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

    # -------------------------------------------------------- the V0 contract
    def _contract_names(self) -> tuple[frozenset[str], frozenset[str]]:
        """(names that show the broadcast when called or defined, base names that stand
        for it when a base is outside the analysed files)."""
        c = self.contract
        used = frozenset(
            {c.broadcast_function, c.as_dict_method, c.from_dict_method, c.make_input_method}
        )
        # the most derived configured worker base is the step worker
        # (LocalOrDistributedWorkerBase); a base named like the others (``WorkerBase``)
        # is a V1 worker's base too
        step_worker = c.worker_bases[-1:] if c.worker_bases else ()
        bases = frozenset({*c.runner_bases, *c.input_bases, *step_worker, c.worker_input})
        return used, bases

    def _own_use(self, cls: ClassFacts, used: frozenset[str], bases: frozenset[str]) -> bool:
        if cls.name in bases or not used.isdisjoint(cls.methods):
            return True
        prepare = self.contract.prepare_input_method
        for func in cls.methods.values():
            for call in func.calls:
                name = last_name(call.callee)
                if name in used:
                    return True
                # a worker's step that asks its runner to prepare (the merged worker);
                # a runner preparing its own input (``self.prepare_model_input``) is not
                if name == prepare and receiver(call.callee) not in ("", "self", "cls", "super()"):
                    return True
        return False

    def uses_contract(self, cls: ClassFacts) -> bool:
        """``cls`` or a class of its MRO uses the V0 contract: it calls the step
        broadcast, defines or calls a conversion to or from the broadcast dict
        (``as_broadcastable_tensor_dict``, ``from_broadcasted_tensor_dict``,
        ``make_model_input_from_broadcasted_tensor_dict``), asks another object's
        ``prepare_model_input`` (a merged worker's step), is or derives from a base that
        stands for the contract (a runner or input base, the step worker base, the worker
        input) found or not. A base outside the analysed files with any other name
        shows nothing."""
        found = self._uses.get(id(cls))
        if found is None or found[0] is not cls:
            names = self._names = self._names or self._contract_names()
            uses = any(self._owns_use(k, *names) for k in self.hierarchy.mro(cls)) or not (
                names[1].isdisjoint(self.hierarchy.unresolved_bases(cls))
            )
            found = self._uses[id(cls)] = (cls, uses)
        return found[1]

    def _owns_use(self, cls: ClassFacts, used: frozenset[str], bases: frozenset[str]) -> bool:
        """:meth:`_own_use`, read once per class (a base is asked for every subclass)."""
        found = self._own.get(id(cls))
        if found is None or found[0] is not cls:
            found = self._own[id(cls)] = (cls, self._own_use(cls, used, bases))
        return found[1]

    def builds_own_input(self, cls: ClassFacts) -> bool:
        """``cls``'s ``execute_model`` calls its own ``prepare_model_input`` (directly or
        through other methods of ``self``): every rank that executes the model prepares
        its input from what it was given, as a V1 runner does with the scheduler output.
        On the V0 contract the worker asks the driver's runner to prepare, once, and the
        other ranks rebuild the input from the broadcast."""
        contract = self.contract
        prepare = f"self.{contract.prepare_input_method}"
        todo = [contract.execute_method]
        seen: set[str] = set()
        while todo:
            name = todo.pop()
            if name in seen:
                continue
            seen.add(name)
            ref = self.hierarchy.resolve_method(cls, name)
            if ref is None:
                continue
            for call in ref.func.calls:
                if call.callee == prepare:
                    return True
                if call.callee.startswith("self.") and call.callee.count(".") == 1:
                    todo.append(call.callee[5:])
        return False

    def on_contract(self, cls: ClassFacts) -> bool:
        """Whether the V0 contract's rules apply to ``cls``: it uses the contract
        (:meth:`uses_contract`), or is paired with a worker or runner that does; else
        whether nothing shows it is off the contract. It is off when it is a runner that
        builds its own input (:meth:`builds_own_input`), or a worker whose runners all
        are, and nothing of the pair uses the contract: a V1 worker and runner."""
        if self.uses_contract(cls):
            return True
        if self._on_contract is None:
            self._on_contract = set()
            for worker, runner in self.worker_runner_pairs():
                if self.uses_contract(worker) or self.uses_contract(runner):
                    self._on_contract.update((id(worker), id(runner)))
        if id(cls) in self._on_contract:
            return True
        if self.builds_own_input(cls):
            return False
        runners = [r for rs in self.runner_candidates(cls).values() for r in rs]
        return not (runners and all(self.builds_own_input(r) for r in runners))
