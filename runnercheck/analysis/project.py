"""The facts of many files joined into one project: classes across files, the MRO,
workers and their runners, keys produced and accepted, broadcasts per step.

Build it with ``Project(modules, contract)`` from :class:`~runnercheck.analysis.model.ModuleFacts`
(see :func:`runnercheck.analysis.extract.extract_source`). Everything is computed lazily and
memoised; nothing reads files or imports code.

The API (stable)
----------------
``Project.resolve_class(name, from_path)`` -> ClassFacts | None
``Project.mro(cls)`` -> list[ClassFacts] (the class first; C3, classes outside the tree left out)
``Project.ancestor_names(cls)`` -> set of every base name reachable (found in the tree or not)
``Project.resolve_method(cls, name, after=None)`` -> :class:`MethodRef` | None
``Project.resolve_function(callee, from_path)`` -> FunctionFacts | None (module-level helpers)
``Project.is_worker(cls)`` / ``is_runner(cls)`` / ``is_abstract(cls)``
``Project.uses_contract(cls)`` / ``on_contract(cls)`` -> the class (or the worker or runner
it is paired with) shows the V0 broadcast contract; a V1 worker and runner do not
``Project.workers()`` / ``runners()`` -> list[ClassFacts]
``Project.runner_candidates(worker)`` -> dict attr -> list[ClassFacts] (``self.model_runner = ...``)
``Project.worker_runner_pairs()`` -> list[(worker ClassFacts, runner ClassFacts)]
``Project.dataclass_fields(cls)`` -> dict name -> (ClassFacts, FieldFacts) | None when a base is unknown
``Project.produced(cls)`` -> :class:`Produced` | None (keys of ``as_broadcastable_tensor_dict``)
``Project.receivers(cls)`` -> list[:class:`Receiver`] (``cls(**tensor_dict)`` in ``from_broadcasted_tensor_dict``)
``Project.required(cls)`` -> :class:`Required` | None (keys ``from_broadcasted_tensor_dict`` reads with no default)
``Project.offered_keys(cls)`` -> keys a merged dict holds when ``cls`` is rebuilt from it
``Project.broadcasts_per_step(cls, runner=None)`` -> dict role -> :class:`PathCount`
``Project.collectives_reachable(cls, method_name)`` -> list[:class:`Reached`]
``Project.inner_workers(cls)`` -> dict attr -> worker classes ``self.<attr>`` may hold
``Project.wrapper_step(cls)`` -> :class:`WrapperStep` | None (broadcasts of one step through
the inner workers' steps, per role and path)

A project is a composition of named parts, each in its own module and each given
the parts it asks (nothing is inherited):

- ``Project.hierarchy``: :class:`~runnercheck.analysis.hierarchy.Hierarchy` (classes,
  MRO, methods, fields);
- ``Project.roles``: :class:`~runnercheck.analysis.roles.Roles` (workers, runners,
  pairs);
- ``Project.keys``: :class:`~runnercheck.analysis.keyflow.KeyFlow` (keys produced and
  received);
- ``Project.steps``: :class:`~runnercheck.analysis.stepwalk.StepWalk` (broadcasts per
  step, collectives);
- ``Project.constants``: :class:`~runnercheck.analysis.constants.Constants` (literal
  ``self`` attributes; with :func:`~runnercheck.analysis.constants.branch_taken` the
  branches literal arguments and constants decide);
- ``Project.merged``: :class:`~runnercheck.analysis.merged.MergedDicts` (the merged
  step and what its dict delivers);
- ``Project.uses``: :class:`~runnercheck.analysis.uses.Uses` (the inputs a runner
  builds, the fields every rank reads);
- ``Project.wrappers``: :class:`~runnercheck.analysis.wrappers.Wrappers` (steps through
  wrapper workers);
- ``Project.unread``: :class:`~runnercheck.analysis.unread.Unread` (classes that rest on
  a base of a package that was not read: ``unread_packages``).

The API above is each part's own method, reachable from the project by its name.
:class:`~runnercheck.analysis.holds.NonDriverValues` takes a project and answers, per
entry point of the step, what a non-driver rank builds (``migrate``'s equivalence
check).
"""

from __future__ import annotations

from collections.abc import Iterable

from runnercheck.analysis.hierarchy import Hierarchy, MethodRef, module_parts
from runnercheck.analysis.keyflow import KeyFlow, KeyRead, Produced, Receiver, Required
from runnercheck.analysis.merged import Leak, MergedDicts, MergedStep, Origin
from runnercheck.analysis.model import ModuleFacts
from runnercheck.analysis.roles import Roles
from runnercheck.analysis.stepwalk import ROLES, ZERO, BroadcastSite, PathCount, Reached, StepWalk
from runnercheck.analysis.unread import Unread, UnreadBase
from runnercheck.analysis.uses import Uses
from runnercheck.analysis.wrappers import StepPath, Term, Wrappers, WrapperStep
from runnercheck.contract import VLLM, Contract

