"""An input that holds another input (vLLM's multi-step input and its
``frozen_model_input``): a field whose type is itself an input class is judged with
that class's own facts (what it sends in part, what stays on the driver, the attention
backend it is rebuilt with), and a composed step ties fields of one name inside it as
it does at the top level."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings

from runnercheck.config import Config
from runnercheck.contract import VLLM
from runnercheck.fuzz import ClassResult, FuzzOptions, Target, fuzz
from runnercheck.fuzz.backend import backend_for
from runnercheck.fuzz.facts import analyse, source_files
from runnercheck.fuzz.step_search import step_strategy
from runnercheck.fuzz.steps import resolve_step
from runnercheck.fuzz.strategies import StrategyBuilder
from tests.fuzz.fixtures.multi_step import engine
from tests.fuzz.fixtures.multi_step.engine import (
    AttentionMetadata,
    ModelInput,
    StatefulModelInput,
    WorkerInput,
)

ENGINE = Path(engine.__file__).parent
MOD = "tests.fuzz.fixtures.multi_step.engine"
STEP = f"{MOD}:WorkerInput+{MOD}:StatefulModelInput"


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


def run(group: Any, target: Any) -> ClassResult:
    settings_ = group.settings
    options = FuzzOptions(settings_.world_size, settings_.device, 30, 3, settings_.deadline)
    return fuzz([target], options, Config(), group).results[0]


def test_a_nested_input_field_is_judged_with_its_own_facts() -> None:
    facts = analyse(source_files(ENGINE), VLLM)
    assert facts.rebuilt_in_part(ModelInput, "sampling_metadata.seq_groups")
    nested = "frozen_model_input.sampling_metadata.seq_groups"
    assert facts.rebuilt_in_part(StatefulModelInput, nested)
    sent = "frozen_model_input.sampling_metadata.selected_token_indices"
    assert not facts.rebuilt_in_part(StatefulModelInput, sent)
    assert not facts.rebuilt_in_part(StatefulModelInput, "frozen_model_input.input_tokens")
    # a field that is not an input class is not looked into
    assert not facts.rebuilt_in_part(StatefulModelInput, "cached_outputs.seq_groups")


def test_the_stand_in_backend_reaches_the_nested_input_s_metadata() -> None:
    backend = backend_for(StatefulModelInput, VLLM.from_dict_method, None)
    assert backend is not None
    assert backend.get_metadata_cls() is AttentionMetadata
    # the worker input takes no backend
    assert backend_for(WorkerInput, VLLM.from_dict_method, None) is None


def test_a_stateful_input_round_trips_with_its_nested_input(group2: Any) -> None:
    result = run(group2, Target(StatefulModelInput, f"{MOD}:StatefulModelInput"))
    assert result.passed, [p.text() for p in result.problems]


@settings(max_examples=30, database=None)
@given(step_strategy(resolve_step(STEP, VLLM), StrategyBuilder(), VLLM.as_dict_method))
def test_a_step_ties_fields_of_one_name_inside_a_nested_input(example: Any) -> None:
    worker, stateful = example
    if stateful.frozen_model_input is not None:
        assert stateful.frozen_model_input.virtual_engine == worker.virtual_engine


def test_the_multi_step_worker_s_step_round_trips(group2: Any) -> None:
    result = run(group2, resolve_step(STEP, VLLM))
    assert result.passed, [p.text() for p in result.problems]


def test_a_field_its_comment_declares_unsent_and_the_driver_s_stays_on_the_driver(
    group2: Any,
) -> None:
    from tests.fuzz.fixtures.multi_step.hpu import ModelInputForHPUWithSampling as HPUInput

    facts = analyse(source_files(ENGINE), VLLM)
    assert facts.driver_only(HPUInput, "is_prompt")
    found = facts.of(HPUInput)
    assert found is not None
    assert "hpu.py:30" in found.left_out["is_prompt"].reason
    # a field the subclass's dict drops, read on every rank, is still a loss
    assert "reads it on the path every rank runs" in (facts.unproven(HPUInput, "batch_size") or "")
    result = run(group2, Target(HPUInput, f"{HPUInput.__module__}:{HPUInput.__qualname__}"))
    assert [(p.code, p.field) for p in result.problems] == [("RC301", "batch_size")]


def test_a_default_that_calls_a_type_the_platform_lacks_is_one_clear_error(
    group2: Any,
) -> None:
    from runnercheck.errors import UsageError
    from tests.fuzz.fixtures.multi_step.platform_event import PlatformEventInput

    name = f"{PlatformEventInput.__module__}:PlatformEventInput"
    with pytest.raises(UsageError) as raised:
        run(group2, Target(PlatformEventInput, name))
    message = str(raised.value)
    assert "\n" not in message
    assert "the default of field 'step_events'" in message
    assert "`current_platform.Event` is None in this process" in message
    assert "platform_event.py:33" in message
