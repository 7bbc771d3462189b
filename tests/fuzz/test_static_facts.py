"""The static facts drive ``fuzz``: a field the analysis proves driver-only is not
reported when the round trip loses it; one it cannot prove is, with the reason; the
configuration's ``driver_only`` still overrides; an input whose attention metadata is
rebuilt with a backend gets one for its annotated metadata class."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runnercheck.config import Config
from runnercheck.contract import VLLM
from runnercheck.fuzz import ClassResult, FuzzOptions, Target, fuzz
from runnercheck.fuzz.facts import analyse, around, source_files
from runnercheck.fuzz.strategies import StrategyError
from tests.fuzz.fixtures import good
from tests.fuzz.fixtures.engine.model_runner import (
    ModelInput,
    OrphanInput,
    SampledInput,
    StatefulInput,
)

ENGINE = Path(__file__).parent / "fixtures" / "engine"


def run_one(group: Any, cls: type, config: Config | None = None, **options: Any) -> ClassResult:
    settings = group.settings
    report = fuzz(
        [Target(cls, f"{cls.__module__}:{cls.__qualname__}")],
        FuzzOptions(settings.world_size, settings.device, 30, 3, settings.deadline, **options),
        config or Config(),
        group,
    )
    return report.results[0]


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


def test_the_analysis_tells_proven_from_unproven_fields() -> None:
    facts = analyse(source_files(ENGINE), VLLM)
    assert set(facts.classes) == {
        "tests.fuzz.fixtures.engine.model_runner:ModelInput",
        "tests.fuzz.fixtures.engine.model_runner:OrphanInput",
        "tests.fuzz.fixtures.engine.model_runner:SampledInput",
        "tests.fuzz.fixtures.engine.model_runner:StatefulInput",
    }
    assert facts.driver_only(ModelInput, "seq_lens")
    assert not facts.driver_only(ModelInput, "lora_mapping")
    assert "ModelRunner" in (facts.unproven(ModelInput, "lora_mapping") or "")
    assert facts.unproven(ModelInput, "input_tokens") is None
    assert "no runner" in (facts.unproven(OrphanInput, "seq_lens") or "")
    assert around([ModelInput]) == source_files(ENGINE)
    assert facts.rebuilt_in_part(SampledInput, "sampling_metadata.seq_groups")
    assert not facts.rebuilt_in_part(SampledInput, "sampling_metadata.selected_token_indices")
    assert not facts.rebuilt_in_part(SampledInput, "input_tokens")


def test_a_proven_driver_only_field_is_not_reported(group2: Any) -> None:
    result = run_one(group2, ModelInput)
    assert [(p.code, p.field) for p in result.problems] == [("RC301", "lora_mapping")]
    message = result.problems[0].message
    assert "ModelInput's dict does not send it" in message
    assert "a runner that builds it (ModelRunner) reads it" in message


def test_without_the_analysis_the_driver_only_field_is_reported(group2: Any) -> None:
    config = Config(driver_only=("ModelInput.lora_mapping",))
    assert run_one(group2, ModelInput, config).passed
    result = run_one(group2, ModelInput, config, static_facts=False)
    assert [(p.code, p.field) for p in result.problems] == [("RC301", "seq_lens")]


def test_an_unproven_field_is_reported_with_the_reason(group2: Any) -> None:
    result = run_one(group2, OrphanInput)
    assert [(p.code, p.field) for p in result.problems] == [("RC301", "seq_lens")]
    assert "no runner in the files beside it builds OrphanInput" in result.problems[0].message


def test_attention_metadata_is_rebuilt_into_its_annotated_class(group2: Any) -> None:
    assert run_one(group2, good.FlatAttentionInput).passed


def test_a_field_sent_in_part_is_compared_on_what_is_sent(group2: Any) -> None:
    assert run_one(group2, SampledInput).passed
    result = run_one(group2, SampledInput, static_facts=False)
    assert [p.field for p in result.problems] == ["sampling_metadata.seq_groups"]


def test_every_lost_field_of_a_class_is_reported(group2: Any) -> None:
    from tests.fuzz.fixtures.defects import DropsTwoFields

    result = run_one(group2, DropsTwoFields)
    assert sorted(p.field for p in result.problems) == ["lora_requests", "request_ids_to_seq_ids"]
    assert result.example.startswith("DropsTwoFields(")
    assert "minimal example for " in result.note


def test_a_driver_only_field_that_cannot_be_generated_keeps_its_default(group2: Any) -> None:
    assert run_one(group2, StatefulInput).passed
    with pytest.raises(StrategyError, match="SchedulerState"):
        run_one(group2, StatefulInput, static_facts=False)


def run_step(group: Any, spec: str) -> ClassResult:
    from runnercheck.contract import VLLM
    from runnercheck.fuzz.steps import resolve_step

    settings = group.settings
    step = resolve_step(spec, VLLM)
    options = FuzzOptions(settings.world_size, settings.device, 30, 3, settings.deadline)
    return fuzz([step], options, Config(), group).results[0]


def test_a_composed_step_rebuilds_attention_metadata_into_its_annotated_class(
    group2: Any,
) -> None:
    result = run_step(
        group2,
        "tests.fuzz.fixtures.steps:WorkerStepInput+tests.fuzz.fixtures.good:FlatAttentionInput",
    )
    assert result.passed, [p.message for p in result.problems]
