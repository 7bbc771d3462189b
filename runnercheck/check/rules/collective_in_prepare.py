"""RC105 collective-in-prepare: `prepare_model_input` (or a method it calls) runs a collective."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.catalog import Rule
from runnercheck.check.rules.base import CheckRule
from runnercheck.findings import Finding

RULE = Rule(
    code="RC105",
    name="collective-in-prepare",
    tool="check",
    summary="`prepare_model_input` (or a method it calls) runs a collective.",
    why="Only the driver prepares inputs; a collective there is matched by nothing on the other ranks, so they deadlock or pair it with the wrong broadcast.",
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


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A collective reachable from ``prepare_model_input`` through the class's own
    methods. A receive on the non-driver side of a driver split in the same function
    as a reported send is the other half of that one mistake: it goes into the send's
    message instead of a finding of its own."""
    prepare = project.contract.prepare_input_method
    if prepare not in cls.methods:
        return
    reached = project.collectives_reachable(cls, prepare)
    paired: dict[tuple[str, str], list[int]] = {}
    for key in {(r.site.path, r.site.where) for r in reached}:
        here = [r for r in reached if (r.site.path, r.site.where) == key]
        if any(r.non_driver for r in here) and not all(r.non_driver for r in here):
            paired[key] = sorted(r.site.line for r in here if r.non_driver)
    for one in reached:
        site = one.site
        pair = paired.get((site.path, site.where))
        if pair and site.line in pair:
            continue
        via = f" (via {' -> '.join(one.chain[1:])})" if len(one.chain) > 1 else ""
        also = f"; its non-driver side runs `{site.callee}` too (line {pair[0]})" if pair else ""
        yield Finding(
            site.path,
            site.line,
            site.col,
            RULE.code,
            f"collective `{site.callee}` runs in {cls.name}.{prepare}{via}: only the "
            f"driver prepares inputs, so no other rank matches it{also}",
        )


CHECK = CheckRule(RULE, check_class=check_class)
