"""The shipped merged demo engine's input classes round-trip (with its attention backend,
as its workers call them), and without the backend the attention fields are rebuilt
into the class the input annotates."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from runnercheck.config import Config
from runnercheck.contract import VLLM
from runnercheck.fuzz import FuzzOptions, fuzz, resolve_all

MERGED = "runnercheck.demo.engine.merged"
MERGED_DIR = Path(__file__).resolve().parents[2] / "runnercheck" / "demo" / "engine" / "merged"


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


@pytest.mark.slow
def test_merged_engine_inputs_round_trip(group2: Any) -> None:
    from runnercheck.demo.engine.attention import TinyAttentionBackend

    targets = resolve_all([str(MERGED_DIR)], VLLM)
    names = sorted(t.name.split(":")[1] for t in targets)
    assert names == [
        "CPUModelInput",
        "ModelInputForGPU",
        "ModelInputForGPUWithPoolingMetadata",
        "ModelInputForGPUWithSamplingMetadata",
        "WorkerInput",
    ]
    options = FuzzOptions(2, "cpu", 60, seed=7, deadline=10.0, attn_backend=TinyAttentionBackend)
    report = fuzz(targets, options, Config(), group2)
    assert report.passed, report.text()
    assert [r.examples for r in report.results] == [60] * 5


@pytest.mark.slow
def test_attention_fields_are_rebuilt_into_the_annotated_class_without_a_backend(
    group2: Any,
) -> None:
    targets = resolve_all([f"{MERGED}.model_runner:ModelInputForGPU"], VLLM)
    report = fuzz(targets, FuzzOptions(2, "cpu", 60, seed=7, deadline=10.0), Config(), group2)
    assert report.passed, report.text()


def test_a_step_rebuilds_attention_fields_into_the_annotated_class_without_a_backend(
    group2: Any,
) -> None:
    from runnercheck.fuzz import resolve_step

    # as the model input alone: the stand-in backend of the part that takes one
    step = resolve_step(
        f"{MERGED}.worker_base:WorkerInput+{MERGED}.cpu_model_runner:CPUModelInput", VLLM
    )
    report = fuzz([step], FuzzOptions(2, "cpu", 30, seed=7, deadline=10.0), Config(), group2)
    assert report.passed, report.text()


def test_a_step_names_the_backend_its_failing_part_needs(group2: Any) -> None:
    from runnercheck.fuzz import resolve_step

    # no stand-in can be made for a part without an attn_metadata field of its own
    fixtures = "tests.fuzz.fixtures.steps"
    step = resolve_step(f"{fixtures}:LeakyWorkerInput+{fixtures}:CPUStepInput", VLLM)
    report = fuzz([step], FuzzOptions(2, "cpu", 30, seed=7, deadline=10.0), Config(), group2)
    messages = [problem.message for problem in report.results[0].problems]
    assert any(
        "CPUStepInput.from_broadcasted_tensor_dict() takes an attn_backend" in m for m in messages
    ), messages
