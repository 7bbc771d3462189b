"""Uses and reachability: what decides whether a finding breaks something at run time.

* Which input classes a runner builds (:meth:`Uses.runner_inputs`), and which of their
  attributes the runner reads on the path every rank runs (:meth:`Uses.every_rank_reads`):
  ``execute_model`` and the runner methods it calls, never ``prepare_model_input``
  (the driver's alone). A field no rank but the driver reads is harmless when it is not
  broadcast.
* Workers whose broadcast code cannot run (:meth:`Uses.never_broadcasts`): a
  ``do_metadata_broadcast`` that is constantly ``False`` (single-rank backends), and
  the input classes only such workers rebuild (:meth:`Uses.unreachable_input`).
"""

from __future__ import annotations

from runnercheck.analysis.hierarchy import Hierarchy, MethodRef
from runnercheck.analysis.keyflow import KeyFlow
from runnercheck.analysis.merged import MergedDicts
from runnercheck.analysis.model import (
    BranchStep,
    CallStep,
    ClassFacts,
    ExitStep,
    LoopStep,
    Role,
    RoleAssertStep,
    Step,
    TryStep,
)
from runnercheck.analysis.refusals import class_refusals
from runnercheck.analysis.roles import Roles
from runnercheck.analysis.stepwalk import StepWalk
from runnercheck.analysis.syntax import last_name

#: The worker property that says whether a step broadcasts at all.
BROADCAST_SWITCH = "do_metadata_broadcast"


class Uses:
    """Which inputs a runner builds and which fields every rank reads (a part of a
    project)."""

    def __init__(
        self,
        hierarchy: Hierarchy,
        roles: Roles,
        keys: KeyFlow,
        steps: StepWalk,
        merged: MergedDicts,
    ) -> None:
        self.hierarchy = hierarchy
        self.roles = roles
        self.keys = keys
        self.steps = steps
        self.merged = merged
        self.contract = hierarchy.contract
        self._inputs: dict[int, list[ClassFacts]] = {}
        self._reads: dict[int, set[str]] = {}

    # ------------------------------------------------------------ inputs
    def runner_inputs(self, runner: ClassFacts) -> list[ClassFacts]:
        """The input classes ``runner`` builds: what its ``make_model_input_...``
        rebuilds, else its type argument (``ModelRunnerBase[T]`` along its MRO; a
        subclass that sets another input class inherits a type argument it no longer
        builds)."""
        cached = self._inputs.get(id(runner))
        if cached is not None:
            return cached
        found: list[ClassFacts] = []
        ref = self.hierarchy.resolve_method(runner, self.contract.make_input_method)
        if ref is not None:
            for facts in ref.func.dicts.values():
                for call in facts.helpers:
                    if last_name(call.callee) == self.contract.from_dict_method:
                        target = self.merged._input_class(runner, ref, call.callee)
                        if target is not None:
                            found.append(target)
        if not found:  # what it rebuilds decides; else its type argument
            for klass in self.hierarchy.mro(runner):
                for args in klass.base_args:
                    for name in args:
                        target = self.hierarchy.resolve_class(name, klass.path)
                        if target is not None and self.keys.produced(target) is not None:
                            found.append(target)
        unique = list({id(c): c for c in found}.values())
        self._inputs[id(runner)] = unique
        return unique

    def runners_of(self, cls: ClassFacts) -> list[ClassFacts]:
        """Runners that build ``cls`` or a subclass of it (one that builds a base of it
        never sees its fields)."""
        out: list[ClassFacts] = []
        for runner in self.roles.runners():
            for built in self.runner_inputs(runner):
                if cls in self.hierarchy.mro(built):
                    out.append(runner)
                    break
        return out

    def sends_through(self, built: ClassFacts, cls: ClassFacts) -> bool:
        """An instance of ``built`` is broadcast with the dict method of ``cls``: its own
        method is that one, or reaches it through ``super()`` calls."""
        name = self.contract.as_dict_method
        ref = self.hierarchy.resolve_method(built, name)
        while ref is not None and ref.owner is not cls:
            if not self.keys.produced_by(built, ref).calls_super:
                return False
            ref = self.hierarchy.resolve_method(built, name, after=ref.owner)
        return ref is not None

    # ------------------------------------------------------------- reads
    def every_rank_reads(self, cls: ClassFacts, sent_by: bool = False) -> set[str] | None:
        """Attributes of a ``cls`` instance the runners that build it read on the path
        every rank runs; None when no runner in the analysed files builds it. With
        ``sent_by``, only runners whose input is broadcast with the dict method of
        ``cls`` (a subclass with its own copy of the dict is another cause)."""
        key = id(cls) * 2 + sent_by
        cached = self._reads.get(key)
        if cached is not None:
            return cached
        runners = self.runners_of(cls)
        if sent_by:
            runners = [
                r
                for r in runners
                if any(
                    cls in self.hierarchy.mro(built) and self.sends_through(built, cls)
                    for built in self.runner_inputs(r)
                )
            ]
        if not runners:
            return None
        out: set[str] = set()
        for runner in runners:
            out |= self._runner_reads(runner)
        self._reads[key] = out
        return out

    def _runner_reads(self, runner: ClassFacts) -> set[str]:
        """Attributes read on the input parameter of ``execute_model`` and of the runner
        methods it calls on a non-driver rank's path (following ``self.*`` calls), less
        those each rank writes itself (local state, not a missing broadcast) and those
        read only under a ``self`` value the runner's constructor refuses
        (:mod:`runnercheck.analysis.refusals`). A runner whose ``execute_model`` raises
        on non-driver ranks runs on one rank only."""
        execute = self.hierarchy.resolve_method(runner, self.contract.execute_method)
        if execute is None or len(execute.func.params) < 2:
            return set()
        if raises_for(execute.func.steps, "non-driver"):
            return set()  # it declares that it runs on one rank only
        name = execute.func.params[1]
        out: set[str] = set()
        written: set[str] = set()
        seen: set[int] = set()
        todo: list[MethodRef] = [execute]
        refused = class_refusals(self.hierarchy, runner)
        while todo:
            ref = todo.pop()
            if id(ref.func) in seen:
                continue
            seen.add(id(ref.func))
            guards = ref.func.param_attr_guards
            out.update(
                attr
                for attr in ref.func.param_attrs.get(name, ())
                # read only under a value the runner's constructor refuses: never runs
                if refused.isdisjoint(guards.get(f"{name}.{attr}", ()))
            )
            written.update(ref.func.param_writes.get(name, ()))
            for step in calls_on_path(ref.func.steps, "non-driver")[0]:
                parts = step.callee.split(".")
                if len(parts) == 2 and parts[0] == "self":
                    if parts[1] == self.contract.prepare_input_method:
                        continue
                    target = self.hierarchy.resolve_method(runner, parts[1])
                    if target is not None:
                        todo.append(target)
        return out - written

    # ------------------------------------------------------ reachability
    def never_broadcasts(self, worker: ClassFacts) -> bool:
        """The worker's ``do_metadata_broadcast`` is constantly ``False``: a property or
        class attribute, a ``self.do_metadata_broadcast = False`` that is its only
        assignment, each possibly inherited."""
        return self.steps.constants.self_constant(worker, BROADCAST_SWITCH) == "False"

    def unreachable_input(self, cls: ClassFacts) -> str | None:
        """Why no rank ever rebuilds ``cls`` from a broadcast (every worker whose runner
        builds it never broadcasts), or None."""
        runners = self.runners_of(cls)
        if not runners:
            return None
        workers = [
            worker
            for worker in self.roles.workers()
            if not self.roles.is_abstract(worker)
            and any(
                r in runners for rs in self.roles.runner_candidates(worker).values() for r in rs
            )
        ]
        if not workers or not all(self.never_broadcasts(w) for w in workers):
            return None
        names = sorted({w.name for w in workers})
        if len(names) == 1:
            return f"only {names[0]} rebuilds it, and its {BROADCAST_SWITCH} is always False"
        listed = ", ".join(names)
        return f"only {listed} rebuild it, and their {BROADCAST_SWITCH} is always False"

    def silent_worker(self, worker: ClassFacts) -> str | None:
        """Why the worker's broadcast code never runs, or None."""
        if self.never_broadcasts(worker):
            return f"{worker.name}.{BROADCAST_SWITCH} is always False: it never broadcasts"
        return None


