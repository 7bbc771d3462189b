"""The committed coverage benchmark runs: one two-broadcast release, end to end."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

from tests.vllm_wheels import vllm_source

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.vllm
def test_coverage_of_one_release_migrates_every_runner_file(tmp_path: Path) -> None:
    try:
        vllm_source("0.5.0")
    except RuntimeError as exc:  # no package index: say so instead of failing obscurely
        pytest.skip(f"vllm==0.5.0 not available: {exc}")
    spec = importlib.util.spec_from_file_location(
        "migrate_coverage", REPO / "benchmarks" / "migrate_coverage.py"
    )
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["migrate_coverage"] = module
    spec.loader.exec_module(module)
    result = module.measure("0.5.0", tmp_path, plugin=False)
    assert result.runner_files and result.migrated == result.runner_files
    assert result.refused == {} and result.compiles and result.rc106_after == 0
    assert result.second_run_changes == 0
