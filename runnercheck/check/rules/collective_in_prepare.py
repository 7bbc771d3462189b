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
    """A collective reachable from ``prepare_model_input`` through the class's own methods."""
    prepare = project.contract.prepare_input_method
    if prepare not in cls.methods:
        return
    for reached in project.collectives_reachable(cls, prepare):
        site = reached.site
        via = f" (via {' -> '.join(reached.chain[1:])})" if len(reached.chain) > 1 else ""
        yield Finding(
            site.path,
            site.line,
            site.col,
            RULE.code,
            f"collective `{site.callee}` runs in {cls.name}.{prepare}{via}: only the "
            "driver prepares inputs, so no other rank matches it",
        )


CHECK = CheckRule(RULE, check_class=check_class)
