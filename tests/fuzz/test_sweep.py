"""``runnercheck fuzz PATH`` sweeps every input class the analysis finds there: one line
per class and a table, exit 1 on a finding, 2 when a class cannot run (one line with
why, never a traceback), and a JSON report that the engine's log lines stay out of."""

from __future__ import annotations

import json
import os
import pty
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SWEEP = "tests/fuzz/fixtures/sweep"
FAILING = "tests.fuzz.fixtures.sweep.failing:FailingInput"
PASSING = "tests.fuzz.fixtures.sweep.passing:PassingInput"
UNBUILDABLE = "tests.fuzz.fixtures.sweep.unbuildable:UnbuildableInput"
UNIMPORTABLE = "tests.fuzz.fixtures.sweep.unimportable:UnimportableInput"

pytestmark = pytest.mark.slow


def _fuzz(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck", "fuzz", *args, "--seed", "3"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=240,
        env={**os.environ, "NO_COLOR": "1"},
    )


def test_a_directory_is_swept_class_by_class() -> None:
    done = _fuzz(SWEEP)
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert f"FAIL {FAILING}  (after " in done.stdout
    assert f"PASS {PASSING}  (20 examples)" in lines
    assert any(
        line.startswith(f"ERROR {UNBUILDABLE}: cannot run: no generated example could be")
        and "ValueError: no size fits" in line
        for line in lines
    )
    assert any(
        line.startswith(f"ERROR {UNIMPORTABLE}: cannot run: cannot import module")
        and "a_package_that_is_not_installed" in line
        for line in lines
    )
    table = lines[lines.index("") + 1 :]
    assert table[0].split() == ["status", "class", "examples", "found"]
    assert [row.split()[:2] for row in table[1:5]] == [
        ["FAIL", FAILING],
        ["PASS", PASSING],
        ["ERROR", UNBUILDABLE],
        ["ERROR", UNIMPORTABLE],
    ]
    assert table[-1] == "1 of 4 classes failed, 2 classes could not run"
    assert "Traceback" not in done.stdout + done.stderr


def test_a_class_that_cannot_run_alone_exits_2() -> None:
    done = _fuzz(f"{SWEEP}/unbuildable.py", f"{SWEEP}/passing.py")
    assert done.returncode == 2, done.stderr
    assert f"ERROR {UNBUILDABLE}: cannot run:" in done.stdout
    assert done.stdout.splitlines()[-1] == "1 of 2 classes could not run"
    assert "Traceback" not in done.stdout + done.stderr


def test_the_json_report_is_all_of_stdout() -> None:
    done = _fuzz(SWEEP, "--format", "json")
    assert done.returncode == 1, done.stderr
    report = json.loads(done.stdout)
    assert "engine: base module imported" in done.stderr
    statuses = {r["target"]: r["status"] for r in report["results"]}
    assert statuses == {
        FAILING: "FAIL",
        PASSING: "PASS",
        UNBUILDABLE: "ERROR",
        UNIMPORTABLE: "ERROR",
    }
    [unimportable] = [r for r in report["results"] if r["target"] == UNIMPORTABLE]
    assert "a_package_that_is_not_installed" in unimportable["error"]


def test_on_a_terminal_the_table_is_drawn_by_rich() -> None:
    leader, follower = pty.openpty()
    env = {k: v for k, v in os.environ.items() if k != "NO_COLOR"}
    env.update(TERM="xterm-256color", COLUMNS="200")
    proc = subprocess.Popen(
        [sys.executable, "-m", "runnercheck", "fuzz", SWEEP, "--seed", "3"],
        cwd=ROOT,
        stdout=follower,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed with the process
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=240) == 1
    os.close(leader)
    text = seen.decode(errors="replace")
    assert "┏" in text and "┃" in text  # rich's table, not the plain one
    assert "\x1b[" in text  # coloured
    assert f"FAIL {FAILING}  (after " in text
    assert "status  class" not in text
    assert "1 of 4 classes failed, 2 classes could not run" in text


STEP_SWEEP = "tests/fuzz/fixtures/step_sweep"
WORKER_INPUT = "tests.fuzz.fixtures.step_sweep.worker:WorkerInput"
MODEL_INPUT = "tests.fuzz.fixtures.step_sweep.worker:ModelInput"


def test_the_composed_steps_found_there_are_swept_too() -> None:
    # each class round-trips alone; the worker's step, found by the analysis, does not
    done = _fuzz(STEP_SWEEP, "--examples", "10")
    assert done.returncode == 1, done.stderr
    lines = done.stdout.splitlines()
    assert f"PASS {WORKER_INPUT}  (10 examples)" in lines
    assert f"PASS {MODEL_INPUT}  (10 examples)" in lines
    step = f"{WORKER_INPUT}+{MODEL_INPUT}"
    assert f"FAIL {step}  (after " in done.stdout
    assert "ModelInput.__init__() got an unexpected keyword argument 'virtual_engine'" in (
        done.stdout
    )
    assert f"replay: runnercheck fuzz {step} --seed 3 --examples 10" in done.stdout
    table = lines[lines.index("") + 1 :]
    assert [row.split()[:2] for row in table[1:4]] == [
        ["PASS", WORKER_INPUT],
        ["PASS", MODEL_INPUT],
        ["FAIL", step],
    ]
    assert "Traceback" not in done.stdout + done.stderr


def test_a_swept_step_that_cannot_be_made_is_one_error_line() -> None:
    broken = "tests.fuzz.fixtures.step_sweep_broken.worker"
    done = _fuzz("tests/fuzz/fixtures/step_sweep_broken", "--examples", "5")
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stdout.splitlines()
    assert f"PASS {broken}:WorkerInput  (5 examples)" in lines
    for name in (f"{broken}:ModelInput", f"{broken}:WorkerInput+{broken}:ModelInput"):
        assert any(
            line.startswith(f"ERROR {name}: cannot run: making an example raised TypeError")
            for line in lines
        ), done.stdout
    assert lines[-1] == "2 of 3 classes could not run"
    assert "Traceback" not in done.stdout + done.stderr