def calls_on_path(steps: tuple[Step, ...], role: Role) -> tuple[list[CallStep], bool]:
    """The calls a rank of ``role`` may reach in ``steps``, and whether it may fall
    through the block (a branch for the other role, an exit or a role assertion for
    the other role ends its path)."""
    out: list[CallStep] = []
    for step in steps:
        if isinstance(step, CallStep):
            out.append(step)
        elif isinstance(step, BranchStep):
            falls = False
            for branch_role, block in ((step.then_role, step.body), (step.else_role, step.orelse)):
                if branch_role in (None, role):
                    calls, through = calls_on_path(block, role)
                    out += calls
                    falls = falls or through
            if not falls:
                return out, False
        elif isinstance(step, LoopStep):
            out += calls_on_path(step.body, role)[0] + calls_on_path(step.orelse, role)[0]
        elif isinstance(step, TryStep):
            for block in (step.body, *step.handlers, step.orelse, step.finalbody):
                out += calls_on_path(block, role)[0]
        elif isinstance(step, ExitStep):
            return out, False
        elif isinstance(step, RoleAssertStep) and step.role != role:
            return out, False
    return out, True


def raises_for(steps: tuple[Step, ...], role: Role) -> bool:
    """Some branch taken only by ranks of ``role`` raises (``if not
    self.is_driver_worker: raise ...``), at any depth."""
    for step in steps:
        if isinstance(step, BranchStep):
            for branch_role, block in ((step.then_role, step.body), (step.else_role, step.orelse)):
                if branch_role == role and any(
                    isinstance(s, ExitStep) and s.kind == "raise" for s in block
                ):
                    return True
            if raises_for(step.body, role) or raises_for(step.orelse, role):
                return True
        elif isinstance(step, LoopStep):
            if raises_for(step.body, role) or raises_for(step.orelse, role):
                return True
        elif isinstance(step, TryStep):
            blocks = (step.body, *step.handlers, step.orelse, step.finalbody)
            if any(raises_for(block, role) for block in blocks):
                return True
    return False
