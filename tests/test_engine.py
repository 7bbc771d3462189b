"""The tiny engine in both shapes, on real multi-process gloo groups."""

from __future__ import annotations

import dataclasses
import json
import shutil
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from runnercheck.contract import is_driver_only_metadata
from runnercheck.demo.engine import engine_source_dir, run_engine, run_swap_only_scenario

STEPS = 24
SHAPES = ("legacy", "merged")
ROOT = Path(__file__).resolve().parents[1]


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "runnercheck.demo.engine", *args],
        capture_output=True,
        text=True,
        timeout=240,
        cwd=ROOT,
    )


def _cli_json(shape: str, tp: int) -> dict[str, Any]:
    done = _cli("--shape", shape, "--tp", str(tp), "--steps", str(STEPS), "--json", "--seed", "0")
    assert done.returncode == 0, done.stderr
    result: dict[str, Any] = json.loads(done.stdout)
    return result


@pytest.fixture(scope="module")
def runs() -> dict[tuple[str, int], dict[str, Any]]:
    """tp 1 through the Python API, tp 2 through the command line (--json)."""
    results = {(shape, 1): run_engine(shape, tp=1, steps=STEPS, seed=0) for shape in SHAPES}
    results.update({(shape, 2): _cli_json(shape, 2) for shape in SHAPES})
    return results


@pytest.mark.slow
@pytest.mark.parametrize("tp", [1, 2])
def test_shapes_generate_the_same_tokens(
    runs: dict[tuple[str, int], dict[str, Any]], tp: int
) -> None:
    legacy, merged = runs["legacy", tp], runs["merged", tp]
    assert legacy["num_tokens"] > STEPS
    assert legacy["tokens_sha256"] == merged["tokens_sha256"]


def test_ranks_forked_from_the_server_run_the_same_steps(
    runs: dict[tuple[str, int], dict[str, Any]],
) -> None:
    """The demo's fork server changes how ranks start, not what they compute."""
    for shape in SHAPES:
        forked = run_engine(shape, tp=2, steps=STEPS, seed=0, fork_server=True)
        fresh = runs[shape, 2]
        assert forked["tokens_sha256"] == fresh["tokens_sha256"]
        assert forked["broadcasts_per_step"] == fresh["broadcasts_per_step"]


def test_tensor_parallel_split_keeps_the_tokens(
    runs: dict[tuple[str, int], dict[str, Any]],
) -> None:
    assert runs["legacy", 1]["tokens_sha256"] == runs["legacy", 2]["tokens_sha256"]


def test_seed_changes_the_tokens(runs: dict[tuple[str, int], dict[str, Any]]) -> None:
    other = run_engine("merged", tp=1, steps=STEPS, seed=1)
    assert other["tokens_sha256"] != runs["merged", 1]["tokens_sha256"]


@pytest.mark.slow
@pytest.mark.parametrize(
    ("worker", "embedding"), [("cpu", False), ("default", True)], ids=["cpu-worker", "embedding"]
)
def test_variants_agree_across_shapes(worker: str, embedding: bool) -> None:
    legacy, merged = (
        run_engine(shape, tp=2, steps=4 if embedding else 8, worker=worker, embedding=embedding)
        for shape in ("legacy", "merged")
    )
    assert (legacy["broadcasts_per_step"], merged["broadcasts_per_step"]) == (2, 1)
    digest = "embeddings_sha256" if embedding else "tokens_sha256"
    assert legacy[digest] is not None
    assert legacy[digest] == merged[digest]
    if worker == "cpu":
        # The CPU cache never swaps; forked prompts still copy their shared block.
        assert legacy["scheduler"]["blocks_swapped_out"] == 0
        assert legacy["scheduler"]["blocks_copied"] > 0


