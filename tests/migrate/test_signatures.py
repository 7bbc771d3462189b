"""The generic runner base takes its types from the runners' own annotations."""

from __future__ import annotations

from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project
from runnercheck.analysis.signatures import Import, RunnerSignature, runner_signature

HEADER = """\
from typing import List, Optional
import torch
from engine.sequence import SamplerOutput, PoolerOutput, SequenceGroupMetadata
"""


def runner(name: str, request: str, kv: str, returns: str, header: str = HEADER) -> str:
    return (
        f"{header}\n\nclass {name}:\n"
        f"    def execute_model(self, seq_groups: {request}, kv_caches: {kv}) -> {returns}:\n"
        "        return None\n"
    )


def signature(*sources: str) -> RunnerSignature:
    facts = [extract_source(text, f"/engine/r{i}.py") for i, text in enumerate(sources)]
    project = Project(facts)
    classes = [c for f in facts for c in f.classes.values()]
    return runner_signature(project, classes)


def test_one_stated_type_is_the_base_type_with_its_imports() -> None:
    sig = signature(
        runner("A", "List[SequenceGroupMetadata]", "List[torch.Tensor]", "Optional[SamplerOutput]")
    )
    assert (sig.request, sig.kv_caches, sig.returns) == (
        "List[SequenceGroupMetadata]",
        "List[torch.Tensor]",
        "Optional[SamplerOutput]",
    )
    assert set(sig.imports) == {
        Import("torch", None),
        Import("engine.sequence", "SequenceGroupMetadata"),
        Import("engine.sequence", "SamplerOutput"),
    }
    assert sig.typing == {"List", "Optional"}


def test_parameters_differing_by_optional_are_any_and_results_the_union() -> None:
    sig = signature(
        runner(
            "A",
            "Optional[List[SequenceGroupMetadata]]",
            "List[torch.Tensor]",
            "Optional[SamplerOutput]",
        ),
        runner("B", "List[SequenceGroupMetadata]", "List[torch.Tensor]", "PoolerOutput"),
    )
    assert sig.request == "Any"
    assert sig.kv_caches == "List[torch.Tensor]"
    assert sig.returns == "Optional[Union[SamplerOutput, PoolerOutput]]"
    assert "Union" in sig.typing


def test_disagreeing_parameters_and_unknown_names_are_any() -> None:
    sig = signature(
        runner("A", "List[SequenceGroupMetadata]", "List[torch.Tensor]", "LocalOutput"),
        runner("B", "List[int]", "List[torch.Tensor]", "SamplerOutput"),
    )
    assert sig.request == "Any"  # two different element types
    assert sig.returns == "Any"  # ``LocalOutput`` is not imported: the base cannot name it
    assert sig.kv_caches == "List[torch.Tensor]"


def test_one_name_imported_from_two_places_gives_no_types() -> None:
    other = HEADER.replace(
        "engine.sequence import SamplerOutput, ",
        "engine.other import SamplerOutput\nfrom engine.sequence import ",
    )
    sig = signature(
        runner("A", "List[int]", "List[torch.Tensor]", "SamplerOutput"),
        runner("B", "List[int]", "List[torch.Tensor]", "SamplerOutput", header=other),
    )
    assert (sig.request, sig.kv_caches, sig.returns, sig.imports) == ("Any", "Any", "Any", ())
