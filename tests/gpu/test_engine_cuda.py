"""The engine runnercheck ships, in both shapes, at tensor-parallel size 1 on CUDA:
the same tokens as on the CPU.

Tolerance: none. The model is float32 throughout (TF32 stays off, torch's default for
float32 matrix products) and sampling is greedy, so a token can differ only where two
logits lie within float32 rounding of each other; the run is short enough that this
does not happen with the shipped seed. Should it ever, the failure names the first
request and position whose token differs.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from runnercheck.demo.engine import SHAPES, run_engine
from tests.gpu.cuda import needs_cuda

REPO = Path(__file__).resolve().parents[2]
#: Enough steps for prefills, decodes, swaps out and in, and copy-on-write copies.
STEPS = 32


def first_difference(expected: list[Any], actual: list[Any]) -> str:
    for (request, seqs), (_, other) in zip(expected, actual, strict=False):
        for index, (a, b) in enumerate(zip(seqs, other, strict=False)):
            for position, (x, y) in enumerate(zip(a, b, strict=False)):
                if x != y:
                    return f"request {request} sequence {index} token {position}: {x} -> {y}"
            if len(a) != len(b):
                return f"request {request} sequence {index}: {len(a)} -> {len(b)} tokens"
    return f"{len(expected)} -> {len(actual)} requests"


@needs_cuda
@pytest.mark.gpu
@pytest.mark.parametrize("shape", SHAPES)
def test_engine_on_cuda_makes_the_cpu_tokens(shape: str, record_property: Any) -> None:
    cpu = run_engine(shape, tp=1, steps=STEPS, device="cpu")
    cuda = run_engine(shape, tp=1, steps=STEPS, device="cuda")
    record_property("tokens_sha256_cpu", cpu["tokens_sha256"])
    record_property("tokens_sha256_cuda", cuda["tokens_sha256"])
    record_property("num_tokens", cuda["num_tokens"])
    record_property("step_time_ms_cpu", round(cpu["step_time_s"] * 1e3, 3))
    record_property("step_time_ms_cuda", round(cuda["step_time_s"] * 1e3, 3))
    assert cuda["device"] == "cuda"
    stats = cuda["scheduler"]
    assert stats["blocks_swapped_out"] and stats["blocks_swapped_in"] and stats["blocks_copied"]
    assert cuda["tokens_sha256"] == cpu["tokens_sha256"], first_difference(
        cpu["token_ids"], cuda["token_ids"]
    )
    assert cuda["scheduler"] == cpu["scheduler"]


def test_cuda_without_a_gpu_is_one_clear_line() -> None:
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    command = [sys.executable, "-m", "runnercheck.demo.engine", "--shape", "merged"]
    proc = subprocess.run(
        [*command, "--steps", "2", "--device", "cuda"],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert proc.returncode == 1
    assert proc.stderr.strip().splitlines() == [
        "python -m runnercheck.demo.engine: error: rank 0: EngineRunError: "
        "device cuda: torch sees no CUDA device"
    ]


def test_first_difference_names_the_token() -> None:
    cpu = [["0", [[1, 2, 3]]], ["1", [[4]]]]
    assert first_difference(cpu, [["0", [[1, 2, 3]]], ["1", [[5]]]]) == (
        "request 1 sequence 0 token 0: 4 -> 5"
    )
    assert first_difference(cpu, [["0", [[1, 2]]], ["1", [[4]]]]) == (
        "request 0 sequence 0: 3 -> 2 tokens"
    )