def test_broadcasts_per_step_at_tp2(runs: dict[tuple[str, int], dict[str, Any]]) -> None:
    legacy, merged = runs["legacy", 2], runs["merged", 2]
    assert legacy["broadcasts_per_step"] == 2
    assert legacy["broadcasts_per_step_list"] == [2] * STEPS
    assert merged["broadcasts_per_step"] == 1
    assert merged["broadcasts_per_step_list"] == [1] * STEPS
    # The non-driver received exactly what the driver sent, plus the stop signal.
    assert legacy["non_drivers"][0]["broadcasts_received"] == 2 * STEPS + 1
    assert merged["non_drivers"][0]["broadcasts_received"] == STEPS + 1
    assert merged["non_drivers"][0]["stopped_by_driver"] is True


def test_swaps_and_copies_reach_every_rank(runs: dict[tuple[str, int], dict[str, Any]]) -> None:
    for shape in ("legacy", "merged"):
        result = runs[shape, 2]
        stats = result["scheduler"]
        assert stats["blocks_swapped_out"] > 0, stats
        assert stats["blocks_swapped_in"] > 0, stats
        assert stats["blocks_copied"] > 0, stats
        assert stats["prefill_steps"] > 0 and stats["decode_steps"] > 0, stats
        assert result["host_blocks_written"] > 0
        assert result["non_drivers"][0]["host_blocks_written"] == result["host_blocks_written"]


@pytest.mark.parametrize("shape", SHAPES)
def test_cli_json_fields(runs: dict[tuple[str, int], dict[str, Any]], shape: str) -> None:
    result = runs[shape, 2]
    assert result["shape"] == shape and result["tp"] == 2 and result["steps"] == STEPS
    assert result["broadcasts_per_step"] == {"legacy": 2, "merged": 1}[shape]
    assert result["tokens_per_s"] > 0 and result["step_time_s"] > 0
    assert len(result["tokens_sha256"]) == 64


@pytest.mark.slow
def test_copied_engine_directory_runs_in_place(
    runs: dict[tuple[str, int], dict[str, Any]], tmp_path: Path
) -> None:
    copy = tmp_path / "engine"
    shutil.copytree(engine_source_dir("legacy"), copy)
    result = run_engine(None, tp=2, steps=STEPS, engine_dir=str(copy))
    assert result["tokens_sha256"] == runs["legacy", 2]["tokens_sha256"]
    assert result["broadcasts_per_step"] == 2


@pytest.mark.slow
def test_swap_only_step_legacy_non_driver_leaves_its_loop() -> None:
    """0.5.0: the non-driver applies the swap, then returns from its loop because
    num_seq_groups == 0; the driver's next broadcast finds nobody listening."""
    outcome = run_swap_only_scenario("legacy", tp=2)
    assert outcome["completed"] is False
    assert outcome["driver"].startswith("EngineRunError: step 3 (decode)")
    (non_driver,) = outcome["non_drivers"]
    assert outcome["non_drivers_ok"] == [True]
    # Steps 0 and 1: worker dict + runner dict each; step 2: the worker dict only.
    assert non_driver["received_sizes"][:4] == [4, 16, 4, 16]
    assert non_driver["received_sizes"][4:] == [4]
    assert non_driver["stopped_by_driver"] is False
    assert non_driver["host_blocks_written"] > 0


@pytest.mark.slow
def test_swap_only_step_merged_loop_goes_on() -> None:
    """0.5.1: the swap runs on every rank, only the model execution is skipped, and
    the non-driver keeps serving until the driver stops it."""
    outcome = run_swap_only_scenario("merged", tp=2)
    assert outcome["completed"] is True, outcome["driver"]
    driver = outcome["driver"]
    assert driver["scheduler"]["swap_only_steps"] == 1
    assert driver["scheduler"]["blocks_swapped_in"] > 0
    assert driver["broadcasts_per_step_list"] == [1, 1, 1, 1, 1]
    (non_driver,) = outcome["non_drivers"]
    sizes = non_driver["received_sizes"]
    assert len(sizes) == 6 and sizes[-1] == 0 and non_driver["stopped_by_driver"] is True
    # The swap-only step carries the worker's keys, num_steps and no model input tensors.
    assert sizes[2] < sizes[1]
    assert non_driver["host_blocks_written"] == driver["host_blocks_written"] > 0


