"""RC105 collective-in-prepare: `prepare_model_input` (or a method it calls) runs a collective."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import cast

from runnercheck.analysis.model import ClassFacts, ModuleFacts
from runnercheck.analysis.project import Project, Reached
from runnercheck.catalog import Rule
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

RULE = Rule(
    code="RC105",
    name="collective-in-prepare",
    tool="check",
    summary="`prepare_model_input` (or a method it calls) runs a collective.",
    why="Only the driver prepares inputs; a collective there is matched by nothing on the other ranks, so they deadlock or pair it with the wrong broadcast. Branches that literal arguments rule out are not followed (a helper reached only with `align=False`). A collective other than the step broadcast that runs only under the driver flag is a note: it can only work among the drivers (a data-parallel group), as its author meant. A runner off the V0 contract (its `execute_model` prepares its own input on every rank, and nothing of it or its worker broadcasts step metadata: a V1 runner) is not checked.",
    bad="""\
from vllm.distributed import broadcast_tensor_dict


class ModelRunner:
    def prepare_model_input(self, seq_group_metadata_list):
        model_input = self._prepare(seq_group_metadata_list)
        broadcast_tensor_dict(model_input.as_broadcastable_tensor_dict(), src=0)
        return model_input
""",
    good="""\
class ModelRunner:
    def prepare_model_input(self, seq_group_metadata_list):
        # the worker broadcasts the input once, with its own keys
        return self._prepare(seq_group_metadata_list)
""",
)


@dataclass(frozen=True)
class _Hit:
    cls: ClassFacts
    reached: Reached
    #: Lines of receives on the non-driver side of the same split (the other half).
    pair: tuple[int, ...]


def _hits(project: Project, cls: ClassFacts) -> Iterator[_Hit]:
    """A collective reachable from ``prepare_model_input`` through the class's own
    methods. A receive on the non-driver side of a driver split in the same function
    as a reported send is the other half of that one mistake: it goes into the send's
    message instead of a finding of its own."""
    prepare = project.contract.prepare_input_method
    if prepare not in cls.methods:
        return
    reached = project.collectives_reachable(cls, prepare)
    if not reached or not project.on_contract(cls):
        return  # (a V1 runner prepares its input on every rank)
    paired: dict[tuple[str, str], list[int]] = {}
    for key in {(r.site.path, r.site.where) for r in reached}:
        here = [r for r in reached if (r.site.path, r.site.where) == key]
        if any(r.non_driver for r in here) and not all(r.non_driver for r in here):
            paired[key] = sorted(r.site.line for r in here if r.non_driver)
    for one in reached:
        site = one.site
        pair = paired.get((site.path, site.where), [])
        if site.line not in pair:
            yield _Hit(cls, one, tuple(pair))


def _causes(project: Project) -> dict[tuple[str, int, int], list[_Hit]]:
    """Each collective reached from some class's prepare, with every class that reaches
    it (one cause: the collective, however many runners inherit the path)."""
    cached = project.memo.get(RULE.code)
    if cached is None:
        causes: dict[tuple[str, int, int], list[_Hit]] = {}
        for cls in project.all_classes():
            for hit in _hits(project, cls):
                site = hit.reached.site
                causes.setdefault((site.path, site.line, site.col), []).append(hit)
        project.memo[RULE.code] = cached = causes
    return cast(dict[tuple[str, int, int], list[_Hit]], cached)


def _via(hit: _Hit, prepare: str) -> str:
    chain = hit.reached.chain
    via = f" (via {' -> '.join(chain[1:])})" if len(chain) > 1 else ""
    return f"{hit.cls.name}.{prepare}{via}"


def check_module(project: Project, module: ModuleFacts) -> Iterator[Finding]:
    """One finding per collective, naming every prepare that reaches it."""
    prepare = project.contract.prepare_input_method
    for (path, line, col), hits in _causes(project).items():
        if path != module.path:
            continue
        site = hits[0].reached.site
        pair = hits[0].pair
        where = ", ".join(_via(hit, prepare) for hit in hits)
        also = f"; its non-driver side runs `{site.callee}` too (line {pair[0]})" if pair else ""
        finding = Finding(
            path,
            line,
            col,
            RULE.code,
            f"collective `{site.callee}` runs in {where}: only the "
            f"driver prepares inputs, so no other rank matches it{also}",
        )
        step_broadcast = site.callee.rsplit(".", 1)[-1] == project.contract.broadcast_function
        if all(hit.reached.driver_only for hit in hits) and not step_broadcast:
            finding = finding.as_note(
                f"it runs only where `{project.contract.driver_flag}` holds: a collective "
                "among the drivers (such as a data-parallel group), which the other "
                "replicas' drivers match in their own prepare"
            )
        yield finding


CHECK = CheckRule(RULE, check_module=check_module)
