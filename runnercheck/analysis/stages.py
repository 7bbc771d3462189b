"""Where a worker and the runner it drives stand in the migration: legacy or merged.

A migration rewrites a worker and its runners together (see :mod:`codemods`). A group
whose files are at different stages compiles, but fails at its first step: a legacy
worker passes the request list to a merged runner's ``execute_model(model_input,
kv_caches)``; a merged worker calls ``prepare_model_input`` on a legacy runner that
has none. That happens when a migration is interrupted, or when an editor saves a
buffer it read before the migration (the worker old, the runners new).

The stage of each side is read from what it does, never from a file's name:

- a **worker** is *merged* when a method along its MRO calls the runner's
  ``prepare_model_input`` or ``make_model_input_from_broadcasted_tensor_dict``
  (``self.<attr>.<method>``), and *legacy* when it calls the runner's
  ``execute_model`` itself and no class of its MRO (all of them analysed) calls
  either of those;
- a **runner** is *merged* when a concrete ``prepare_model_input`` or
  ``make_model_input_from_broadcasted_tensor_dict`` resolves along its MRO, and
  *legacy* when neither name resolves at all but ``execute_model`` does. A runner whose
  ``execute_model`` calls its own ``prepare_model_input`` takes what a legacy worker
  hands it (the request, or a V1 scheduler output): no pair with it is mixed.

Anything else (a base class outside the analysed files, say) is no stage, and no pair
with an unknown side is reported. Nor is a pair off the V0 contract
(:meth:`~runnercheck.analysis.roles.Roles.on_contract`): a V1 worker calls
``execute_model(scheduler_output)`` on a runner whose ``execute_model`` prepares its own
input, and neither side broadcasts nor rebuilds an input from a broadcast; that is
neither stage of this migration.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project

Stage = Literal["legacy", "merged"]


@dataclass(frozen=True)
class MixedPair:
    worker: ClassFacts
    runner: ClassFacts
    #: ``self.<attr>`` holding the runner.
    attr: str
    worker_stage: Stage
    runner_stage: Stage
    #: The worker's call that no longer matches the runner.
    line: int
    call: str

    @property
    def message(self) -> str:
        return mixed_message([self])


def mixed_message(pairs: list[MixedPair]) -> str:
    """What fails for pairs that share the worker's call (one cause): the runners it
    fails in, listed."""
    first = pairs[0]
    worker = first.worker.name
    runners = ", ".join(sorted({p.runner.name for p in pairs}))
    several = len({p.runner.name for p in pairs}) > 1
    if first.worker_stage == "legacy":
        why = (
            f"{worker} (legacy) calls `self.{first.attr}.{first.call}` with the request "
            f"list, but {runners} {'are' if several else 'is'} already migrated "
            f"({'they take' if several else 'it takes'} a model input)"
        )
    else:
        why = (
            f"{worker} (migrated) calls `self.{first.attr}.{first.call}`, which the legacy "
            f"{runners} {'do' if several else 'does'} not define"
        )
    return (
        f"half-applied migration: {why}; the group fails at its first step; migrate "
        "the files of the group together (`runnercheck migrate`) or put back the "
        "version of each that matches the others"
    )


def worker_stage(project: Project, worker: ClassFacts, attr: str) -> tuple[Stage, int, str] | None:
    """The worker's stage towards ``self.<attr>``, with the line and method of the
    call that shows it; None when it calls neither API."""
    contract = project.contract
    prefix = f"self.{attr}."
    merged_names = (contract.prepare_input_method, contract.make_input_method)
    legacy: tuple[int, str] | None = None
    for klass in project.mro(worker):
        for func in klass.methods.values():
            for call in func.calls:
                if not call.callee.startswith(prefix):
                    continue
                name = call.callee[len(prefix) :]
                if name in merged_names:
                    return "merged", call.line, name
                if name == contract.execute_method and legacy is None and klass is worker:
                    legacy = (call.line, name)
    if legacy is None or project.unresolved_bases(worker):
        return None  # a base outside the analysed files may call the merged API
    return "legacy", *legacy


def runner_stage(project: Project, runner: ClassFacts) -> Stage | None:
    contract = project.contract
    found = [
        project.resolve_method(runner, name)
        for name in (contract.prepare_input_method, contract.make_input_method)
    ]
    if any(ref is not None and not (ref.func.is_abstract or ref.func.is_stub) for ref in found):
        return "merged"
    if all(ref is None for ref in found):
        execute = project.resolve_method(runner, contract.execute_method)
        if execute is not None and not project.unresolved_bases(runner):
            return "legacy"
    return None


def mixed_pairs(project: Project, worker: ClassFacts) -> list[MixedPair]:
    """Each runner ``worker`` drives whose stage is not the worker's."""
    out: list[MixedPair] = []
    if project.is_abstract(worker):
        return out
    for attr, runners in project.runner_candidates(worker).items():
        stage = worker_stage(project, worker, attr)
        if stage is None:
            continue
        for runner in runners:
            if not project.on_contract(runner):
                continue  # a V1 pair: the runner prepares what it is given on every rank
            if stage[0] == "legacy" and project.roles.builds_own_input(runner):
                # its ``execute_model`` prepares its own input from what it is handed
                # (a V1 worker's runner still on the V0 runner base): no mismatch
                continue
            other = runner_stage(project, runner)
            if other is not None and other != stage[0]:
                out.append(MixedPair(worker, runner, attr, stage[0], other, stage[1], stage[2]))
    return out
