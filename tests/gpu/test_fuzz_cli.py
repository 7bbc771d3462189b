"""``runnercheck fuzz`` of the shipped merged engine's input classes, from the command
line, with tensors on the device: every class round-trips.

On one GPU: world size 1 runs on NCCL; world size 2 puts both ranks on the GPU and
carries the CUDA tensors through host memory over gloo. The CPU run checks the same
command and its JSON on any machine."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gpu.cuda import needs_cuda

REPO = Path(__file__).resolve().parents[2]
MERGED = "runnercheck/demo/engine/merged"
BACKEND = "runnercheck.demo.engine.attention:TinyAttentionBackend"
CLASSES = {
    "CPUModelInput",
    "ModelInputForGPU",
    "ModelInputForGPUWithPoolingMetadata",
    "ModelInputForGPUWithSamplingMetadata",
    "WorkerInput",
}


def fuzz_cli(device: str, world_size: int, examples: int) -> dict[str, Any]:
    command = [sys.executable, "-m", "runnercheck", "fuzz", MERGED, "--device", device]
    command += ["--world-size", str(world_size), "--examples", str(examples), "--seed", "11"]
    command += ["--attn-backend", BACKEND, "--format", "json", "--deadline", "60"]
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    proc = subprocess.run(command, cwd=REPO, env=env, capture_output=True, text=True, timeout=240)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    report: dict[str, Any] = json.loads(proc.stdout)
    return report


def check(report: dict[str, Any], examples: int) -> None:
    assert report["passed"]
    names = {r["target"].rsplit(":", 1)[1] for r in report["results"]}
    assert names == CLASSES
    assert all(r["passed"] and r["examples"] == examples for r in report["results"])


def test_fuzz_cli_engine_inputs_on_cpu() -> None:
    report = fuzz_cli("cpu", 2, 10)
    check(report, 10)
    assert report["transport"] == "gloo"


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("world_size", [1, 2])
def test_fuzz_cli_engine_inputs_on_cuda(world_size: int, record_property: Any) -> None:
    import torch

    own_gpus = torch.cuda.device_count() >= world_size
    transport = "nccl (CUDA tensors)" if own_gpus else "through host copies"
    report = fuzz_cli("cuda", world_size, 50)
    record_property("transport", report["transport"])
    record_property("not_generated", ",".join(report.get("not_generated", [])))
    check(report, 50)
    assert report["device"] == "cuda"
    assert transport in report["transport"]
