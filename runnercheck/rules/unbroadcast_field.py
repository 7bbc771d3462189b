"""RC103 unbroadcast-field: A dataclass field is neither broadcast nor declared driver-only."""

from __future__ import annotations

from collections.abc import Iterator

from runnercheck.analysis.model import ClassFacts
from runnercheck.analysis.project import Project
from runnercheck.catalog import Rule, _variant
from runnercheck.findings import Finding
from runnercheck.rules.base import CheckRule

_BAD = """\
from dataclasses import dataclass
from typing import Optional

from vllm.worker.model_runner_base import ModelRunnerBase


@dataclass(frozen=True)
class ModelInput:
    input_tokens: list
    lora_mapping: Optional[object] = None

    def as_broadcastable_tensor_dict(self):
        return {"input_tokens": self.input_tokens}

    @classmethod
    def from_broadcasted_tensor_dict(cls, tensor_dict, attn_backend=None):
        return cls(**tensor_dict)

class ModelRunner(ModelRunnerBase[ModelInput]):
    def prepare_model_input(self, seq_group_metadata_list):
        return self._prepare(seq_group_metadata_list)

    def make_model_input_from_broadcasted_tensor_dict(self, tensor_dict):
        return ModelInput.from_broadcasted_tensor_dict(tensor_dict)

    def execute_model(self, model_input, kv_caches):
        if model_input.lora_mapping is not None:
            self.set_active_loras(model_input.lora_mapping)
        return self.model(model_input.input_tokens, kv_caches)
"""
_GOOD = _variant(
    _BAD,
    (
        '        return {"input_tokens": self.input_tokens}\n',
        '        return {"input_tokens": self.input_tokens, "lora_mapping": self.lora_mapping}\n',
    ),
)

RULE = Rule(
    code="RC103",
    name="unbroadcast-field",
    tool="check",
    summary="A dataclass field is neither broadcast nor declared driver-only.",
    why="Non-driver ranks silently see the field's default (usually None) and compute something "
    "different from the driver. An error when a runner that builds the class reads the field on "
    "the path every rank runs (execute_model and what it calls); a note when only the driver "
    "reads it, or nothing does: declare it driver-only.",
    bad=_BAD,
    good=_GOOD,
)


def check_class(project: Project, cls: ClassFacts) -> Iterator[Finding]:
    """A dataclass field whose value never reaches the broadcast dict: an error when a
    runner that builds the class reads the field on the path every rank runs, a note
    otherwise (read by the driver alone, or by nothing the analysis sees)."""
    as_dict = project.contract.as_dict_method
    fields = project.unbroadcast_fields(cls)
    if not fields:
        return
    produced = project.produced(cls)
    assert produced is not None
    reads = project.every_rank_reads(cls)
    unreachable = project.unreachable_input(cls)
    for fld in fields:
        finding = Finding(
            cls.path,
            fld.line,
            fld.col,
            RULE.code,
            f"field {fld.name!r} of {cls.name} is not broadcast by "
            f"{produced.method.owner.name}.{as_dict} and not declared driver-only: "
            "non-driver ranks see its default",
        )
        if unreachable is not None:
            finding = finding.as_note(unreachable)
        elif "Callable" in fld.annotation:
            finding = finding.as_note("a callable cannot be broadcast; it is the driver's own")
        elif reads is None:
            finding = finding.as_note("no runner in the analysed files builds this class")
        elif fld.name not in reads:
            finding = finding.as_note(
                "no runner that builds it reads the field in execute_model: declare it driver-only"
            )
        yield finding


CHECK = CheckRule(RULE, check_class=check_class)