__all__ = [
    "ROLES",
    "ZERO",
    "BroadcastSite",
    "KeyRead",
    "Leak",
    "MergedStep",
    "MethodRef",
    "Origin",
    "PathCount",
    "Produced",
    "Project",
    "Reached",
    "Receiver",
    "Required",
    "StepPath",
    "Term",
    "UnreadBase",
    "WrapperStep",
    "module_parts",
]


class Project:
    """Every question about the meaning of a set of modules, answered from their facts
    by its named parts."""

    def __init__(
        self,
        modules: Iterable[ModuleFacts],
        contract: Contract = VLLM,
        unread_packages: frozenset[str] = frozenset(),
    ) -> None:
        self.hierarchy = hierarchy = Hierarchy(modules, contract)
        self.roles = roles = Roles(hierarchy)
        self.keys = keys = KeyFlow(hierarchy)
        self.steps = steps = StepWalk(hierarchy, roles)
        self.constants = steps.constants
        self.merged = merged = MergedDicts(hierarchy, roles, keys)
        self.uses = uses = Uses(hierarchy, roles, keys, steps, merged)
        self.wrappers = wrappers = Wrappers(hierarchy, roles, steps)
        self.unread = Unread(hierarchy, roles, wrappers, uses, unread_packages)
        self.contract = contract
        self.modules = hierarchy.modules
        #: Paths whose findings are reported (None: all); a rule that may place a
        #: finding in several files prefers one of these.
        self.reportable: set[str] | None = None
        #: What a question over the whole project computed once (by the asker's name),
        #: such as a rule's findings grouped by cause across modules.
        self.memo: dict[str, object] = {}
        # each part's questions, asked of the project by their names:
        # Hierarchy's
        self.module_of = hierarchy.module_of
        self.all_classes = hierarchy.all_classes
        self.modules_named = hierarchy.modules_named
        self.module_file = hierarchy.module_file
        self.resolve_class = hierarchy.resolve_class
        self.direct_bases = hierarchy.direct_bases
        self.mro = hierarchy.mro
        self.ancestor_names = hierarchy.ancestor_names
        self.unresolved_bases = hierarchy.unresolved_bases
        self.inherits = hierarchy.inherits
        self.resolve_method = hierarchy.resolve_method
        self.defines = hierarchy.defines
        self.resolve_function = hierarchy.resolve_function
        self.unknown_bases = hierarchy.unknown_bases
        self.dataclass_fields = hierarchy.dataclass_fields
        self.is_driver_only = hierarchy.is_driver_only
        # Roles's
        self.is_abstract = roles.is_abstract
        self.is_worker = roles.is_worker
        self.is_runner = roles.is_runner
        self.workers = roles.workers
        self.runners = roles.runners
        self.runner_candidates = roles.runner_candidates
        self.paired_runners = roles.paired_runners
        self.worker_runner_pairs = roles.worker_runner_pairs
        self.uses_contract = roles.uses_contract
        self.on_contract = roles.on_contract
        # KeyFlow's
        self.produced = keys.produced
        self.produced_by = keys.produced_by
        self.receivers = keys.receivers
        self.required = keys.required
        self.reads_unknown_parent = keys.reads_unknown_parent
        self.from_dict_returns_fixed_class = keys.from_dict_returns_fixed_class
        self.dict_copy = keys.dict_copy
        # StepWalk's
        self.broadcasts_per_step = steps.broadcasts_per_step
        self.collectives_reachable = steps.collectives_reachable
        # MergedDicts's
        self.merged_steps = merged.merged_steps
        self.delivered_keys = merged.delivered_keys
        self.offered_keys = merged.offered_keys
        self.unbroadcast_fields = merged.unbroadcast_fields
        self.merged_step = merged.merged_step
        # Uses's
        self.runner_inputs = uses.runner_inputs
        self.runners_of = uses.runners_of
        self.sends_through = uses.sends_through
        self.every_rank_reads = uses.every_rank_reads
        self.never_broadcasts = uses.never_broadcasts
        self.unreachable_input = uses.unreachable_input
        self.silent_worker = uses.silent_worker
        # Wrappers's
        self.attr_classes = wrappers.attr_classes
        self.inner_workers = wrappers.inner_workers
        self.wrapper_step = wrappers.wrapper_step
        self.inner_step_broadcasts = wrappers.inner_step_broadcasts
