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
``Project.workers()`` / ``runners()`` -> list[ClassFacts]
``Project.runner_candidates(worker)`` -> dict attr -> list[ClassFacts] (``self.model_runner = ...``)
``Project.worker_runner_pairs()`` -> list[(worker ClassFacts, runner ClassFacts)]
``Project.dataclass_fields(cls)`` -> dict name -> (ClassFacts, FieldFacts) | None when a base is unknown
``Project.produced(cls)`` -> :class:`Produced` | None (keys of ``as_broadcastable_tensor_dict``)
``Project.receivers(cls)`` -> list[:class:`Receiver`] (``cls(**tensor_dict)`` in ``from_broadcasted_tensor_dict``)
``Project.broadcasts_per_step(cls, runner=None)`` -> dict role -> :class:`PathCount`
``Project.collectives_reachable(cls, method_name)`` -> list[:class:`Reached`]
``Project.inner_workers(cls)`` -> dict attr -> worker classes ``self.<attr>`` may hold
``Project.wrapper_step(cls)`` -> :class:`WrapperStep` | None (broadcasts of one step through
the inner workers' steps, per role and path)

Named parts it holds (composed, not inherited): ``Project.constants``
(:class:`~runnercheck.analysis.constants.Constants`: literal ``self`` attributes, and
with :func:`~runnercheck.analysis.constants.branch_taken` the branches literal
arguments and constants decide). :class:`~runnercheck.analysis.holds.NonDriverValues`
takes a project and answers, per entry point of the step, what a non-driver rank
builds (``migrate``'s equivalence check).

Its other parts live in their own modules: :mod:`~runnercheck.analysis.hierarchy` (classes,
MRO, methods, fields), :mod:`~runnercheck.analysis.roles` (workers, runners, pairs),
:mod:`~runnercheck.analysis.keyflow` (keys produced and received) and
:mod:`~runnercheck.analysis.stepwalk` (broadcasts per step, collectives) and
:mod:`~runnercheck.analysis.wrappers` (steps through wrapper workers).
"""

from __future__ import annotations

from runnercheck.analysis.hierarchy import MethodRef, module_parts
from runnercheck.analysis.keyflow import Produced, Receiver
from runnercheck.analysis.merged import Leak, MergedStep, Origin
from runnercheck.analysis.stepwalk import ROLES, ZERO, BroadcastSite, PathCount, Reached
from runnercheck.analysis.uses import Uses
from runnercheck.analysis.wrappers import StepPath, Term, Wrappers, WrapperStep

__all__ = [
    "ROLES",
    "ZERO",
    "BroadcastSite",
    "Leak",
    "MergedStep",
    "MethodRef",
    "Origin",
    "PathCount",
    "Produced",
    "Project",
    "Reached",
    "Receiver",
    "StepPath",
    "Term",
    "WrapperStep",
    "module_parts",
]


class Project(Wrappers, Uses):
    """Every question about the meaning of a set of modules, answered from their facts."""
