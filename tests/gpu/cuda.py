"""When GPU tests run: they skip without a CUDA device and say so, unless
``RUNNERCHECK_REQUIRE_CUDA=1`` (``benchmarks/gpu_check.sh`` sets it on a GPU machine),
which turns that skip into an error at collection."""

from __future__ import annotations

import os

import pytest
import torch

HAS_CUDA = torch.cuda.is_available()
REQUIRED = os.environ.get("RUNNERCHECK_REQUIRE_CUDA") == "1"

if REQUIRED and not HAS_CUDA:
    raise RuntimeError("RUNNERCHECK_REQUIRE_CUDA=1 but torch sees no CUDA device")

#: Skips a test on a machine whose torch sees no CUDA device.
needs_cuda = pytest.mark.skipif(
    not HAS_CUDA, reason="no CUDA device: this test runs CUDA tensors on a GPU"
)

#: ``cpu`` everywhere; ``cuda`` where a GPU is (skipped elsewhere, saying why).
DEVICES = ["cpu", pytest.param("cuda", marks=[needs_cuda, pytest.mark.gpu])]
