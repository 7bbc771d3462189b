"""The generic runner base takes its types from the runners' own annotations."""

from __future__ import annotations

from codemods.facts.signatures import (
    Import,
    RunnerSignature,
    inherited_local_types,
    runner_signature,
)
from runnercheck.analysis.extract import extract_source
from runnercheck.analysis.project import Project

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
    facts = [extract_source(text, f"/engine/r{i}.py", names=True) for i, text in enumerate(sources)]
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


PARENT = """\
from typing import NamedTuple, Optional, Tuple

from engine.lora import LoRAMapping


class Prepared(NamedTuple):
    tokens: list
    lora_mapping: Optional[LoRAMapping]


class ParentRunner:
    def _prepare(self, groups) -> Prepared:
        return Prepared([], None)

    def _pair(self, groups) -> Tuple[int, Optional[LoRAMapping]]:
        return 0, None
"""

CHILD = """\
from typing import Optional

from engine.lora import LoRAMapping
from engine.parent import ParentRunner


class ChildRunner(ParentRunner):
    def prepare_input_tensors(self, groups):
        if self.is_driver_worker:
            (tokens, lora_mapping) = self._prepare(groups)
            (count, other) = self._pair(groups)
"""


def test_locals_unpacked_from_an_inherited_helper_take_its_element_types() -> None:
    facts = [
        extract_source(PARENT, "/engine/parent.py", names=True),
        extract_source(CHILD, "/engine/child.py", names=True),
    ]
    project = Project(facts)
    child = facts[1].classes["ChildRunner"]
    shape_unpacked = [
        ("tokens", "_prepare", 0, 2),
        ("lora_mapping", "_prepare", 1, 2),
        ("count", "_pair", 0, 2),
        ("other", "_pair", 1, 2),
        ("missing", "_absent", 0, 1),
    ]
    found = inherited_local_types(project, child, shape_unpacked)
    assert found == {
        "tokens": "list",
        "lora_mapping": "Optional[LoRAMapping]",
        "count": "int",
        "other": "Optional[LoRAMapping]",
    }


def test_an_element_type_the_module_cannot_name_is_left_out() -> None:
    child = CHILD.replace("from engine.lora import LoRAMapping\n", "")
    facts = [
        extract_source(PARENT, "/engine/parent.py", names=True),
        extract_source(child, "/engine/child.py", names=True),
    ]
    found = inherited_local_types(
        Project(facts), facts[1].classes["ChildRunner"], [("lora_mapping", "_prepare", 1, 2)]
    )
    assert found == {}
