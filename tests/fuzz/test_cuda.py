"""The CUDA path: tensors generated on rank 0's GPU, broadcast, compared with device type.

On one GPU: world size 2 carries CUDA tensors over gloo (host copies; NCCL refuses two
ranks on one device), and world size 1 builds an NCCL communicator and probes every
dtype through it. With two GPUs or more, world size 2 runs on NCCL. Skipped without a
CUDA device unless RUNNERCHECK_REQUIRE_CUDA=1 (benchmarks/gpu_check.sh sets it), which
turns the skip into a failure."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from runnercheck.config import Config
from runnercheck.fuzz import FuzzOptions, LocalGroup, Target, fuzz
from tests.fuzz.fixtures import defects, good
from tests.gpu.cuda import needs_cuda

pytestmark = [pytest.mark.gpu, needs_cuda]


def _run(group: Any, cls: type, examples: int = 40, **options: Any) -> Any:
    s = group.settings
    target = Target(cls, f"{cls.__module__}:{cls.__qualname__}")
    return fuzz(
        [target],
        FuzzOptions(s.world_size, "cuda", examples, 5, s.deadline, **options),
        Config(),
        group,
    )


@pytest.fixture(scope="module")
def cuda2() -> Any:
    with LocalGroup(FuzzOptions(world_size=2, device="cuda", deadline=60.0).settings()) as group:
        yield group


def test_world_size_two_round_trips_cuda_tensors(cuda2: Any) -> None:
    report = _run(cuda2, good.ModelInputWithSampling, examples=60)
    assert report.passed, report.text()
    expected = "nccl" if torch.cuda.device_count() >= 2 else "host copies"
    assert expected in report.transport


def test_device_change_is_caught(cuda2: Any) -> None:
    result = _run(cuda2, defects.DeviceChanged).results[0]
    first = result.problems[0]
    assert (first.code, first.field) == ("RC303", "input_tokens")
    assert "device cuda -> cpu" in first.message


def test_dtype_change_is_caught_on_cuda(cuda2: Any) -> None:
    result = _run(cuda2, defects.DtypeChanged).results[0]
    assert (result.problems[0].code, result.problems[0].field) == ("RC303", "input_positions")
    assert "cuda" in result.example


def test_nccl_world_size_one() -> None:
    options = FuzzOptions(world_size=1, device="cuda", deadline=60.0)
    with LocalGroup(options.settings()) as group:
        info = group.start()
        assert "nccl" in info.transport
        assert torch.bfloat16 in info.dtypes and torch.bool in info.dtypes
        report = _run(group, good.ModelInput, examples=40)
        assert report.passed, report.text()


@pytest.mark.skipif(
    torch.cuda.device_count() < 2, reason="NCCL at world size 2 needs 2 CUDA devices"
)
def test_nccl_world_size_two() -> None:
    with LocalGroup(FuzzOptions(world_size=2, device="cuda").settings()) as group:
        report = _run(group, good.ModelInputWithSampling)
        assert "nccl" in report.transport
        assert report.passed, report.text()
