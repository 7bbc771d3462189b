"""Composed steps (``A+B+extra:NAME``): parsing, and real round trips of merged dicts
through a gloo group of two processes on 127.0.0.1.

The fixture reproduces vLLM 0.5.1's shipped bug in our own code: the worker input reads
``virtual_engine`` without popping it, and a model input without that field rebuilds
itself with ``cls(**tensor_dict)`` from the same dict."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runnercheck.cli import main
from runnercheck.config import Config, config_from_mapping
from runnercheck.contract import VLLM
from runnercheck.errors import ConfigError, UsageError
from runnercheck.fuzz import ClassResult, FuzzOptions, fuzz
from runnercheck.fuzz.report import RunReport
from runnercheck.fuzz.steps import declared_extras, resolve_step, resolve_targets

ROOT = Path(__file__).resolve().parents[2]
SEED = 3
MOD = "tests.fuzz.fixtures.steps"
LEAKY = f"{MOD}:LeakyWorkerInput"
FIXED = f"{MOD}:WorkerStepInput"
CPU = f"{MOD}:CPUStepInput"
ENGINE = f"{MOD}:EngineStepInput"
HIDDEN = "extra:previous_hidden_states"


# ------------------------------------------------------------------ specs


def test_step_parts_in_order_with_extras_where_named_or_last() -> None:
    step = resolve_step(f"{FIXED}+{HIDDEN}+{CPU}", VLLM, {"num_steps": "int"})
    assert [(p.label, p.is_extra) for p in step.parts] == [
        ("WorkerStepInput", False),
        ("previous_hidden_states", True),
        ("CPUStepInput", False),
        ("num_steps", True),
    ]
    assert step.name == f"{FIXED}+{HIDDEN}=tensor+{CPU}+extra:num_steps=int"
    # the canonical name resolves to the same step without any declared extras
    assert resolve_step(step.name, VLLM).parts == step.parts


def test_extra_types_inline_beat_options_beat_configuration() -> None:
    extras = declared_extras(["num_steps=int", "seq_ids"], {"num_steps": "float", "x": "bool"})
    assert extras == {"num_steps": "int", "x": "bool", "seq_ids": "tensor"}
    step = resolve_step(f"{FIXED}+extra:num_steps+extra:x=str+{CPU}", VLLM, extras)
    assert [p.type_text for p in step.extras] == ["int", "str", "tensor"]


def test_fuzz_extras_is_validated_configuration() -> None:
    config = config_from_mapping({"fuzz_extras": {"previous_hidden_states": "tensor"}}, "p.toml")
    assert config.fuzz_extras == {"previous_hidden_states": "tensor"}
    with pytest.raises(ConfigError, match="fuzz_extras"):
        config_from_mapping({"fuzz_extras": ["previous_hidden_states"]}, "p.toml")


def test_steps_and_classes_resolve_together_in_order() -> None:
    targets = resolve_targets([f"{MOD}:CPUStepInput", f"{LEAKY}+{CPU}", CPU], VLLM)
    assert [getattr(t, "name", "") for t in targets] == [CPU, f"{LEAKY}+{CPU}"]


@pytest.mark.parametrize(
    ("spec", "extras", "message"),
    [
        (f"{FIXED}++{CPU}", {}, "empty part"),
        (f"{FIXED}+{MOD}", {}, f"part '{MOD}' must name one class"),
        (f"{FIXED}+{MOD}:Nope", {}, "has no attribute 'Nope'"),
        (f"{FIXED}+{FIXED}", {}, "appears twice"),
        (f"{FIXED}+{HIDDEN}+{HIDDEN}", {}, "extra 'previous_hidden_states' appears twice"),
        (f"{FIXED}+extra:h=matrix", {}, "extra 'h': unknown type 'matrix'"),
        (f"{FIXED}+extra:=int", {}, "an extra needs a name"),
        ("extra:a+extra:b", {}, "no input class among its parts"),
        (f"{FIXED}+extra:CPUStepInput+{CPU}", {}, "has the name of a class"),
    ],
)
def test_bad_steps_are_named(spec: str, extras: dict[str, str], message: str) -> None:
    with pytest.raises(UsageError, match=message) as info:
        resolve_step(spec, VLLM, extras)
    assert "\n" not in str(info.value)


# ------------------------------------------------------------------ real round trips


@pytest.fixture
def group2(roundtrip_groups: Any) -> Any:
    return roundtrip_groups.get(2, "cpu", 10.0)


def run_step(
    group: Any, spec: str, examples: int = 8, seed: int = SEED
) -> tuple[RunReport, ClassResult]:
    settings = group.settings
    report = fuzz(
        [resolve_step(spec, VLLM)],
        FuzzOptions(settings.world_size, settings.device, examples, seed, settings.deadline),
        Config(),
        group,
    )
    return report, report.results[0]


def test_unpopped_worker_key_is_a_minimal_example_with_its_seed(group2: Any) -> None:
    report, result = run_step(group2, f"{LEAKY}+{CPU}")
    [problem] = result.problems
    assert (problem.code, problem.field, problem.ranks) == ("RC302", "virtual_engine", (1,))
    assert problem.message.startswith(
        "CPUStepInput.from_broadcasted_tensor_dict raised TypeError: CPUStepInput.__init__() "
        "got an unexpected keyword argument 'virtual_engine' at tests/fuzz/fixtures/steps.py:"
    )
    assert problem.message.endswith(
        "; the key comes from LeakyWorkerInput.as_broadcastable_tensor_dict(), and "
        "LeakyWorkerInput.from_broadcasted_tensor_dict() left it in the dict instead of "
        "popping it"
    )
    assert result.shrunk and result.example == "LeakyWorkerInput() + CPUStepInput()"
    assert result.seed == SEED
    assert report.replay_command(result) == (
        f"runnercheck fuzz {LEAKY}+{CPU} --seed {SEED} --examples 8"
    )
    again = run_step(group2, f"{LEAKY}+{CPU}")[1]
    assert (again.examples, again.example, again.problems) == (
        result.examples,
        result.example,
        result.problems,
    )


def test_the_popping_worker_input_passes(group2: Any) -> None:
    _, result = run_step(group2, f"{FIXED}+{CPU}", examples=15)
    assert result.problems == []
    assert result.examples == 15


def test_extra_popped_after_the_model_input_fails_before_passes(group2: Any) -> None:
    _, late = run_step(group2, f"{FIXED}+{CPU}+{HIDDEN}")
    [problem] = late.problems
    assert (problem.code, problem.field) == ("RC302", "previous_hidden_states")
    assert problem.message.endswith(
        "; the worker's extra 'previous_hidden_states' is popped only after CPUStepInput "
        "was rebuilt from the same dict; pop it before"
    )
    assert late.example.startswith("WorkerStepInput() + CPUStepInput() + previous_hidden_states=")
    _, early = run_step(group2, f"{FIXED}+{HIDDEN}+{CPU}", examples=10)
    assert early.problems == []


def test_a_key_both_parts_declare(group2: Any) -> None:
    # left behind by the worker input, taken by a model input that declares it: fine
    assert run_step(group2, f"{LEAKY}+{ENGINE}", examples=10)[1].problems == []
    # popped by the worker input: the model input's field arrives as its default
    _, result = run_step(group2, f"{FIXED}+{ENGINE}", examples=30)
    [problem] = result.problems
    assert (problem.code, problem.field) == ("RC301", "EngineStepInput.virtual_engine")
    assert problem.message.endswith(
        "(the field's default); key 'virtual_engine' was popped by "
        "WorkerStepInput.from_broadcasted_tensor_dict() before EngineStepInput read the dict"
    )
    assert result.example == "WorkerStepInput(virtual_engine=1) + EngineStepInput(virtual_engine=1)"


# ------------------------------------------------------------------ the command line


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "fuzz", *args],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "GLOO_SOCKET_IFNAME": "lo"},
    )


def test_cli_extras_from_configuration(tmp_path: Path) -> None:
    pyproject = tmp_path / "pyproject.toml"
    pyproject.write_text('[tool.runnercheck]\nfuzz_extras = {previous_hidden_states = "tensor"}\n')
    done = _cli(
        f"{FIXED}+{CPU}",
        "--config",
        str(pyproject),
        "--examples",
        "5",
        "--format",
        "json",
        "--world-size",
        "1",
    )
    assert done.returncode == 1, done.stderr
    [result] = json.loads(done.stdout)["results"]
    assert result["target"] == f"{FIXED}+{CPU}+{HIDDEN}=tensor"
    assert [(p["code"], p["field"], p["ranks"]) for p in result["problems"]] == [
        ("RC302", "previous_hidden_states", [0])
    ]
    assert f"fuzz {FIXED}+{CPU}+{HIDDEN}=tensor --seed" in result["replay"]
    # the configuration that named the extra is part of the replay
    assert result["replay"].endswith(f"--world-size 1 --examples 5 --config {pyproject}")


def test_cli_usage_error_is_one_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["fuzz", f"{FIXED}+{CPU}", "--extra", "previous_hidden_states=matrix"]) == 2
    assert capsys.readouterr().err.strip() == (
        "runnercheck: error: --extra 'previous_hidden_states=matrix': extra "
        "'previous_hidden_states': unknown type 'matrix' (one of tensor, int, float, bool, "
        "str, bytes, or module:attr)"
    )
