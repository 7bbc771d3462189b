"""``runnercheck trace -- torchrun ...``: the ranks torchrun starts are traced, and a rank
that waits at a barrier its peer never reaches is stopped after the deadline, with where
each rank stands, and nothing of the run (agent, ranks) left running."""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.trace.monitor import alive

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = "tests/trace/fixtures/torchrun_hang.py"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _line_of(text: str) -> int:
    lines = (ROOT / SCRIPT).read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)


@pytest.mark.slow
def test_torchrun_hang_is_stopped_after_the_deadline(tmp_path: Path) -> None:
    port = _free_port()
    report_file = tmp_path / "trace.json"
    torchrun = ["-m", "torch.distributed.run", "--nproc-per-node", "2", "--master-port", str(port)]
    trace = ["-m", "runnercheck", "trace", "--deadline", "3", "--json", str(report_file)]
    done = subprocess.run(
        [sys.executable, *trace, "--", sys.executable, *torchrun, SCRIPT],
        capture_output=True,
        text=True,
        timeout=180,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    report = json.loads(report_file.read_text())
    world = report["worlds"][0]
    assert world["world"].startswith(f"env://127.0.0.1:{port}/")
    assert world["world_size"] == 2
    for rank in ("0", "1"):
        assert world["ranks"][rank]["broadcasts_per_step"] == [1, 1]
    assert not world["ranks_agree"]
    hang = report["hang"]
    assert hang["position"] == 2
    assert hang["ranks"]["0"].startswith(f"waits in barrier at {SCRIPT}:{_line_of('barrier()')}")
    assert hang["ranks"]["1"].startswith("has not reached it; its last collective:")
    assert hang["stacks"]["1"] == f"{SCRIPT}:{_line_of('time.sleep(')} in main"
    assert report["stopped"] == "no progress for 3 s (deadline)"
    assert report["left_behind"] == []
    assert "HANG no progress for 3 s at collective #2" in done.stdout
    assert len(report["pids"]) == 2 and not any(alive(pid) for pid in report["pids"])