@pytest.mark.slow
def test_cli_reports_a_failing_rank_in_one_line(tmp_path: Path) -> None:
    broken = tmp_path / "broken"
    shutil.copytree(engine_source_dir("legacy"), broken)
    worker = broken / "worker.py"
    source = worker.read_text()
    needle = 'num_seq_groups = data.get("num_seq_groups", 0)'
    assert needle in source
    worker.write_text(source.replace(needle, 'num_seq_groups = data["num_seq_groupz"]'))
    done = _cli("--engine-dir", str(broken), "--tp", "2", "--steps", "3", "--timeout", "10")
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert "rank 1: KeyError" in lines[0] and "num_seq_groupz" in lines[0]
    assert done.stdout == ""


@pytest.mark.slow
def test_a_stuck_rank_is_killed_and_reported(tmp_path: Path) -> None:
    """Rank 1 never enters its loop: the driver's broadcast times out, and rank 1 is
    killed a grace period later instead of holding the run forever."""
    stuck = tmp_path / "stuck"
    shutil.copytree(engine_source_dir("legacy"), stuck)
    worker = stuck / "worker.py"
    source = worker.read_text()
    loop = "        while self._execute_model_non_driver():"
    assert loop in source
    worker.write_text(source.replace(loop, "        __import__('time').sleep(3600)\n" + loop))
    started = time.monotonic()
    done = _cli("--engine-dir", str(stuck), "--tp", "2", "--steps", "3", "--timeout", "2")
    assert time.monotonic() - started < 60
    assert done.returncode == 1
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("python -m runnercheck.demo.engine: error: rank 0: ")
    assert "step 0 (prefill)" in lines[0] and "Timed out" in lines[0]


def test_cli_rejects_a_missing_directory(tmp_path: Path) -> None:
    done = _cli("--engine-dir", str(tmp_path / "nope"), "--tp", "2")
    assert done.returncode == 2
    assert done.stderr.strip().splitlines() == [
        f"python -m runnercheck.demo.engine: error: {tmp_path / 'nope'}: not a directory"
    ]


def test_merged_inputs_declare_driver_only_fields() -> None:
    from runnercheck.demo.engine.merged.embedding_model_runner import (
        ModelInputForGPUWithPoolingMetadata,
    )
    from runnercheck.demo.engine.merged.model_runner import ModelInputForGPUWithSamplingMetadata

    def driver_only(cls: type) -> set[str]:
        return {f.name for f in dataclasses.fields(cls) if is_driver_only_metadata(f.metadata)}

    assert driver_only(ModelInputForGPUWithSamplingMetadata) == {
        "seq_lens",
        "query_lens",
        "is_prompt",
    }
    assert driver_only(ModelInputForGPUWithPoolingMetadata) == {
        "seq_lens",
        "query_lens",
        "pooling_metadata",
    }
    empty = ModelInputForGPUWithPoolingMetadata().as_broadcastable_tensor_dict()
    assert not driver_only(ModelInputForGPUWithPoolingMetadata) & set(empty)


@pytest.mark.slow
def test_merged_shape_and_shared_modules_type_check() -> None:
    """``mypy --strict`` on the merged shape, the shared model/scheduler and the launcher
    (the legacy shape is typed the way vLLM 0.5.0 was, not strictly)."""
    merged = engine_source_dir("merged")
    files = sorted(str(path) for path in [*merged.glob("*.py"), *merged.parent.glob("*.py")])
    done = subprocess.run(
        # A cache of its own: --strict differs from the project's options.
        [sys.executable, "-m", "mypy", "--strict", "--cache-dir", ".mypy_cache/engine", *files],
        capture_output=True,
        text=True,
        timeout=300,
        cwd=ROOT,
    )
    assert done.returncode == 0, done.stdout + done.stderr
