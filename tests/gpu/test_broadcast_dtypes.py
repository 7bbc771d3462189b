"""Every tensor dtype the engine uses (fp32, fp16, bf16, int32, int64, bool, and fp8
e4m3/e5m2 where torch has them), 0-dim, empty and non-contiguous, through a real
broadcast; values (bytes), dtype, shape and device type compared on the receiving side.

* gloo at world size 2: on the CPU everywhere; on CUDA with both ranks on the one GPU
  (CUDA tensors cross through host memory). gloo has no fp8: the probe must refuse it
  on every rank alike, which is how ``runnercheck fuzz`` leaves it out instead of hanging.
* NCCL at world size 1, CUDA only: see :mod:`tests.gpu.dtype_ranks`.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.gpu.cuda import DEVICES, needs_cuda
from tests.gpu.dtype_ranks import ENGINE_DTYPES, FP8, LAYOUTS, dtype_name

REPO = Path(__file__).resolve().parents[2]
#: Seconds the ranks of one test may take, CUDA and NCCL start-up included.
DEADLINE = 180


def run_ranks(mode: str, world: int, device: str, tmp: Path) -> list[dict[str, Any]]:
    env = dict(
        os.environ, PYTHONPATH=os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])
    )
    env.setdefault("GLOO_SOCKET_IFNAME", "lo")
    procs = []
    for rank in range(world):
        command = [sys.executable, "-m", "tests.gpu.dtype_ranks", mode, str(rank), str(world)]
        command += [device, str(tmp / "store"), str(tmp / f"rank{rank}.json")]
        log = open(tmp / f"rank{rank}.log", "wb")
        procs.append((subprocess.Popen(command, cwd=REPO, env=env, stdout=log, stderr=log), log))
    try:
        for proc, _ in procs:
            proc.wait(timeout=DEADLINE)
    except subprocess.TimeoutExpired:
        pass
    finally:
        for proc, log in procs:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            log.close()
    results = []
    for rank, (proc, _) in enumerate(procs):
        log_tail = (tmp / f"rank{rank}.log").read_text(errors="replace")[-2000:]
        assert proc.returncode == 0, f"rank {rank} exited with {proc.returncode}:\n{log_tail}"
        results.append(json.loads((tmp / f"rank{rank}.json").read_text()))
    return results


def expected_count(dtypes: list[str]) -> int:
    return len(dtypes) * len(LAYOUTS)


@pytest.mark.parametrize("device", DEVICES)
def test_gloo_world_size_two(device: str, tmp_path: Path, record_property: Any) -> None:
    sender, receiver = run_ranks("gloo", 2, device, tmp_path)
    record_property("carried", ",".join(receiver["carried"]))
    record_property("refused", ",".join(receiver["refused"]))
    assert receiver["problems"] == []
    assert sender["carried"] == receiver["carried"] and sender["refused"] == receiver["refused"]
    # gloo carries every engine dtype but fp8, which it refuses on both ranks
    assert receiver["refused"] == [dtype_name(d) for d in FP8]
    assert receiver["compared"] == expected_count(receiver["carried"])
    assert receiver["compared"] == (len(ENGINE_DTYPES) - len(FP8)) * len(LAYOUTS)


@needs_cuda
@pytest.mark.gpu
def test_nccl_world_size_one(tmp_path: Path, record_property: Any) -> None:
    [result] = run_ranks("nccl", 1, "cuda", tmp_path)
    record_property("gpu", result.get("gpu", ""))
    record_property("refused", ",".join(result["refused"]))
    assert result["problems"] == []
    assert result["refused"] == [], f"NCCL refused {result['refused']}"
    assert result["compared"] == len(ENGINE_DTYPES) * len(LAYOUTS)
