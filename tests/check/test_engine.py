"""The engine runnercheck ships: the legacy shape has one paired-broadcast finding per
worker/runner pair, the merged shape has no finding at all."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from runnercheck.analysis import stepwalk
from runnercheck.analysis.extract import extract_file
from runnercheck.analysis.model import FunctionFacts
from runnercheck.analysis.project import Project
from tests.check.conftest import REPO, CliResult

ENGINE = REPO / "runnercheck" / "demo" / "engine"
LEGACY_PAIRS = {
    ("Worker", "ModelRunner"),
    ("Worker", "EmbeddingModelRunner"),
    ("CPUWorker", "CPUModelRunner"),
}


def project_of(directory: Path) -> Project:
    return Project(extract_file(p) for p in sorted(directory.glob("*.py")))


def test_legacy_engine_pairs() -> None:
    project = project_of(ENGINE / "legacy")
    pairs = {(w.name, r.name) for w, r in project.worker_runner_pairs()}
    assert pairs == LEGACY_PAIRS
    for worker, runner in project.worker_runner_pairs():
        counts = project.broadcasts_per_step(worker, runner)
        assert counts["driver"].count == 2 and counts["non-driver"].count == 2
        # one broadcast in the worker, one in the runner, on both paths
        for role in ("driver", "non-driver"):
            owners = [site.where.split(".")[0] for site in counts[role].sites]
            assert owners[0] == worker.name
            assert owners[1] in {k.name for k in project.mro(runner)}


def test_the_step_walk_finds_each_function_s_first_model_call_once(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Every collective and loop the walk meets asks where the model first runs in its
    function; the answer is found once per function, however many ask."""
    asked: list[str] = []
    real = stepwalk.first_model_call

    def counted(func: FunctionFacts) -> int | None:
        asked.append(func.qualname)
        return real(func)

    monkeypatch.setattr(stepwalk, "first_model_call", counted)
    project = project_of(ENGINE / "legacy")
    for worker, runner in project.worker_runner_pairs():
        project.broadcasts_per_step(worker, runner)
    # the legacy step: the worker's and the runner's broadcasts, each asking on both roles
    assert {"Worker.execute_model", "ModelRunner.prepare_input_tensors"} <= set(asked)
    assert len(asked) == len(set(asked))


def test_legacy_engine_one_paired_broadcast_per_pair(run: Callable[..., CliResult]) -> None:
    result = run("runnercheck/demo/engine/legacy")
    assert result.code == 1
    subjects = set()
    for line in result.finding_lines:
        location, code, message = line.split(" ", 2)[0], line.split(" ")[1], line.split(" ", 2)[2]
        assert code == "RC106"
        worker, _, rest = message.partition(" and ")
        runner = rest.split(" ")[0]
        subjects.add((worker, runner))
        assert "2 times per step on the driver path" in message
        assert "and 2 on the non-driver path" in message
        assert message.endswith("run `runnercheck migrate`")
        # reported at the runner's own broadcast, the one a merge removes
        assert location.startswith("runnercheck/demo/engine/legacy/")
        assert "model_runner.py:" in location
    assert subjects == LEGACY_PAIRS
    assert len(result.finding_lines) == len(LEGACY_PAIRS)


def test_merged_engine_is_clean(run: Callable[..., CliResult]) -> None:
    result = run("runnercheck/demo/engine/merged")
    assert result.finding_lines == []
    assert result.code == 0
    project = project_of(ENGINE / "merged")
    pairs = project.worker_runner_pairs()
    assert {(w.name, r.name) for w, r in pairs} == LEGACY_PAIRS
    for worker, runner in pairs:
        counts = project.broadcasts_per_step(worker, runner)
        assert counts["driver"].count == 1 and counts["non-driver"].count == 1


def test_whole_engine_keeps_shapes_apart(run: Callable[..., CliResult]) -> None:
    """Both shapes in one run: same class names in two packages do not mix."""
    result = run("runnercheck/demo/engine")
    legacy = [line for line in result.finding_lines if "/legacy/" in line]
    assert len(legacy) == len(LEGACY_PAIRS)
    # nothing else: the speculative-decoding worker's control values travel in its
    # first inner step's broadcast (no RC110)
    assert [line for line in result.finding_lines if line not in legacy] == []
