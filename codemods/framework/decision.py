"""Which files each codemod could change, decided from the ``ast`` analysis alone (the
project view ``check`` asks), before any LibCST: ``migrate`` parses with LibCST (and
imports it at all) only the files some codemod may change.

The decision is sound, never complete: "no" only where the codemod's rewrite cannot
change the file, "maybe" where only the rewrite can tell (LibCST then decides, and may
still leave the file alone, e.g. ``super-dict`` refusing a dict it cannot split). Each
single-class codemod rewrites exactly the classes one analysis query flags, so "maybe" is
that query over every class of the file:

* ``super-dict`` rewrites or refuses a class only where ``Project.dict_copy`` finds
  a copy of the parent's dict (RC104);
* ``driver-only`` marks the fields of ``Project.unbroadcast_fields`` (RC103) and refuses a
  class of ``Project.reads_unknown_parent``;
* ``self-return`` rewrites a ``from_broadcasted_tensor_dict`` classmethod with parameters
  annotated to return its own class (``Project.from_dict_returns_fixed_class``; the
  facts hold the same decorator, parameters and annotation the rewrite reads). The
  facts keep the last definition of a name, while the rewrite reads every top-level
  class and method: a file whose bytes define the method more often than its classes'
  facts show (a class or a method defined twice) is a "maybe" too;
* ``fold-control-broadcast`` folds a wrapper worker whose step broadcasts control values
  before an inner step (RC110), and its plan (:mod:`codemods.fold_plan`, no LibCST) tells
  a fold it refuses: a file whose only candidate is such a wrapper is settled here, with
  the plan's refusals.

``merge-broadcasts`` decides by group (:func:`codemods.facts.groups.find_groups`): a group
refused as found is planned with no LibCST at all.

Where the answer is "maybe", ``migrate --check`` still settles without LibCST a file
whose rewrites :mod:`codemods.framework.replay` replays on the ``ast`` (see
:func:`codemods.framework.tasks.exact_file`).

``migrate(..., decide=False)`` runs without this decision (every given file goes through
every selected single-class codemod with LibCST); the tests and the benchmark compare the
two runs, which must give the same result.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence

from codemods import fold_plan
from codemods.framework import registry
from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.records import Refused

FOLD = registry.FOLD_CONTROL_BROADCAST.name


def single_targets(
    project: Project, select: Sequence[str], sources: Mapping[str, bytes] | None = None
) -> dict[str, set[str]]:
    """Per file, the single-class codemods that may change it (see the module's
    docstring for why each query covers everything its codemod rewrites). ``sources``:
    the files' bytes, for the definitions the facts do not keep."""
    wanted: dict[str, set[str]] = {}
    for cls in project.all_classes():
        names: set[str] = set()
        if registry.SUPER_DICT.name in select and project.dict_copy(cls) is not None:
            names.add(registry.SUPER_DICT.name)
        if registry.DRIVER_ONLY.name in select and (
            project.unbroadcast_fields(cls) or project.reads_unknown_parent(cls)
        ):
            names.add(registry.DRIVER_ONLY.name)
        if registry.SELF_RETURN.name in select and project.from_dict_returns_fixed_class(cls):
            names.add(registry.SELF_RETURN.name)
        if FOLD in select and _has_control_broadcast(project, cls):
            names.add(FOLD)
        if names:
            wanted.setdefault(cls.path, set()).update(names)
    if registry.SELF_RETURN.name in select:
        for path in _shadowed_from_dict(project, sources or {}):
            wanted.setdefault(path, set()).add(registry.SELF_RETURN.name)
    return wanted


def _shadowed_from_dict(project: Project, sources: Mapping[str, bytes]) -> list[str]:
    """Files that define ``from_broadcasted_tensor_dict`` more often than the facts of
    their classes show: a definition the facts do not keep (a class or a method of the
    same name defined again later) that the rewrite may still read."""
    name = project.contract.from_dict_method
    needle = f"def {name}".encode()
    found: list[str] = []
    for path, data in sources.items():
        facts = project.modules.get(path)
        if facts is None or needle not in data:
            continue
        kept = sum(1 for cls in facts.classes.values() if name in cls.methods)
        if data.count(needle) > kept:
            found.append(path)
    return found


def every_file(paths: Iterable[str], select: Sequence[str]) -> dict[str, set[str]]:
    """No decision: every selected single-class codemod may change every file."""
    names = {name for name in registry.SINGLE if name in select}
    return {path: set(names) for path in paths} if names else {}


def settled(project: Project, path: str, targets: set[str]) -> list[Refused] | None:
    """The refusals of ``path`` when the analysis alone shows that no codemod changes it
    (its one candidate is a wrapper whose fold its plan refuses); None when only the
    rewrite can tell."""
    if targets != {FOLD}:
        return None
    return fold_plan.refused_plans(project, path)


def _has_control_broadcast(project: Project, cls: ClassFacts) -> bool:
    """A wrapper worker that broadcasts a control dict before an inner step (RC110)."""
    step = project.wrapper_step(cls) if project.is_worker(cls) else None
    return step is not None and bool(step.control_paths())
