"""`runnercheck demo`: every stage of the story, through the real command."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from runnercheck.demo.story import DemoOptions, prepare_workspace, stage_migrate, stage_mypy


@pytest.mark.slow
def test_demo_json_every_stage_agrees() -> None:
    proc = subprocess.run(
        [
            sys.executable,
            "-m",
            "runnercheck",
            "demo",
            "--json",
            "--repeats",
            "1",
            "--steps",
            "8",
            "--examples",
            "15",
        ],
        capture_output=True,
        text=True,
        timeout=240,
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    stages = {stage["name"]: stage for stage in report["stages"]}
    assert list(stages) == ["check", "migrate", "recheck", "mypy", "fuzz", "engines"]
    assert report["ok"] is True
    assert all(stage["ok"] for stage in stages.values())

    check = stages["check"]["details"]
    pairs = sorted(f["path"].rsplit("/", 1)[-1] for f in check["findings"])
    assert pairs == ["cpu_model_runner.py", "embedding_model_runner.py", "model_runner.py"]
    assert {f["code"] for f in check["findings"]} == {"RC106"}

    # the files and classes the README's run of the demo names
    assert sorted(Path(f).name for f in stages["migrate"]["details"]["written"]) == [
        "cpu_model_runner.py",
        "cpu_worker.py",
        "embedding_model_runner.py",
        "model_runner.py",
        "model_runner_base.py",
        "worker.py",
        "worker_input.py",
    ]
    assert stages["migrate"]["details"]["refusals"] == []
    assert stages["recheck"]["details"]["findings"] == []
    assert stages["mypy"]["details"]["errors"] == []
    assert len(stages["fuzz"]["details"]["classes"]) == 4

    engines = stages["engines"]["details"]
    assert len(engines["tokens_sha256"]) == 1
    assert engines["broadcasts_per_step"] == {"legacy": 2, "migrated": 1}
    assert engines["step_time_ratio"]["median"] > 0


@pytest.mark.slow
def test_mypy_stage_fails_on_a_defect(tmp_path: Path) -> None:
    """The mypy stage is a real mypy run with the plugin: a fixed-class return fails it."""
    ws = prepare_workspace(tmp_path)
    assert stage_migrate(ws, DemoOptions()).ok
    runner = ws.migrated / "model_runner.py"
    text = runner.read_text(encoding="utf-8")
    broken = text.replace("cls: Type[TModelRunnerInput],", "cls,", 1).replace(
        ") -> TModelRunnerInput:", ') -> "ModelRunnerInput":', 1
    )
    assert broken != text
    runner.write_text(broken, encoding="utf-8")
    result = stage_mypy(ws, DemoOptions())
    assert not result.ok
    assert len(result.details["errors"]) == 1
    assert "[from-dict-fixed-return]" in result.details["errors"][0]


@pytest.mark.slow
def test_demo_rejects_bad_arguments() -> None:
    proc = subprocess.run(
        [sys.executable, "-m", "runnercheck", "demo", "--steps", "2"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2
    assert proc.stderr.strip().splitlines() == [
        "runnercheck: error: --steps must be at least 4 (2 warm-up steps are left out of timing)"
    ]
