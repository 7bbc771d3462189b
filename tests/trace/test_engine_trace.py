"""``runnercheck trace`` on the engine runnercheck ships, at tp 2 over gloo: its broadcasts
per step equal the engine's own counter in every shape, a budget fails a legacy run at
its runner's broadcast, and a driver-only collective in ``prepare_model_input`` ends
with both ranks' call sites, at once, with no process left behind."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from runnercheck.demo.engine import EngineRunError, run_engine
from runnercheck.trace import TraceSession
from runnercheck.trace.monitor import alive

ROOT = Path(__file__).resolve().parents[2]
DIVERGENT = Path(__file__).resolve().parent / "fixtures" / "divergent_engine"
K = 3


@pytest.mark.slow
def test_legacy_trace_matches_the_counter_and_fails_the_budget(tmp_path: Path) -> None:
    """Through the command line: the engine's own JSON and trace's JSON of one run."""
    report_file = tmp_path / "trace.json"
    engine = ["-m", "runnercheck.demo.engine", "--shape", "legacy", "--tp", "2", "--steps", "3"]
    trace = ["-m", "runnercheck", "trace", "--max-broadcasts-per-step", "1", "--deadline", "30"]
    done = subprocess.run(
        [
            sys.executable,
            *trace,
            "--json",
            str(report_file),
            "--",
            sys.executable,
            *engine,
            "--json",
        ],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )
    assert done.returncode == 1, done.stdout + done.stderr
    counted = json.loads(done.stdout.splitlines()[0])["broadcasts_per_step_list"]
    report = json.loads(report_file.read_text())
    world = report["worlds"][0]
    traced = world["ranks"]["0"]["broadcasts_per_step"]
    assert counted == [2, 2, 2]
    # The last step is the driver's execute_model(None): one empty broadcast stops the loop.
    assert traced == [*counted, 1]
    assert world["ranks"]["1"]["broadcasts_per_step"] == traced
    assert world["ranks_agree"] and report["divergence"] is None
    budget = report["budget"]
    assert (budget["step"], budget["rank"], budget["broadcasts"]) == (0, 0, 2)
    assert budget["site"] == "runnercheck/demo/engine/legacy/model_runner.py:210"
    assert (budget["kind"], budget["method"]) == ("prepare", "ModelRunner.prepare_input_tensors")
    assert "OVER BUDGET step 0 on rank 0 ran 2 broadcasts" in done.stdout
    assert "legacy/model_runner.py:210 in ModelRunner.prepare_input_tensors" in done.stdout


@pytest.mark.parametrize("speculative", [0, K], ids=["merged", f"speculative-k{K}"])
def test_merged_and_speculative_trace_matches_the_counter(
    collective_trace: Callable[..., TraceSession], speculative: int
) -> None:
    with collective_trace(deadline=30, timeout=200) as session:
        result = run_engine(
            "merged", tp=2, steps=3, timeout_s=30, num_speculative_tokens=speculative
        )
    report = session.report
    assert report is not None and report.ok, report.problems() if report else None
    world = report.world()
    counted = result["broadcasts_per_step_list"]
    traced = world.broadcasts_per_step(0)
    assert traced == [*counted, 1]
    assert world.broadcasts_per_step(1) == traced and world.ranks_agree()
    if not speculative:
        assert counted == [1] * 3
        return
    # one proposer step + scorer on a prefill; K proposer steps + scorer on a decode
    # step: the wrapper's control values ride in the first proposer step's broadcast
    # (k + 1 per decode step; k + 2 before fold-control-broadcast).
    assert set(counted) == {2, K + 1} and counted[0] == 2
    decode = next(step for step, n in enumerate(counted) if n == K + 1)
    calls = world.steps(0)[decode].broadcast_calls
    assert [call.method for call in calls] == [
        *["MultiStepWorker.execute_model"] * K,
        "Worker.execute_model",
    ]
    assert {call.step_method for call in calls} == {"SpecDecodeWorker.execute_model"}
    # On the other rank the same step is the wrapper's non-driver step, the same calls.
    other = world.steps(1)[decode].broadcast_calls
    assert {call.step_method for call in other} == {"SpecDecodeWorker._run_non_driver_rank"}
    assert [call.method for call in other] == [call.method for call in calls]


def test_driver_only_collective_in_prepare_stops_the_run(
    collective_trace: Callable[..., TraceSession],
) -> None:
    deadline = 30.0
    with pytest.raises(EngineRunError), collective_trace(deadline=deadline) as session:
        run_engine(None, tp=2, steps=6, engine_dir=str(DIVERGENT), timeout_s=120)
    report = session.report
    assert report is not None and report.divergence is not None
    assert report.stopped == "the ranks diverged"
    # Found at the first collective: stopped long before the deadline, not by it.
    assert report.seconds < deadline
    assert report.stop_seconds is not None and report.stop_seconds < 10
    divergence = report.divergence
    assert divergence.position == 0
    driver, other = divergence.calls[0], divergence.calls[1]
    assert driver is not None and other is not None
    line = _line_of(DIVERGENT / "worker.py", "torch.distributed.all_reduce(num_tokens)")
    assert driver.site == f"tests/trace/fixtures/divergent_engine/worker.py:{line}"
    assert (driver.op, driver.kind) == ("all_reduce", "prepare")
    assert driver.method == "TokenCountingModelRunner.prepare_model_input"
    assert (other.op, other.logical_name, other.kind) == (
        "broadcast_object_list",
        "broadcast_tensor_dict",
        "worker",
    )
    assert other.site.startswith("runnercheck/demo/engine/merged/worker_base.py:")
    assert len(report.pids) == 2
    assert report.left_behind == [] and not any(alive(pid) for pid in report.pids)


def _line_of(path: Path, text: str) -> int:
    lines = path.read_text().splitlines()
    return next(number for number, line in enumerate(lines, 1) if text in line)
